"""Running the workflow from tests: Snakemake in a copy of the workflow, offline, and what a run
left behind (its job counts, its figures' and tables' digests, its results' hashes).

The runs the suite shares, each made once per session, are fixtures of tests/conftest.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
TEST_CONFIG = "tests/config/test.yaml"
TIMEOUT = 1500  # seconds for one end-to-end run


def environment(**extra: str) -> dict:
    """The environment of a test's Snakemake: this venv first on PATH, the hub offline, no token."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", HF_HUB_OFFLINE="1", **extra)
    if "HF_TOKEN" not in extra:
        env.pop("HF_TOKEN", None)
    return env


def snakemake(workdir: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SNAKEMAKE, *args], cwd=workdir, env=environment(), capture_output=True, text=True, timeout=timeout
    )


def job_counts(output: str) -> dict[str, int]:
    """The first `Job stats` table of a dry run: rule -> number of jobs."""
    counts, inside = {}, False
    for line in output.splitlines():
        if line.startswith("Job stats"):
            if counts:
                break
            inside = True
            continue
        if inside:
            m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
            if m and m.group(1) != "total":
                counts[m.group(1)] = int(m.group(2))
            elif line.startswith("total"):
                break
    return counts


def planned_jobs(output: str) -> list[tuple[str, str]]:
    """(rule, wildcards) of every job a dry run lists (blocks separated by blank lines)."""
    jobs = []
    for block in re.split(r"\n\s*\n", output):
        rule = re.search(r"^\s*(?:local)?rule (\w+):$", block, re.M)
        if rule:
            wildcards = re.search(r"^\s*wildcards: (.*)$", block, re.M)
            jobs.append((rule.group(1), wildcards.group(1).strip() if wildcards else ""))
    return jobs


def digests(workdir: Path) -> dict[str, str]:
    """sha256 of every figure and table of a run."""
    files = sorted((workdir / "figures").glob("*")) + sorted((workdir / "results" / "tables").glob("*"))
    return {str(p.relative_to(workdir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def result_hashes(workdir: Path) -> dict[str, str]:
    """sha256 of every file under results/ (scores, aggregates, tables, training runs)."""
    return {
        str(path.relative_to(workdir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((workdir / "results").rglob("*"))
        if path.is_file()
    }


@dataclass(frozen=True)
class Run:
    """A finished run: its folder and, as they were when it ended, the digests of its figures
    and tables and the hashes of its results (tests that change the folder later cannot change these)."""

    wd: Path
    configfile: str
    digests: dict[str, str]
    results: dict[str, str]
    stderr: str


def explain_differences(first: Path, second: Path, limit: int = 12) -> str:
    """Which files under results/ of two runs differ, and for a table of scores which of its
    values (column, the row's model, scope, layer and head, how far apart): the message of a
    failed byte-identity check, so that a difference names the step and the values it starts at."""
    import numpy as np
    import pandas as pd

    a, b = result_hashes(first), result_hashes(second)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    lines = [f"{len(differ)} file(s) under results/ differ: {differ[:limit]}"]
    for name in [k for k in differ if k.endswith(".parquet") and k in a and k in b][:limit]:
        x, y = pd.read_parquet(first / name), pd.read_parquet(second / name)
        if list(x.columns) != list(y.columns) or len(x) != len(y):
            lines.append(f"{name}: shapes {x.shape} and {y.shape}")
            continue
        keys = [c for c in ("model", "scope", "layer", "head", "step") if c in x]
        for c in x.columns:
            if x[c].dtype.kind != "f":
                continue
            u, v = x[c].to_numpy(), y[c].to_numpy()
            off = np.flatnonzero(~((u == v) | (np.isnan(u) & np.isnan(v))))
            if off.size:
                rel = np.abs(u[off] - v[off]) / np.maximum(np.abs(u[off]), 1e-30)
                where = x.iloc[off[:3]][keys].to_dict("records")
                lines.append(
                    f"{name}: {c} differs in {off.size} row(s), by up to {rel.max():.1e} relative, e.g. {where}"
                )
    return "\n".join(lines)
