"""The workflow's path per model against `wqk score` on the checkpoint.

    python benchmarks/bench_workflow_path.py [--repeats 3] [--hidden 4096 --layers 8 --heads 32 --kv-heads 8]

On the LLaMA-shaped float32 checkpoint of bench_score_llama.py (built once under
--workdir; --dtype float16/bfloat16 converts a copy), runs --repeats times, each in its
own process and interleaved:

score:      `wqk score CKPT --out S --device cpu`, the command line on its own;
workflow:   the per-model command of workflow/rules/models.smk as its score rule runs it with
            validation off (a hub catalogue: one `wqk score` that also writes the matrices
            file and the null reference);
validation: the same with validation on (the paper config): the authors' method's scores too;
null:       `wqk null` as a job of its own (not on the workflow path: the comparison that
            put the null into the scoring job).

Prints best and median wall time and peak RSS (wait4) of each, the workflow/score and
validation/score ratios, the null's share (its time inside the workflow's command, from that
command's timing line, over the score wall time), the authors' method's (validation's wall time
over the workflow's, less one: its rows are scored in the same pass), and the matrices file size
over the checkpoint's q/k bytes. On a shared machine the best run is the steadier estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_score_llama import add_checkpoint_arguments, build_checkpoint, checkpoint_folder

ROOT = Path(__file__).resolve().parents[1]
WQK = [sys.executable, "-m", "wqk.cli"]


def workflow_commands(source: Path, results: Path, name: str, validation: bool) -> list[list[str]]:
    """The shell commands of models.smk's per-model rules after fetch/tiny, for one model
    (device cpu, null reference on, seed 0; with validation, the authors' method's scores)."""
    authors = ["--authors-out", str(results / "authors.parquet")] if validation else []
    return [
        [*WQK, "score", str(source), "--name", name, "--device", "cpu",
         "--matrices-out", str(results / "matrices.parquet"),
         "--null-out", str(results / "null.parquet"), "--null-seed", "0", *authors,
         "--out", str(results / "scores.parquet")],
    ]  # fmt: skip


def check_against_rules(commands: list[list[str]]) -> None:
    """Every flag used here is in models.smk's shell commands, and the rules run no other
    wqk command per model than those (tiny and fetch come before)."""
    text = (ROOT / "workflow" / "rules" / "models.smk").read_text()
    ran = set(re.findall(r'"wqk (\w+)', text)) - {"tiny", "fetch"}
    if ran != {c[len(WQK)] for c in commands}:
        sys.exit(f"models.smk runs wqk {sorted(ran)} per model; this benchmark runs {[c[len(WQK)] for c in commands]}")
    rule = text[text.index("rule score:") :]
    for flag in (a for c in commands for a in c if a.startswith("--")):
        if flag not in rule:
            sys.exit(f"{flag} is not in models.smk's score rule: update this benchmark")


def measure(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in GB, stderr) of one command in its own process.

    The dirty pages of the previous run (a 0.7 GB matrices file) are flushed first: left to
    the kernel's writeback, they slow whichever run comes next by up to a second."""
    os.sync()
    time.sleep(1)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1e6, err  # ru_maxrss is in KiB on Linux


def qk_bytes(path: Path) -> int:
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    return sum(
        v["data_offsets"][1] - v["data_offsets"][0]
        for k, v in header.items()
        if k.endswith(("q_proj.weight", "k_proj.weight"))
    )


def convert(folder: Path, dtype: str) -> Path:
    """A copy of the checkpoint with every tensor in dtype (made once)."""
    out = folder.with_name(f"{folder.name}-{dtype}")
    if not (out / "model.safetensors").exists():
        import shutil

        import torch
        from safetensors.torch import load_file, save_file

        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / "config.json", out / "config.json")
        tensors = {n: t.to(getattr(torch, dtype)) for n, t in load_file(folder / "model.safetensors").items()}
        save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkpoint_arguments(ap)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each, interleaved")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="the checkpoint's precision (a converted copy of the float32 one)")  # fmt: skip
    ap.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    folder = checkpoint_folder(a)
    if a.prepare:
        build_checkpoint(folder, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.mlp)
        if a.dtype != "float32":
            convert(folder, a.dtype)
        return 0
    # built in a process of its own: a child's peak RSS counts its parent's at fork time
    subprocess.run([sys.executable, __file__, "--prepare", *sys.argv[1:]], check=True)
    if a.dtype != "float32":
        folder = folder.with_name(f"{folder.name}-{a.dtype}")
    size = (folder / "model.safetensors").stat().st_size / 1e9
    print(f"checkpoint: {folder} ({size:.2f} GB, {a.dtype})")
    results = a.workdir / "workflow-path"
    results.mkdir(parents=True, exist_ok=True)
    alone = a.workdir / "score-alone.parquet"
    paths = {v: workflow_commands(folder, results, "bench/llama", v) for v in (False, True)}
    check_against_rules(paths[True])
    score_cmd = [*WQK, "score", str(folder), "--out", str(alone), "--device", "cpu"]
    null_cmd = [*WQK, "null", "--scores", str(alone), "--out", str(a.workdir / "null-alone.parquet")]
    runs: dict[str, list[tuple[float, float]]] = {"score": [], "workflow": [], "validation": [], "null": []}
    null_share, write_s = [], []
    for _ in range(a.repeats):  # interleaved, so that background load hits all alike
        runs["score"].append(measure(score_cmd)[:2])
        for validation, name in ((False, "workflow"), (True, "validation")):
            walls, peaks = [], []
            for cmd in paths[validation]:
                wall, peak, err = measure(cmd)
                walls.append(wall)
                peaks.append(peak)
                if m := re.search(r"null reference in ([\d.]+) s", err):
                    null_share.append(float(m.group(1)))
                if m := re.search(r"written alongside in ([\d.]+) s", err):
                    write_s.append(float(m.group(1)))
                if validation and "the authors' method in the same pass" not in err:
                    sys.exit(f"the authors' method was not scored in the same pass:\n{err[-2000:]}")
            runs[name].append((sum(walls), max(peaks)))
        runs["null"].append(measure(null_cmd)[:2])

    def stats(name):
        walls = [w for w, _ in runs[name]]
        return min(walls), float(np.median(walls)), max(r for _, r in runs[name]), walls

    labels = (("score", "wqk score CKPT"), ("workflow", "workflow path"), ("validation", "+ validation"),
              ("null", "wqk null alone"))  # fmt: skip
    for name, label in labels:
        best, med, rss, walls = stats(name)
        print(f"{label:15s} wall best {best:6.2f} s, median {med:6.2f} s (runs: {', '.join(f'{w:.2f}' for w in walls)})"
              f"  peak RSS {rss:.2f} GB")  # fmt: skip
    (sb, sm, srss, _), (nb, _, _, _) = stats("score"), stats("null")
    for name, what in (("workflow", "scores, matrices, null"), ("validation", "and the authors' method")):
        wb, wm, wrss, _ = stats(name)
        print(f"{name} / score ({what}): {wb / sb:.2f}x best to best, {wm / sm:.2f}x median to median; "
              f"peak RSS {wrss:.2f} GB vs {srss:.2f} GB")  # fmt: skip
    print(f"null / score: {min(null_share) / sb:.2f} best, {np.median(null_share) / sm:.2f} median "
          f"(null inside the workflow's job: {', '.join(f'{x:.2f}' for x in null_share)} s); "
          f"as a job of its own it would be {nb / sb:.2f} (wqk null alone, best)")  # fmt: skip
    (wb, wm, _, _), (vb, vm, _, _) = stats("workflow"), stats("validation")
    print(f"authors' method / score: {(vb - wb) / sb:.2f} best, {(vm - wm) / sm:.2f} median (scored in the same pass)")
    print(f"matrices written alongside scoring (writer thread wall time): {', '.join(f'{x:.2f}' for x in write_s)} s")
    m_bytes, qk = (results / "matrices.parquet").stat().st_size, qk_bytes(folder / "model.safetensors")
    print(f"matrices file / checkpoint q/k bytes: {m_bytes / 1e6:.1f} MB / {qk / 1e6:.1f} MB = {m_bytes / qk:.3f}")

    import pyarrow.parquet as pq

    cols = ["stack", "layer", "scope", "head", "symmetry", "directionality", "fro_norm", "E_r", "E_c"]
    same = pq.read_table(alone, columns=cols).equals(pq.read_table(results / "scores.parquet", columns=cols))
    print(f"workflow scores identical to `wqk score CKPT`: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
