"""Where the follow-up families' time goes (issue 32's cost): `wqk score` of the LLaMA-shaped
benchmark checkpoint (bench_score_llama.py) with the default metrics and the three follow-up
families, in this process, each family and each decomposition of wqk.head_forms timed as it runs.

    python benchmarks/bench_follow_up_parts.py [--repeats 3] [--workdir /tmp/wqk-bench-llama ...]

Prints the best wall time of the default selection and of default + follow_ups (each in its own
process, interleaved, as bench_metrics.py), the 1.5x budget that leaves the follow-ups, and the
seconds of each part over the whole run (best of --repeats), largest first. The parts nest:
"family:fingerprint" holds "fingerprint.folded" (its float64 Grams) and the decompositions it
uses; a decomposition shared by two families (memoised per block and input) counts once.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_score_llama import add_checkpoint_arguments, build_checkpoint, checkpoint_folder, measure

PARTS = ("eig", "sym_eigenvalues", "sv2", "low_q")  # HeadForms' cached decompositions


def timed_parts(folder: Path, out: Path) -> dict[str, float]:
    """Seconds per family and per decomposition of one `wqk score --metrics default,follow_ups`."""
    from wqk import fingerprint, head_forms, metric_registry
    from wqk.cli import main

    spent: collections.Counter = collections.Counter()

    def timer(name, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0

        return run

    saved = dict(metric_registry.REGISTRY), {p: head_forms.HeadForms.__dict__[p].func for p in PARTS}
    saved_fp = {n: getattr(fingerprint, n) for n in ("folded", "cond_eig")}
    saved_cos = head_forms.HeadForms.cosines
    try:
        for name, m in saved[0].items():
            if m.compute is not None:
                metric_registry.REGISTRY[name] = dataclasses.replace(m, compute=timer(f"family:{name}", m.compute))
        for p in PARTS:
            head_forms.HeadForms.__dict__[p].func = timer(f"forms.{p}", saved[1][p])
        for n, fn in saved_fp.items():
            setattr(fingerprint, n, timer(f"fingerprint.{n}", fn))
        head_forms.HeadForms.cosines = timer("forms.cosines", saved_cos)
        main(["score", str(folder), "--out", str(out), "--device", "cpu", "--quiet", "--metrics", "default,follow_ups"])
    finally:
        metric_registry.REGISTRY.update(saved[0])
        for p in PARTS:
            head_forms.HeadForms.__dict__[p].func = saved[1][p]
        for n, fn in saved_fp.items():
            setattr(fingerprint, n, fn)
        head_forms.HeadForms.cosines = saved_cos
    return dict(spent)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkpoint_arguments(ap)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    folder = checkpoint_folder(a)
    build_checkpoint(folder, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.mlp)
    walls: dict[str, list[float]] = {"default": [], "default,follow_ups": []}
    for _ in range(a.repeats):
        for metrics in walls:
            cmd = [sys.executable, "-m", "wqk.cli", "score", str(folder), "--out", str(a.workdir / "parts.parquet"),
                   "--device", "cpu", "--quiet", "--metrics", metrics]  # fmt: skip
            walls[metrics].append(measure(cmd)[0])
    best = {m: min(w) for m, w in walls.items()}
    parts: dict[str, float] = {}
    for _ in range(a.repeats):
        for name, s in timed_parts(folder, a.workdir / "parts.parquet").items():
            parts[name] = min(parts.get(name, s), s)
    budget = 0.5 * best["default"]
    print(f"default: {best['default']:.2f} s; default + follow_ups: {best['default,follow_ups']:.2f} s "
          f"({best['default,follow_ups'] / best['default']:.2f}x); the 1.5x budget of the follow-ups: {budget:.2f} s "
          f"({budget / a.layers * 1000:.0f} ms per layer)")  # fmt: skip
    for name, s in sorted(parts.items(), key=lambda x: -x[1]):
        print(f"  {name:28s} {s:6.2f} s  {s / a.layers * 1000:6.1f} ms per layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
