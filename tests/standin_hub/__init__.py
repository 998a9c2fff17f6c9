"""A stand-in Hugging Face hub on this machine: every model of config/catalogue/paper.tsv as a tiny
random checkpoint in its real repo's layout, the model config/catalogue/sweeps.tsv sweeps with
its branches along training (sweep_repos.py), the paper's tokenizer and training data in their
real layouts, behind an HTTP server that speaks the hub's API (see server.py).

    python tests/standin_hub build ROOT          # the repos and data (a minute; once)
    python tests/standin_hub serve ROOT          # prints the HF_ENDPOINT and HF_TOKEN to export
    python tests/standin_hub serve ROOT --popular  # config/catalogue/hub_popular.tsv's models instead

tests/test_rehearsal.py runs the paper config against it; README.md ("Rehearsing the paper run").
tests/test_hub_popular.py scores every model of hub_popular.tsv from it (popular_repos.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from .popular_repos import build_popular
from .server import TOKEN, StandInHub

__all__ = ["TOKEN", "StandInHub", "build", "build_popular", "point_at", "start"]

WIKIPEDIA = "wikimedia/wikipedia"
TOKENIZER = "bert-base-uncased"  # the paper's tokenizer: training.tokenizer.pretrained
PAPER_CATALOGUE = Path(__file__).resolve().parents[2] / "config" / "catalogue" / "paper.tsv"


def hub_ids() -> dict[str, str]:
    """model_id -> the hub id the catalogue fetches (its `source`: renamed repos have moved,
    e.g. bert-base-uncased -> google-bert/bert-base-uncased)."""
    from wqk.catalogue import load_catalogue

    return {r["model_id"]: r["source"] for r in load_catalogue(PAPER_CATALOGUE)}


def build(root: Path, model_ids: list[str] | None = None) -> Path:
    """Write the stand-in hub's tree under root (skipped when root/manifest.json already lists
    exactly these models); returns root. model_ids: a subset of the paper's (default: all).
    Each repo sits at its catalogue source id; a different model_id is an alias (307)."""
    from . import data, sweep_repos
    from .paper_repos import SPECS, SPECS_BY_ID, write_repo

    root = Path(root)
    specs = SPECS if model_ids is None else [SPECS_BY_ID[m] for m in model_ids]
    if TOKENIZER not in [s.model_id for s in specs]:
        specs = [*specs, SPECS_BY_ID[TOKENIZER]]
    ids = hub_ids()
    manifest = {
        "models": {ids[s.model_id]: {"gated": "manual" if s.gated else False} for s in specs}
        | sweep_repos.manifest_entries(),
        "datasets": {WIKIPEDIA: {"gated": False}},
        "aliases": {s.model_id: ids[s.model_id] for s in specs if ids[s.model_id] != s.model_id},
    }
    done = root / "manifest.json"
    if done.is_file() and json.loads(done.read_text()) == manifest:
        return root
    for spec in specs:
        write_repo(spec, root / "models" / ids[spec.model_id])
    sweep_repos.write_sweep_repos(root)
    data.add_tokenizer(root / "models" / ids[TOKENIZER])
    data.write_wikipedia(root / "datasets" / WIKIPEDIA)
    data.write_red_pajama(root / "static")
    data.write_jigsaw(root / "kaggle" / "jigsaw")
    done.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return root


def start(root: Path, **kwargs) -> StandInHub:
    """The server for a built root, serving in background threads until .stop()."""
    return StandInHub(Path(root), **kwargs).start()


def red_pajama_url(hub: StandInHub) -> str:
    from .data import RED_PAJAMA_PATH

    return f"{hub.cdn.url}/{RED_PAJAMA_PATH}"


def point_at(hub: StandInHub, monkeypatch, caches: Path, token: str | None = TOKEN) -> StandInHub:
    """`wqk` (and huggingface_hub) talk to `hub` online, with `token` (None: none), into caches
    of their own under `caches`: a test's setup, through pytest's monkeypatch."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    if token is not None:
        monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("WQK_CACHE", str(caches / "wqk"))
    monkeypatch.setenv("HF_HUB_CACHE", str(caches / "hf"))
    return hub
