"""The cost of the metrics beyond the paper's two: `wqk score` on the LLaMA-shaped benchmark
checkpoint of bench_score_llama.py (float32, d 4096, 8 layers, 32 query / 8 key heads,
rotary embedding from its LlamaConfig), each selection in its own process, interleaved.

    python benchmarks/bench_metrics.py [--repeats 3] [--workdir /tmp/wqk-bench-llama ...]

Prints wall time (best and median) and peak RSS of each selection and its ratio to the
paper's two alone. Target (issue 14): the default selection (every cheap metric: spectra
per head, rotary-aware symmetry) at most 1.5x. "all" adds layer_spectra (decompositions of
the layer form, W x W with W = n_kv_heads x head_dim) and folded (the forms scored again).
"follow_ups" is the default with the three follow-up papers' families (fingerprint,
bilinear_forms, qk_spectra); target (issue 32): at most 1.5x the default.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_score_llama import add_checkpoint_arguments, build_checkpoint, checkpoint_folder, measure

SELECTIONS = {
    "paper": "symmetry,directionality",
    "default": "default",
    "follow_ups": "default,follow_ups",
    "all": "all",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkpoint_arguments(ap)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each selection, interleaved")
    a = ap.parse_args()
    folder = checkpoint_folder(a)
    build_checkpoint(folder, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.mlp)
    print(f"checkpoint: {folder} ({(folder / 'model.safetensors').stat().st_size / 1e9:.2f} GB)")
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in SELECTIONS}
    for _ in range(a.repeats):  # interleaved, so that background load hits every selection alike
        for name, metrics in SELECTIONS.items():
            out = a.workdir / f"metrics-{name}.parquet"
            cmd = [sys.executable, "-m", "wqk.cli", "score", str(folder), "--out", str(out), "--device", "cpu",
                   "--quiet", "--metrics", metrics]  # fmt: skip
            runs[name].append(measure(cmd))
    best = {name: min(w for w, _ in r) for name, r in runs.items()}
    median = {name: float(np.median([w for w, _ in r])) for name, r in runs.items()}
    for name, r in runs.items():
        rss = max(m for _, m in r)
        print(f"{name:8s} ({SELECTIONS[name]}): wall best {best[name]:6.2f} s, median {median[name]:6.2f} s "
              f"(runs: {', '.join(f'{w:.2f}' for w, _ in r)}), peak RSS {rss:.2f} GB")  # fmt: skip
    for name in ("default", "all"):
        print(f"{name} / paper: {best[name] / best['paper']:.2f}x best to best, "
              f"{median[name] / median['paper']:.2f}x median to median")  # fmt: skip
    ratio = best["default"] / best["paper"]
    print(f"target default <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'} ({ratio:.2f}x)")
    follow = best["follow_ups"] / best["default"]
    print(f"follow_ups / default: {follow:.2f}x best to best, {median['follow_ups'] / median['default']:.2f}x median "
          f"to median; target <= 1.5x: {'met' if follow <= 1.5 else 'NOT met'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
