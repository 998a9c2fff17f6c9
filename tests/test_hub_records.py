"""A hub fetch takes exactly the tensors the model_type's record reads (wqk.adapters.tensors):
q/k (or fused qkv) weights, biases and the pre-norm gains, so that a range-fetched model scores
like its local folder, folded metrics included; an unknown model_type falls back to the name
heuristic; a cache folder fetched with another selection is fetched again."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pandas as pd
import pytest
from safetensors import safe_open

from standin_hub import build, point_at, start
from wqk.adapters.tensors import tensor_filter
from wqk.checkpoints.hub import fetch_hub, is_qk_tensor
from wqk.cli import main
from wqk.ids import slug

PRE_NORM = {  # repo -> (model_type, the norm gain feeding its attention: never fetched by the heuristic)
    "meta-llama/Llama-3.1-8B": ("llama", "input_layernorm.weight"),  # gated, 4 shards + index
    "EleutherAI/gpt-neo-125m": ("gpt_neo", "ln_1.weight"),
    "microsoft/Phi-3-mini-4k-instruct": ("phi3", "input_layernorm.weight"),  # fused qkv_proj
}
FOLDED = ("symmetry_gain", "directionality_gain")
KEY = ["stack", "layer", "head"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = start(build(tmp_path_factory.mktemp("standin"), list(PRE_NORM)), log_unknown=False)
    yield server
    server.stop()


@pytest.fixture
def env(hub, tmp_path, monkeypatch):
    """`wqk` (and fetch_hub) talk to the stand-in, with its token, into this test's caches."""
    return point_at(hub, monkeypatch, tmp_path)


def _local(hub, repo: str) -> Path:
    return hub.root / "models" / repo


def _tensors(folder: Path) -> dict[str, int]:
    """name -> bytes of every tensor of a folder's safetensors files."""
    out = {}
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                t = f.get_slice(name)
                n = math.prod(t.get_shape())
                out[name] = n * {"F32": 4, "F16": 2, "BF16": 2}[t.get_dtype()]
    return out


def _cached(tmp_path: Path, repo: str) -> Path:
    (folder,) = [p.parent for p in (tmp_path / "wqk").glob(f"{slug(repo)}/*/.revision")]
    return folder


def _score(source: str, out: Path, capsys) -> pd.DataFrame:
    assert main(["score", source, "--metrics", "default,folded", "--out", str(out), "--quiet"]) == 0, (
        capsys.readouterr().err
    )
    return pd.read_parquet(out).sort_values(KEY).reset_index(drop=True)


@pytest.mark.parametrize("repo", list(PRE_NORM))
def test_range_fetched_pre_norm_model_scores_like_its_local_folder(repo, env, tmp_path, capsys):
    model_type, norm = PRE_NORM[repo]
    fetched = _score(repo, tmp_path / "hub.parquet", capsys)
    local_folder = _local(env, repo)
    local = _score(str(local_folder), tmp_path / "local.parquet", capsys)

    assert set(fetched["model_type"]) == {model_type}
    for column in FOLDED:
        assert fetched[column].notna().all() and fetched[column].map(math.isfinite).all(), column
    numeric = [c for c in local.columns if pd.api.types.is_float_dtype(local[c])]
    assert {"symmetry", "directionality", *FOLDED} <= set(numeric)
    pd.testing.assert_frame_equal(fetched[KEY + numeric], local[KEY + numeric])

    folder = _cached(tmp_path, repo)
    manifest = json.loads((folder / ".wqk-fetch.json").read_text())
    assert manifest["mode"] == "qk-ranges"
    assert manifest["selection"] == tensor_filter({"model_type": model_type}).key
    repo_tensors = _tensors(local_folder)
    got = _tensors(folder)
    pick = tensor_filter(json.loads((local_folder / "config.json").read_text()))
    assert set(got) == {n for n in repo_tensors if pick(n)}  # exactly the record's names present
    assert any(n.endswith(norm) for n in got)  # the pre-norm gains came along
    assert not [n for n in got if any(f".{part}." in n for part in ("v_proj", "o_proj", "mlp", "ln_2"))]
    assert not any(n.endswith(norm) for n in repo_tensors if is_qk_tensor(n))  # the heuristic missed them
    qk = sum(b for n, b in repo_tensors.items() if is_qk_tensor(n))
    assert manifest["qk_bytes"] == sum(got.values()) <= 1.1 * qk  # the gains are small next to q/k
    assert sum(repo_tensors.values()) > 2 * sum(got.values())  # the rest stayed on the server


def test_a_heuristic_cache_folder_is_fetched_again_with_the_record(env, tmp_path, caplog):
    repo, (model_type, norm) = "EleutherAI/gpt-neo-125m", PRE_NORM["EleutherAI/gpt-neo-125m"]
    old = fetch_hub(repo, progress=False)  # the name heuristic: no gains
    assert json.loads((old / ".wqk-fetch.json").read_text())["selection"] == "heuristic"
    assert not any(n.endswith(norm) for n in _tensors(old))
    assert fetch_hub(repo, progress=False) == old  # a heuristic caller takes any folder

    with caplog.at_level(logging.WARNING):
        new = fetch_hub(repo, progress=False, tensors=tensor_filter)
    assert new == old  # the same folder, replaced
    assert "fetching it again" in caplog.text
    assert (
        json.loads((new / ".wqk-fetch.json").read_text())["selection"] == tensor_filter({"model_type": model_type}).key
    )
    assert any(n.endswith(norm) for n in _tensors(new))
    reads = _shard_reads(env)
    assert fetch_hub(repo, progress=False, tensors=tensor_filter) == new  # now the record's: reused
    assert _shard_reads(env) == reads


def _shard_reads(hub) -> int:
    """Requests for safetensors bytes the stand-in (hub and CDN) has served."""
    return sum(".safetensors" in s["path"] for s in (*hub.seen, *hub.cdn.seen))


def test_offline_a_heuristic_cache_folder_is_used_with_a_warning(env, tmp_path, monkeypatch, caplog):
    repo = "EleutherAI/gpt-neo-125m"
    old = fetch_hub(repo, progress=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with caplog.at_level(logging.WARNING):
        assert fetch_hub(repo, progress=False, tensors=tensor_filter) == old
    assert "wqk fetch --force" in caplog.text and "heuristic" in caplog.text


def test_an_unknown_model_type_falls_back_to_the_name_heuristic(env, tmp_path, monkeypatch):
    repo = "EleutherAI/gpt-neo-125m"
    config = json.loads((_local(env, repo) / "config.json").read_text())
    assert tensor_filter(dict(config, model_type="acme-unreleased")) is None
    assert tensor_filter({}) is None
    monkeypatch.setattr("wqk.adapters.tensors.get_record", _unknown)  # as if no record were registered
    folder = fetch_hub(repo, progress=False, tensors=tensor_filter)
    assert json.loads((folder / ".wqk-fetch.json").read_text())["selection"] == "heuristic"
    assert set(_tensors(folder)) == {n for n in _tensors(_local(env, repo)) if is_qk_tensor(n)}


def _unknown(model_type, model_id="", config=None):
    from wqk.errors import UnsupportedModelType

    raise UnsupportedModelType(f"model_type {model_type!r} is not supported")


def _blocks(folder: Path, record) -> dict:
    from wqk.adapters.reader import read_blocks, with_extras
    from wqk.checkpoints import open_checkpoint

    ckpt = open_checkpoint(str(folder))
    return {(b.stack, b.layer): b for b in with_extras(ckpt, read_blocks(ckpt, record), record)}


BLOCK_FIELDS = ("q", "k", "q_bias", "k_bias", "q_gain", "k_gain", "norm_centred", "form", "q_norm_bias", "k_norm_bias")


def test_every_hand_record_reads_the_same_blocks_from_the_tensors_a_fetch_takes(tmp_path):
    """The tensors a fetch takes hold everything the reader reads: a LayerNorm's bias beside its gain
    (which says the norm is centred, folded by the fingerprint metrics: GPT-2's, ViT's, Whisper's) and
    a QK LayerNorm's shift (Persimmon's) and a learned query scale (TimesFM's) included. A range fetch without them read 30 of the hand
    records' pre-norms as RMSNorms."""
    import torch
    from safetensors.torch import load_file, save_file

    from wqk.adapters import get_record, records
    from wqk.tiny import build_tiny

    differ = {}
    for model_type in [r.model_type for r in records() if r.tiny is not None] + ["persimmon", "timesfm"]:
        folder = build_tiny(model_type, tmp_path / model_type / "whole")
        config = json.loads((folder / "config.json").read_text())
        pick = tensor_filter(config)
        fetched = tmp_path / model_type / "fetched"
        fetched.mkdir()
        (fetched / "config.json").write_text(json.dumps(config))
        state = {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in load_file(f).items()}
        save_file({k: v for k, v in state.items() if pick(k)}, str(fetched / "model.safetensors"))
        record = get_record(config["model_type"], config=config)
        whole, part = _blocks(folder, record), _blocks(fetched, record)
        assert whole.keys() == part.keys(), model_type
        for key, block in whole.items():
            for name in BLOCK_FIELDS:
                x, y = getattr(block, name, None), getattr(part[key], name, None)
                same = torch.equal(x, y) if torch.is_tensor(x) and torch.is_tensor(y) else x == y
                if not same:
                    differ.setdefault(model_type, set()).add(name)
    assert not differ, differ
