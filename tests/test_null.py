"""The null reference draws a bounded number of layers per stack, spread over depth, each
seeded by itself; `wqk score --null-out` and `wqk null` write the same file."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from wqk.cli import main
from wqk.null import drawn_layers, n_draws, null_scores, null_table
from wqk.tiny import build_tiny


@pytest.mark.parametrize(
    "n,draws", [(1, 1), (2, 2), (3, 2), (8, 2), (9, 3), (12, 3), (24, 6), (32, 8), (48, 8), (126, 8)]
)
def test_a_quarter_of_the_layers_at_least_2_at_most_8(n, draws):
    assert n_draws(n) == draws
    picked = drawn_layers(list(range(n)))
    assert len(picked) == draws == len(set(picked))
    assert picked[0] == 0 and picked[-1] == n - 1  # both ends of the stack
    gaps = np.diff(picked)
    assert gaps.max() - gaps.min() <= 1 if n > 1 else True  # evenly spread
    assert drawn_layers(list(range(n)), all_layers=True) == list(range(n))


def scores_of(layers: dict[str, int], d=32, k=8, h=4, h_kv=2) -> pd.DataFrame:
    rows = [
        dict(model="org/deep", model_type="llama", stack=stack, layer=layer, n_layers=n, scope="layer",
             n_heads=h, n_kv_heads=h_kv, d_q=d, d_k=d, head_dim=k)
        for stack, n in layers.items() for layer in range(n)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_deep_stacks_draw_few_layers_with_their_own_seeds():
    s = scores_of({"encoder": 24, "decoder": 126})
    null = null_scores(s, seed=3)
    layers = null[null["scope"] == "layer"]
    assert layers.groupby("stack")["layer"].apply(list).to_dict() == {
        "decoder": drawn_layers(list(range(126))),
        "encoder": drawn_layers(list(range(24))),
    }
    # n_layers stays the model's, so relative depths stay right
    assert layers.groupby("stack")["n_layers"].unique().map(list).to_dict() == {"decoder": [126], "encoder": [24]}
    assert (null["scope"] == "head").sum() == 4 * (8 + 6)
    # a drawn layer's null is the one drawing every layer gives it
    every = null_scores(s[s["stack"] == "encoder"], seed=3, all_layers=True)
    mine = layers[layers["stack"] == "encoder"].set_index("layer")["symmetry"]
    theirs = every[every["scope"] == "layer"].set_index("layer")["symmetry"]
    np.testing.assert_array_equal(mine.to_numpy(), theirs.loc[mine.index].to_numpy())


def test_null_table_takes_arrow_or_pandas_alike():
    s = scores_of({"encoder": 3})
    a = null_table(s, seed=1)
    b = null_table(pa.Table.from_pandas(s, preserve_index=False), seed=1)
    assert "stable_rank" in a.column_names  # the spectra of the scores' own columns; NaN on layer rows
    assert a.schema == b.schema and a.to_pandas().equals(b.to_pandas())  # pandas: NaN equals NaN


def test_score_null_out_equals_wqk_null(tmp_path):
    folder = build_tiny("llama", tmp_path / "tiny")
    scores, null_a, null_b = tmp_path / "s.parquet", tmp_path / "a.parquet", tmp_path / "b.parquet"
    argv = ["score", str(folder), "--out", str(scores), "--null-out", str(null_a), "--null-seed", "7"]
    assert main([*argv, "--device", "cpu", "--quiet"]) == 0
    assert main(["null", "--scores", str(scores), "--out", str(null_b), "--seed", "7"]) == 0
    assert null_a.read_bytes() == null_b.read_bytes()
    null = pq.read_table(null_a).to_pandas()
    assert set(null["model"]) == {f"{folder} (null)"} and null["synthetic"].all()
    assert sorted(null.loc[null["scope"] == "layer", "layer"]) == [0, 1]  # 2 layers: both drawn
