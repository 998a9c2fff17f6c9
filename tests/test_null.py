"""The null reference draws a bounded number of layers per stack, spread over depth, each
seeded by itself; `wqk score --null-out` and `wqk null` write the same file."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from wqk.cli import main
from wqk.null import HEAD_DRAWS, drawn_layers, n_draws, null_scores, null_table, query_heads, random_block
from wqk.tiny import build_tiny


@pytest.mark.parametrize(
    "n,draws", [(1, 1), (2, 1), (4, 1), (5, 2), (8, 2), (9, 3), (12, 3), (24, 6), (32, 8), (48, 8), (126, 8)]
)
def test_a_quarter_of_the_layers_at_least_1_at_most_8(n, draws):
    assert n_draws(n) == draws
    picked = drawn_layers(list(range(n)))
    assert len(picked) == draws == len(set(picked))
    assert picked[0] == 0 and (draws == 1 or picked[-1] == n - 1)  # the first layer; both ends when several
    gaps = np.diff(picked)
    assert gaps.max() - gaps.min() <= 1 if draws > 1 else True  # evenly spread
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
    # every key head (2) and, per drawn layer, enough of their query heads for HEAD_DRAWS rows a stack
    per_layer = {stack: 2 * query_heads(s.iloc[0], n_draws(n)) for stack, n in (("encoder", 24), ("decoder", 126))}
    assert per_layer == {"encoder": 2 * 2, "decoder": 2 * 1}  # 6 layers x 4 >= 16; 8 x 2 >= 16
    assert (null["scope"] == "head").sum() == 8 * per_layer["decoder"] + 6 * per_layer["encoder"]
    assert set(null["n_heads"]) == {4}  # the model's count, not the number drawn
    # a drawn layer's null is the one drawing every layer gives it
    every = null_scores(s[s["stack"] == "encoder"], seed=3, all_layers=True)
    mine = layers[layers["stack"] == "encoder"].set_index("layer")["symmetry"]
    theirs = every[every["scope"] == "layer"].set_index("layer")["symmetry"]
    np.testing.assert_array_equal(mine.to_numpy(), theirs.loc[mine.index].to_numpy())


def test_a_grouped_query_null_draws_some_query_heads_and_an_exact_layer_form():
    """With 32 query heads on 8 key heads, one drawn layer holds every key head and 2 query heads of
    each (HEAD_DRAWS = 16 rows). Its layer row is that of the summed query heads of each key head,
    whose entries are N(0, 2): a Gaussian head times sqrt(2), which scores as one N(0, 1) head
    (scale-free), as the sum of the model's 4 query heads does: the layer row's distribution is
    the model's. Over seeds, its spread is that of drawing all 32."""
    from wqk.blocks import AttentionBlock
    from wqk.metrics import score_block

    shape = {"n_heads": 32, "n_kv_heads": 8, "d_q": 48, "d_k": 48, "head_dim": 6}
    assert HEAD_DRAWS == 16 and query_heads(shape, 1) == 2 and query_heads(shape, 1, all_heads=True) == 4
    block = random_block("decoder", 0, shape, seed=0, per_key_head=2)
    assert (block.n_heads, block.n_kv_heads, block.group_size) == (16, 8, 2)
    summed = block.q.double().view(8, 2, 48, 6).sum(1)  # each key head's query heads, summed
    _, layer = score_block(block, dtype=torch.float64)
    for scale in (1.0, 2**-0.5, 3.0):  # scale-free: a factor's scale leaves every score
        _, one = score_block(AttentionBlock("decoder", 0, summed * scale, block.k), dtype=torch.float64)
        for m in ("symmetry", "directionality"):
            assert one[m][0] == pytest.approx(layer[m][0], rel=1e-9, abs=1e-12), (scale, m)

    def layer_symmetry(per_key_head):
        return np.array(
            [
                score_block(random_block("decoder", 0, shape, seed, per_key_head))[1]["symmetry"][0]
                for seed in range(300)
            ]
        )

    sampled, whole = layer_symmetry(2), layer_symmetry(4)
    assert abs(sampled.std() / whole.std() - 1) < 0.15
    q = [0.1, 0.5, 0.9]
    assert np.abs(np.quantile(sampled, q) - np.quantile(whole, q)).max() < 0.25 * whole.std()


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
    assert sorted(null.loc[null["scope"] == "layer", "layer"]) == [0]  # 2 layers: the first drawn
