"""`wqk score` run again and again on one wide grouped-query Llama, on one and two threads.

    python benchmarks/bench_rerun_scores.py [--runs 20 --threads 1,2 --hidden 4096 --layers 8 ...]

Builds the checkpoint of benchmarks/bench_score_llama.py (same options, same folder), computes
the paper's scores of every head and layer in float64 from the raw tensors (the oracle), then
runs `wqk score --metrics symmetry,directionality` --runs times per thread count
(OMP_NUM_THREADS and MKL_NUM_THREADS) and reports, per thread count, how many distinct score
files came out and the largest deviation of each column from the oracle, and the largest
difference between the thread counts. Exit status 1 when a thread count gave more than one
file or a deviation reached --tolerance.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_score_llama import add_checkpoint_arguments, build_checkpoint, checkpoint_folder

COLUMNS = ("symmetry", "directionality", "E_r", "E_c")


def oracle(folder: Path) -> dict[tuple[str, int], np.ndarray]:
    """{(column, layer): per-head float64 scores, then the layer's} from the safetensors file."""
    import torch
    from safetensors import safe_open

    from wqk.metrics import score_dense

    cfg = json.loads((folder / "config.json").read_text())
    h, h_kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    k, group = d // h, h // h_kv
    out = {}
    with safe_open(str(folder / "model.safetensors"), "pt") as f, torch.no_grad():
        for layer in range(cfg["num_hidden_layers"]):
            wq = f.get_tensor(f"model.layers.{layer}.self_attn.q_proj.weight").double().view(h, k, d)
            wk = f.get_tensor(f"model.layers.{layer}.self_attn.k_proj.weight").double().view(h_kv, k, d)
            heads = [score_dense(wq[i].T @ wk[i // group]) for i in range(h)]
            summed = wq.view(h_kv, group, k, d).sum(1)  # query heads of one key head, summed
            whole = score_dense(summed.reshape(h_kv * k, d).T @ wk.reshape(h_kv * k, d))
            for c in COLUMNS:
                out[c, layer] = np.concatenate([s[c] for s in heads] + [whole[c]])
    return out


def scores(path: Path, layers: int) -> dict[tuple[str, int], np.ndarray]:
    import pandas as pd

    df = pd.read_parquet(path)
    out = {}
    for layer in range(layers):
        rows = df[df["layer"] == layer]
        heads = rows[rows["scope"] == "head"].sort_values("head")
        for c in COLUMNS:
            out[c, layer] = np.concatenate([heads[c].to_numpy(), rows.loc[rows["scope"] == "layer", c].to_numpy()])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkpoint_arguments(ap)
    ap.add_argument("--runs", type=int, default=20, help="runs per thread count")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="largest deviation from float64 allowed")
    a = ap.parse_args()
    folder = checkpoint_folder(a)
    build_checkpoint(folder, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.mlp)
    want = oracle(folder)
    out = a.workdir / "rerun.parquet"
    first, ok = {}, True
    for threads in (int(t) for t in a.threads.split(",")):
        env = os.environ | {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        digests, worst = {}, dict.fromkeys(COLUMNS, 0.0)
        for _ in range(a.runs):
            cmd = [sys.executable, "-m", "wqk.cli", "score", str(folder), "--out", str(out), "--device", "cpu",
                   "--quiet", "--metrics", "symmetry,directionality"]  # fmt: skip
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            digest = hashlib.sha256(out.read_bytes()).hexdigest()[:12]
            digests[digest] = digests.get(digest, 0) + 1
            got = scores(out, a.layers)
            first.setdefault(threads, got)
            for (c, layer), v in got.items():
                worst[c] = max(worst[c], float(np.abs(v - want[c, layer]).max()))
        print(f"{threads} thread(s), {a.runs} runs: {len(digests)} distinct file(s) {digests}; max |score - float64|: "
              + ", ".join(f"{c} {v:.1e}" for c, v in worst.items()))  # fmt: skip
        ok &= len(digests) == 1 and max(worst.values()) < a.tolerance
    counts = sorted(first)
    for t in counts[1:]:
        diff = {c: max(float(np.abs(first[t][c, n] - first[counts[0]][c, n]).max()) for n in range(a.layers))
                for c in COLUMNS}  # fmt: skip
        print(f"{t} against {counts[0]} thread(s): max |diff| " + ", ".join(f"{c} {v:.1e}" for c, v in diff.items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
