"""What listing and scoring a hub model costs, measured on the stand-in hub (README.md, "Scoring
the hub"):

    python tests/standin_hub cost ROOT

builds the stand-ins of MODELS (rows of hub_popular.tsv) under ROOT, serves them, runs `wqk
catalogue` over them (one model per page, so each page is one request), then `wqk fetch` and
`wqk score` of each, each command its own process as in a workflow job, and prints, per model,
the requests and bytes the hub and its CDN answered (bodies; headers not counted) and the
seconds of each command. The weights are tiny: the bytes are those of the q/k tensors, the
safetensors headers and the API's JSON; the request count is what a real model costs too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = [
    "facebook/opt-125m",
    "bigscience/bloom-560m",
    "Qwen/Qwen3-0.6B",
    "google/gemma-2-2b",
    "openai/clip-vit-base-patch32",
]


def _counts(hub) -> tuple[int, int]:
    with hub.lock, hub.cdn.lock:
        return len(hub.seen) + len(hub.cdn.seen), hub.bytes_sent + hub.cdn.bytes_sent


def _run(cmd: list[str], env: dict, hub) -> tuple[float, int, int, str]:
    """Seconds, requests and bytes of one wqk command, and what it printed."""
    requests, sent = _counts(hub)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    after = _counts(hub)
    return seconds, after[0] - requests, after[1] - sent, r.stdout.strip()


def measure(root: Path) -> list[dict]:
    from . import start
    from .popular_repos import build_popular, popular_rows
    from .server import TOKEN

    rows = [r for r in popular_rows() if r["source"] in MODELS]
    hub = start(build_popular(Path(root), rows), log_unknown=False)
    hub.listing_page_size = 1
    wqk = str(Path(sys.executable).parent / "wqk")
    out = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN, WQK_CACHE=f"{tmp}/wqk", HF_HOME=f"{tmp}/hf")
            env.pop("HF_HUB_OFFLINE", None)
            listing = _run([wqk, "catalogue", "--out", f"{tmp}/hub.tsv"], env, hub)
            for row in rows:
                fetch = _run([wqk, "fetch", row["source"], "--no-progress"], env, hub)
                score = _run([wqk, "-q", "score", row["source"], "--out", f"{tmp}/{row['slug']}.parquet"], env, hub)
                weights = sum(p.stat().st_size for p in (Path(root) / "models" / row["source"]).glob("*.safetensors"))
                kept = (Path(fetch[3]) / "model.safetensors").stat().st_size  # the q/k tensors and their header
                out.append({"model": row["source"], "weights": weights, "kept": kept, "fetch": fetch, "score": score})
    finally:
        hub.stop()
    for row in out:
        row["listing"] = tuple(x / len(out) for x in listing[:3])
    return out


def main(root: Path) -> int:
    rows = measure(root)
    print("model                         weights B  q/k B | listing: req B s | fetch: req B s   | score: s")
    for r in rows:
        (ls, lr, lb), (fs, fr, fb, _), ss = r["listing"], r["fetch"], r["score"][0]
        print(
            f"{r['model']:29s} {r['weights']:9d} {r['kept']:6d} | {lr:3.0f} {lb:5.0f} {ls:4.2f}"
            f" | {fr:3d} {fb:6d} {fs:4.2f} | {ss:4.2f}"
        )
    return 0
