"""`wqk score` against the naive method on a LLaMA-shaped random checkpoint.

    python benchmarks/bench_score_llama.py [--hidden 4096 --layers 8 --heads 32 --kv-heads 8]

Builds the checkpoint once (float32 safetensors, small MLP; about 1.8 GB at the default
size) under --workdir, then runs each method --repeats times in its own process, the two
interleaved, and reports wall time (best and median) and peak RSS (from wait4) of each,
their ratios, and whether both give the same per-layer scores. On a shared machine the
best run is the steadier estimate; the median shows how much the load moved.

naive: AutoModel.from_pretrained in float32, then per layer the dense M = W_q^T W_k with
       key heads repeated to query heads, scored from M.
wqk:   `wqk score FOLDER --metrics symmetry,directionality`, streaming one layer at a time,
       per-head and per-layer scores (the paper's two: benchmarks/bench_metrics.py times
       the metrics beyond them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def build_checkpoint(folder: Path, hidden: int, layers: int, heads: int, kv_heads: int, vocab: int, mlp: int):
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig

    if (folder / "model.safetensors").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    cfg = LlamaConfig(
        hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        intermediate_size=mlp, vocab_size=vocab, tie_word_embeddings=True,
    )  # fmt: skip
    g = torch.Generator().manual_seed(0)
    k = hidden // heads
    std = hidden**-0.5
    t = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g) * 0.02,
         "model.norm.weight": torch.ones(hidden)}  # fmt: skip
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = torch.randn(heads * k, hidden, generator=g) * std
        t[p + "self_attn.k_proj.weight"] = torch.randn(kv_heads * k, hidden, generator=g) * std
        t[p + "self_attn.v_proj.weight"] = torch.randn(kv_heads * k, hidden, generator=g) * std
        t[p + "self_attn.o_proj.weight"] = torch.randn(hidden, heads * k, generator=g) * std
        t[p + "mlp.gate_proj.weight"] = torch.randn(mlp, hidden, generator=g) * std
        t[p + "mlp.up_proj.weight"] = torch.randn(mlp, hidden, generator=g) * std
        t[p + "mlp.down_proj.weight"] = torch.randn(hidden, mlp, generator=g) * mlp**-0.5
        t[p + "input_layernorm.weight"] = torch.ones(hidden)
        t[p + "post_attention_layernorm.weight"] = torch.ones(hidden)
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg.to_json_file(str(folder / "config.json"))


def naive(folder: Path, out: Path):
    """The method the paper's notebooks use: load the model, form M per layer."""
    import torch
    from transformers import AutoModel

    from wqk.metrics import score_dense

    model = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
    cfg = model.config
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    k = cfg.hidden_size // cfg.num_attention_heads
    rows = []
    with torch.no_grad():
        for i, layer in enumerate(model.layers):
            wq = layer.self_attn.q_proj.weight  # [H*k, d]
            wk = layer.self_attn.k_proj.weight.reshape(cfg.num_key_value_heads, k, -1)
            wk = wk.repeat_interleave(group, dim=0).reshape(-1, wk.shape[-1])  # [H*k, d]
            M = wq.T @ wk
            s = score_dense(M)
            rows.append({"layer": i, "symmetry": s["symmetry"][0], "directionality": s["directionality"][0]})
    out.write_text(json.dumps(rows))


def measure(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of one command in its own process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(cmd)}")
    return wall, usage.ru_maxrss / 1e6  # ru_maxrss is in KiB on Linux


def add_checkpoint_arguments(ap: argparse.ArgumentParser) -> None:
    """The benchmark checkpoint's shape and where it is built (shared with bench_workflow_path)."""
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/wqk-bench-llama"))
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--mlp", type=int, default=256)


def checkpoint_folder(a: argparse.Namespace) -> Path:
    return a.workdir / f"llama-h{a.hidden}-l{a.layers}-q{a.heads}-kv{a.kv_heads}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkpoint_arguments(ap)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each method, interleaved")
    ap.add_argument("--naive-worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    folder = checkpoint_folder(a)
    if a.naive_worker:
        return naive(folder, a.naive_worker)
    if a.prepare:
        return build_checkpoint(folder, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.mlp)
    # built in a process of its own: a child's peak RSS (wait4) counts its parent's at fork time
    subprocess.run([sys.executable, __file__, "--prepare", *sys.argv[1:]], check=True)
    size = (folder / "model.safetensors").stat().st_size / 1e9
    print(f"checkpoint: {folder} ({size:.2f} GB)")
    naive_json, ours_pq = a.workdir / "naive.json", a.workdir / "wqk.parquet"
    # the paper's two scores, what the naive method computes (bench_metrics.py: the others)
    wqk = [sys.executable, "-m", "wqk.cli", "score", str(folder), "--out", str(ours_pq), "--device", "cpu",
           "--metrics", "symmetry,directionality"]  # fmt: skip
    runs = {"naive": [], "wqk": []}
    for _ in range(a.repeats):  # interleaved, so that background load hits both alike
        runs["naive"].append(measure([sys.executable, __file__, "--workdir", str(a.workdir), "--hidden", str(a.hidden),
                                      "--layers", str(a.layers), "--heads", str(a.heads), "--kv-heads", str(a.kv_heads),
                                      "--naive-worker", str(naive_json)]))  # fmt: skip
        runs["wqk"].append(measure(wqk))
    best = {m: (min(w for w, _ in r), max(m_ for _, m_ in r)) for m, r in runs.items()}
    median = {m: float(np.median([w for w, _ in r])) for m, r in runs.items()}
    for m, (w, rss) in best.items():
        print(f"{m:6s} wall best {w:6.2f} s, median {median[m]:6.2f} s (runs: {', '.join(f'{x:.2f}' for x, _ in runs[m])})"
              f"  peak RSS {rss:.2f} GB")  # fmt: skip
    print(f"speed-up (naive / wqk wall): {best['naive'][0] / best['wqk'][0]:.2f}x best to best, "
          f"{median['naive'] / median['wqk']:.2f}x median to median")  # fmt: skip
    print(f"memory ratio (wqk / naive peak RSS): {best['wqk'][1] / best['naive'][1]:.2f}")

    import pandas as pd

    ref = pd.DataFrame(json.loads(naive_json.read_text()))
    ours = pd.read_parquet(ours_pq)
    ours = ours[ours["scope"] == "layer"].sort_values("layer")
    diff_s = np.abs(ours["symmetry"].to_numpy() - ref["symmetry"].to_numpy()).max()
    diff_d = np.abs(ours["directionality"].to_numpy() - ref["directionality"].to_numpy()).max()
    same = diff_s < 1e-4 and diff_d < 1e-4
    print(f"per-layer scores agree: {same} (max |diff| symmetry {diff_s:.2e}, directionality {diff_d:.2e})")
    print(f"wqk also wrote {int((pd.read_parquet(ours_pq)['scope'] == 'head').sum())} per-head rows")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
