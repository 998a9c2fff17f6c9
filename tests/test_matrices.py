"""Matrices Parquet: round trip at the checkpoint's precision with each key head once,
atomic and deterministic writes, the size bound, scores identical (bitwise) to scoring
the checkpoint, and the scores table built from a stream."""

import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file, save_file

from wqk.blocks import AttentionBlock
from wqk.checkpoints import open_checkpoint
from wqk.cli import main
from wqk.contracts import MATRICES_SCHEMA, ModelInfo
from wqk.errors import WqkError
from wqk.matrices import MatricesWriter, read_blocks, write_matrices
from wqk.metrics import score_block
from wqk.score_table import layer_table, score_stream, write_scores
from wqk.tiny import build_tiny

INFO = ModelInfo("toy/model", "toy/model", "sha256:0", "llama", True)
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def toy_blocks(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    yield AttentionBlock("encoder", 0, r(4, 16, 4), r(4, 16, 4))
    yield AttentionBlock("encoder", 1, r(4, 16, 4), r(4, 16, 4))
    yield AttentionBlock("decoder", 0, r(8, 16, 2), r(2, 16, 2))
    yield AttentionBlock("cross", 0, r(2, 16, 3), r(2, 12, 3))


def test_round_trip_keeps_every_head_and_one_row_group_per_layer(tmp_path):
    out = tmp_path / "m.parquet"
    assert write_matrices(INFO, toy_blocks(), out) == 4
    pf = pq.ParquetFile(out)
    assert pf.num_row_groups == 4
    assert pf.metadata.num_rows == (4 + 4) + (4 + 4) + (8 + 2) + (2 + 2)  # query heads, then each key head once
    assert pf.schema_arrow.remove_metadata() == MATRICES_SCHEMA.remove_metadata()
    back = list(read_blocks(out))
    for (info, got), want in zip(back, toy_blocks(), strict=True):
        assert info == INFO
        assert (got.stack, got.layer) == (want.stack, want.layer)
        assert got.q.shape == want.q.shape and got.k.shape == want.k.shape  # K not re-expanded
        assert torch.equal(got.q, want.q) and torch.equal(got.k, want.k)
    t = pq.read_table(out, columns=["stack", "factor", "head", "kv_head"]).to_pandas()
    dec = t[t["stack"] == "decoder"]
    assert dec["factor"].tolist() == ["q"] * 8 + ["k"] * 2
    assert dec["kv_head"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 0, 1]
    assert dec["head"].tolist() == [*range(8), 0, 1]


def decode(weight: bytes, dtype: str, shape) -> np.ndarray:
    """A `weight` value as float32, with numpy alone (as the schema's comment says)."""
    if dtype == "bfloat16":
        return (np.frombuffer(weight, "<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return np.frombuffer(weight, {"float32": "<f4", "float16": "<f2"}[dtype]).astype(np.float32).reshape(shape)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_round_trip_at_source_precision(tmp_path, dtype):
    out = tmp_path / "m.parquet"
    write_matrices(INFO, toy_blocks(DTYPES[dtype]), out)
    table = pq.read_table(out)
    assert set(table["dtype"].to_pylist()) == {dtype}
    itemsize = DTYPES[dtype].itemsize
    assert [len(w) for w in table["weight"].to_pylist()[:5]] == [4 * 16 * itemsize] * 5  # [head_dim, d] each
    for (_, got), want in zip(read_blocks(out), toy_blocks(DTYPES[dtype]), strict=True):
        assert got.q.dtype == got.k.dtype == DTYPES[dtype]
        assert torch.equal(got.q, want.q) and torch.equal(got.k, want.k)
    # a reader without wqk sees the values: the first query head of the first layer, [head_dim, d]
    first = decode(table["weight"][0].as_py(), dtype, (4, 16))
    np.testing.assert_array_equal(first, next(toy_blocks(DTYPES[dtype])).q[0].T.float().numpy())


def test_writes_are_deterministic_and_atomic(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_matrices(INFO, toy_blocks(torch.bfloat16), a)
    with MatricesWriter(b) as w:
        for block in toy_blocks(torch.bfloat16):
            assert not b.exists()  # appears only when complete
            w.write(INFO, block)
    assert w.n == 4 and a.read_bytes() == b.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet"]


def test_a_file_without_the_factors_is_refused_with_a_fix(tmp_path):
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"stack": ["encoder"], "layer": [0], "q": [[1.0]], "k": [[1.0]]}), other)
    with pytest.raises(WqkError, match="not a matrices Parquet.*wqk extract"):
        next(read_blocks(other))


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


# --- a grouped-query checkpoint at each precision -----------------------------------------


def _llama(folder, dtype: str, **overrides):
    """A tiny grouped-query Llama (8 query heads on 2 key heads) converted to dtype."""
    build_tiny("llama", folder / "f32", **overrides)
    out = folder / dtype
    out.mkdir()
    shutil.copy(folder / "f32" / "config.json", out / "config.json")
    tensors = load_file(folder / "f32" / "model.safetensors")
    save_file({n: t.to(DTYPES[dtype]) for n, t in tensors.items()}, out / "model.safetensors")
    shutil.rmtree(folder / "f32")
    return out


def _qk_tensors(folder):
    tensors = load_file(folder / "model.safetensors")
    return {n: t for n, t in tensors.items() if n.endswith(("q_proj.weight", "k_proj.weight"))}


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_gqa_checkpoint_matrices_hold_each_key_head_once_and_score_bitwise_alike(tmp_path, dtype):
    folder = _llama(tmp_path, dtype)
    ckpt = open_checkpoint(str(folder))
    assert ckpt.store.get("model.layers.0.self_attn.k_proj.weight").dtype == DTYPES[dtype]  # stores keep it
    m, direct, tee, back = (tmp_path / f"{n}.parquet" for n in ("m", "direct", "tee", "back"))
    null = tmp_path / "null.parquet"
    assert main(["score", str(folder), "--out", str(direct), "--device", "cpu", "--quiet"]) == 0
    argv = ["score", str(folder), "--matrices-out", str(m), "--null-out", str(null), "--out", str(tee)]
    assert main([*argv, "--device", "cpu", "--quiet"]) == 0
    assert main(["score", str(m), "--out", str(back), "--device", "cpu", "--quiet"]) == 0
    # the same scores to the last bit, from the checkpoint, teed, and from the matrices file
    assert direct.read_bytes() == tee.read_bytes() == back.read_bytes()
    # `wqk extract` writes the very file that `wqk score --matrices-out` tees
    assert main(["extract", str(folder), "--out", str(tmp_path / "x.parquet")]) == 0
    assert (tmp_path / "x.parquet").read_bytes() == m.read_bytes()

    table = pq.read_table(m)
    assert set(table["dtype"].to_pylist()) == {dtype}
    assert pq.ParquetFile(m).num_row_groups == 2  # one per layer
    qk = _qk_tensors(folder)
    for layer in (0, 1):
        rows = table.filter(pc.equal(table["layer"], layer)).to_pydict()
        assert rows["factor"] == ["q"] * 8 + ["k"] * 2 and rows["kv_head"] == [0, 0, 0, 0, 1, 1, 1, 1, 0, 1]
        for factor, n in (("q", 8), ("k", 2)):
            stored = [decode(w, dtype, (8, 64)) for f, w in zip(rows["factor"], rows["weight"]) if f == factor]
            source = qk[f"model.layers.{layer}.self_attn.{factor}_proj.weight"].float().numpy()  # [n * k, d]
            assert len(stored) == n
            np.testing.assert_array_equal(np.concatenate(stored), source)  # exact: no rounding anywhere
    info, block = next(read_blocks(m))
    assert block.q.dtype == block.k.dtype == DTYPES[dtype] and block.k.shape == (2, 64, 8)
    assert info.synthetic and info.provenance == pd.read_parquet(direct)["provenance"].iloc[0]


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_matrices_size_is_at_most_1_2x_the_checkpoint_qk_bytes(tmp_path, dtype):
    folder = _llama(tmp_path, dtype, hidden_size=512, num_attention_heads=8, num_key_value_heads=2)
    qk_bytes = sum(t.numel() * t.element_size() for t in _qk_tensors(folder).values())
    m = tmp_path / "m.parquet"
    assert main(["extract", str(folder), "--out", str(m)]) == 0
    ratio = m.stat().st_size / qk_bytes
    assert ratio <= 1.2, f"{dtype}: matrices file {m.stat().st_size} B = {ratio:.3f} x the q/k bytes {qk_bytes}"
    assert ratio > 0.5  # random weights hardly compress: nothing was left out


def test_matrices_out_needs_a_source(tmp_path, capsys):
    write_matrices(INFO, toy_blocks(), tmp_path / "m.parquet")
    argv = ["score", str(tmp_path / "m.parquet"), "--matrices-out", str(tmp_path / "x.parquet")]
    assert main([*argv, "--out", str(tmp_path / "s.parquet")]) == 1
    assert "--matrices-out is for checkpoint sources" in capsys.readouterr().err


def test_background_writer_writes_the_same_bytes_and_reports_its_errors(tmp_path, monkeypatch):
    import wqk.matrices as matrices

    with MatricesWriter(tmp_path / "bg.parquet", background=True) as w:
        for info, block in w.tee(INFO, toy_blocks(torch.float16)):
            assert info == INFO and block.q.dtype == torch.float16
    write_matrices(INFO, toy_blocks(torch.float16), tmp_path / "fg.parquet")
    assert (tmp_path / "bg.parquet").read_bytes() == (tmp_path / "fg.parquet").read_bytes()

    real = matrices.block_table

    def failing(info, block, stored=False):
        if block.stack == "decoder":
            raise OSError("disk full")
        return real(info, block, stored)

    monkeypatch.setattr(matrices, "block_table", failing)
    with pytest.raises(OSError, match="disk full"):
        with MatricesWriter(tmp_path / "bad.parquet", background=True) as w:
            for _ in w.tee(INFO, toy_blocks()):
                pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bg.parquet", "fg.parquet"]


def test_heatmap_loader_reads_one_layer_at_source_precision(tmp_path):
    from wqk.figures import wqk_heatmaps

    blocks = list(toy_blocks(torch.bfloat16))
    write_matrices(INFO, blocks, tmp_path / "m.parquet")
    df = wqk_heatmaps.load("decoder", tmp_path / "m.parquet", layer=3)  # the decoder has layer 0 only
    assert df["head"].tolist() == list(range(8)) and set(df["layer"]) == {0}
    dec = blocks[2]
    for r in df.itertuples():  # each query head with its own key head, [d, head_dim], as float32
        np.testing.assert_array_equal(r.q.reshape(16, 2), dec.q[r.head].float().numpy())
        np.testing.assert_array_equal(r.k.reshape(16, 2), dec.k[r.head // 4].float().numpy())
    assert wqk_heatmaps.load("vision", tmp_path / "m.parquet").empty
