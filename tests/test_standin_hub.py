"""The stand-in hub (tests/standin_hub): every paper model in its real repo's layout, and the paths
of the project that talk to a hub (fetch, tokenizer, corpora) against it. The whole paper config
runs against it in tests/test_rehearsal.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors import safe_open

import wqk
from standin_hub import TOKEN, build, hub_ids, red_pajama_url, start
from standin_hub.paper_repos import SPECS_BY_ID, write_repo
from wqk.catalogue import load_catalogue
from wqk.checkpoints.hub import fetch_hub
from wqk.errors import SourceUnavailable
from wqk.training import corpus

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "config" / "catalogue" / "paper.tsv"
SUBSET = [
    "meta-llama/Llama-3.1-8B",  # gated, bfloat16, 4 shards + index, grouped-query
    "openai/whisper-large-v3",  # float16
    "google-t5/t5-11b",  # pytorch_model.bin only
    "bert-base-uncased",  # renamed: google-bert/bert-base-uncased; the paper's tokenizer
]


def paper_rows() -> list[dict]:
    return load_catalogue(PAPER)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = build(tmp_path_factory.mktemp("standin"), SUBSET)
    server = start(root, log_unknown=False)
    yield server
    server.stop()


@pytest.fixture
def caches(tmp_path, monkeypatch):
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return {"cache_dir": tmp_path / "wqk", "hf_cache_dir": tmp_path / "hf", "progress": False}


@pytest.mark.slow
def test_every_paper_model_has_a_stand_in_that_scores_to_its_paper_stacks(tmp_path):
    """Each catalogue model's stand-in is built from its real model_type and class: the adapter
    finds every stack the paper reports, and config.json says the real model_type."""
    rows = paper_rows()
    assert {r["model_id"] for r in rows} == set(SPECS_BY_ID)
    for row in rows:
        spec = SPECS_BY_ID[row["model_id"]]
        folder = tmp_path / row["model_id"]
        write_repo(spec, folder)
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == spec.model_type, row["model_id"]
        table = wqk.score(str(folder))
        stacks = set(table["stack"])
        assert set(row["paper_stacks"].split(",")) <= stacks, (row["model_id"], stacks)


def test_stand_ins_keep_the_real_layout(tmp_path):
    llama = SPECS_BY_ID["meta-llama/Llama-3.1-8B"]
    write_repo(llama, tmp_path / "llama")
    index = json.loads((tmp_path / "llama" / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert shards == [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]
    with safe_open(str(tmp_path / "llama" / shards[0]), framework="pt") as f:
        name = next(n for n in index["weight_map"] if n.endswith("k_proj.weight"))
    config = json.loads((tmp_path / "llama" / "config.json").read_text())
    assert config["num_attention_heads"] == 4 * config["num_key_value_heads"]  # the real 32 : 8
    with safe_open(str(tmp_path / "llama" / index["weight_map"][name]), framework="pt") as f:
        assert str(f.get_slice(name).get_dtype()) == "BF16"
    write_repo(SPECS_BY_ID["google-t5/t5-11b"], tmp_path / "t5")
    assert sorted(p.name for p in (tmp_path / "t5").iterdir()) == ["README.md", "config.json", "pytorch_model.bin"]


def test_gated_repo_needs_the_token_and_the_cdn_never_sees_it(hub, caches, monkeypatch):
    repo = "meta-llama/Llama-3.1-8B"
    with pytest.raises(SourceUnavailable, match=rf"{repo} is gated.*HF_TOKEN"):
        fetch_hub(repo, endpoint=hub.url, **caches)
    monkeypatch.setenv("HF_TOKEN", "hf_someone_else")
    with pytest.raises(SourceUnavailable, match=rf"{repo} is gated.*token from HF_TOKEN was sent but has no access"):
        fetch_hub(repo, endpoint=hub.url, **caches)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    folder = fetch_hub(repo, endpoint=hub.url, **caches)
    assert (folder / ".revision").read_text().strip() == hub.repo("models", repo).sha
    blocks = wqk.score(str(folder))
    assert set(blocks["stack"]) == {"decoder"}
    assert any(s["auth"] for s in hub.seen if "/resolve/" in s["path"] and repo in s["path"])  # the hub got it
    assert hub.cdn.leaked == []  # the CDN, another host, did not
    assert any(repo in s["path"] for s in hub.cdn.seen)  # though it served the shards


def test_renamed_repo_is_followed_to_its_new_id(hub, caches):
    folder = fetch_hub("bert-base-uncased", endpoint=hub.url, **caches)
    assert (folder / ".revision").read_text().strip() == hub.repo("models", "google-bert/bert-base-uncased").sha
    assert hub_ids()["bert-base-uncased"] == "google-bert/bert-base-uncased"


def _wqk(args: list[str], hub, home: Path) -> subprocess.CompletedProcess:
    """A `wqk` command in a fresh process: `datasets` and huggingface_hub read HF_ENDPOINT on import."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "WQK_"))}
    env |= {"HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN, "HF_HOME": str(home)}
    wqk_bin = str(Path(sys.executable).parent / "wqk")
    return subprocess.run([wqk_bin, *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_paper_tokenizer_and_corpora_through_the_stand_in(hub, tmp_path):
    """bert-base-uncased's tokenizer from the hub, Wikipedia through `datasets` from the hub,
    RedPajama-V2 over HTTP from its own site, Jigsaw from the Kaggle folder."""
    import numpy as np

    tok = tmp_path / "tok"
    r = _wqk(["tokenizer", "--pretrained", "bert-base-uncased", "--out", str(tok)], hub, tmp_path / "home")
    assert r.returncode == 0, r.stderr
    vocab = json.loads((tok / "tokenizer.json").read_text())["model"]["vocab"]
    assert len(vocab) == 30522  # the real uncased WordPiece vocabulary
    where = ["--jigsaw-dir", str(hub.root / "kaggle" / "jigsaw"), "--red-pajama-url", red_pajama_url(hub)]
    streams = {}
    for name in ("wikipedia", "red_pajama", "jigsaw"):
        out = tmp_path / f"{name}.npy"
        r = _wqk(["corpus", "--name", name, "--tokenizer", str(tok), *where, "--max-tokens", "5000", "--out", str(out)],
                 hub, tmp_path / "home")  # fmt: skip
        assert r.returncode == 0, (name, r.stderr)
        ids = np.load(out, mmap_mode="r")
        assert len(ids) == 5000 and ids.max() < len(vocab), name
        assert (np.asarray(ids) == vocab["[SEP]"]).sum() > 10, name  # paragraphs of real text
        streams[name] = np.asarray(ids[:200])
    # three corpora, three texts: runs on different datasets must not train on the same tokens
    names = sorted(streams)
    assert all(not np.array_equal(streams[a], streams[b]) for a in names for b in names if a < b)


def test_red_pajama_listing_over_http_reads_the_documents(hub):
    """The listing over HTTP (datasets' text loader cannot: it hands `encoding` to aiohttp)."""
    docs = corpus.red_pajama(red_pajama_url(hub))
    first = next(docs)
    assert len(first) > 40 and first.endswith("\n")
    with pytest.raises(SourceUnavailable, match="corpus red_pajama: cannot read .*/listings/"):
        next(corpus.red_pajama(red_pajama_url(hub) + "/missing"))
