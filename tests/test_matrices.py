"""Matrices Parquet round trip, atomic writes, and the scores table built from a stream."""

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from wqk.blocks import AttentionBlock
from wqk.contracts import ModelInfo
from wqk.matrices import read_blocks, write_matrices
from wqk.metrics import score_block
from wqk.score_table import layer_table, score_stream, write_scores

INFO = ModelInfo("toy/model", "toy/model", "sha256:0", "llama", True)


def toy_blocks():
    g = torch.Generator().manual_seed(0)
    yield AttentionBlock("encoder", 0, torch.randn(4, 16, 4, generator=g), torch.randn(4, 16, 4, generator=g))
    yield AttentionBlock("encoder", 1, torch.randn(4, 16, 4, generator=g), torch.randn(4, 16, 4, generator=g))
    yield AttentionBlock("decoder", 0, torch.randn(8, 16, 2, generator=g), torch.randn(2, 16, 2, generator=g))
    yield AttentionBlock("cross", 0, torch.randn(2, 16, 3, generator=g), torch.randn(2, 12, 3, generator=g))


def test_round_trip_keeps_every_head_and_one_row_group_per_layer(tmp_path):
    out = tmp_path / "m.parquet"
    assert write_matrices(INFO, toy_blocks(), out) == 4
    pf = pq.ParquetFile(out)
    assert pf.num_row_groups == 4
    assert pf.metadata.num_rows == 4 + 4 + 8 + 2
    back = list(read_blocks(out))
    for (info, got), want in zip(back, toy_blocks()):
        assert info == INFO
        assert (got.stack, got.layer) == (want.stack, want.layer)
        torch.testing.assert_close(got.q, want.q)
        torch.testing.assert_close(got.k, want.k)
    t = pq.read_table(out, columns=["head", "kv_head"]).to_pandas()
    assert t["kv_head"].tolist()[8:16] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_failed_extraction_leaves_nothing(tmp_path):
    def broken():
        yield next(toy_blocks())
        raise RuntimeError("disk on fire")

    out = tmp_path / "m.parquet"
    with pytest.raises(RuntimeError):
        write_matrices(INFO, broken(), out)
    assert list(tmp_path.iterdir()) == []


def test_scores_table_has_head_and_layer_rows(tmp_path):
    df = score_stream(((INFO, b) for b in toy_blocks()), device="cpu", progress=False)
    layers = df[df["scope"] == "layer"]
    assert len(layers) == 4 and layers["head"].isna().all()
    assert len(df[df["scope"] == "head"]) == 18
    assert dict(layers.groupby("stack")["n_layers"].first()) == {"cross": 1, "decoder": 1, "encoder": 2}
    cross = layers[layers["stack"] == "cross"].iloc[0]
    assert np.isnan(cross["symmetry"]) and "non-square" in cross["reason"]
    block = next(toy_blocks())
    per_head, per_layer = score_block(block)
    first = df[(df["stack"] == "encoder") & (df["layer"] == 0)]
    assert first.iloc[0]["symmetry"] == pytest.approx(per_layer["symmetry"][0])
    np.testing.assert_allclose(first.iloc[1:]["symmetry"], per_head["symmetry"])
    out = tmp_path / "s.parquet"
    write_scores(df, out)
    write_scores(df, tmp_path / "s2.parquet")
    assert out.read_bytes() == (tmp_path / "s2.parquet").read_bytes()
    assert "median" in layer_table(df)


def test_scores_table_keeps_nan_and_writes_like_its_dataframe(tmp_path):
    import pyarrow.compute as pc
    from wqk.score_table import score_table, to_frame

    table = score_table(((INFO, b) for b in toy_blocks()), device="cpu", progress=False)
    cross = table.filter(pc.equal(table["stack"], "cross"))
    assert all(v != v for v in cross["symmetry"].to_pylist())  # NaN, not null: "undefined" is a value
    assert table["head"].null_count == 4  # the per-layer rows
    write_scores(table, tmp_path / "t.parquet")
    write_scores(to_frame(table), tmp_path / "f.parquet")
    assert (tmp_path / "t.parquet").read_bytes() == (tmp_path / "f.parquet").read_bytes()
    back = pq.read_table(tmp_path / "t.parquet")
    assert back.schema == table.schema
    pd.testing.assert_frame_equal(back.to_pandas(), table.to_pandas())  # NaN == NaN here
