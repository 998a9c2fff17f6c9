"""Write requirements.lock (the repo root) from pyproject.toml: run after changing a dependency.

    .venv/bin/python workflow/scripts/lock_requirements.py

`uv pip compile` of [project] dependencies and the `workflow`, `paper` and `test` extras (what install.sh
installs), every version pinned with the sha256 of each of its files, for CPython 3.11 on Linux
x86_64 (the version of environment.yml and workflow/envs/wqk.yaml).

torch itself is left out: install.sh installs it first, from TORCH_SPEC, with pip, which finds
the CPU build some machines keep on local disk (and a CUDA build where TORCH_SPEC names one).
Its dependencies (sympy, networkx, jinja2...) are locked: they are resolved against the CPU
wheel of install.sh's default TORCH_SPEC, found through PIP_FIND_LINKS as pip finds it. Where
no CPU wheel is found the resolver takes PyPI's CUDA build, and this script refuses to write a
lock that would install the CUDA libraries on every machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
EXTRAS = ("models", "workflow", "paper", "test")
PYTHON = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
COMMAND = "python workflow/scripts/lock_requirements.py"
CUDA_ONLY = re.compile(r"^(nvidia-|triton|cuda-)", re.MULTILINE)


def torch_spec() -> str:
    """install.sh's default TORCH_SPEC (the torch the lock's other packages are resolved with)."""
    m = re.search(r"TORCH_SPEC=\$\{TORCH_SPEC:-([^}]+)\}", (ROOT / "install.sh").read_text())
    if not m:
        sys.exit("install.sh: no default TORCH_SPEC")
    return m.group(1)


def header(torch: str) -> str:
    return f"""\
# Pinned, hashed Python dependencies of wqk: [project] and the {" and ".join(EXTRAS)} extras of
# pyproject.toml, for CPython {PYTHON} on Linux x86_64. install.sh installs them with
# `uv pip install --require-hashes -r requirements.lock`, then wqk itself with --no-deps.
# Regenerate after changing pyproject.toml:  {COMMAND}
# (tests/test_packaging.py checks that this file is in step with pyproject.toml.)
#
# torch is not in this file: install.sh installs it first, from TORCH_SPEC, with pip, which
# finds the CPU build that some machines keep on local disk (PyPI has only the CUDA build on
# Linux), or the CUDA build that TORCH_SPEC names on a GPU machine; one hash cannot serve
# both. Its own dependencies are here, resolved with {torch} (CPU build).
# resolved-with: {torch}
"""


def main() -> None:
    torch = torch_spec()
    find_links = [a for p in os.environ.get("PIP_FIND_LINKS", "").split() for a in ("--find-links", p)]
    with tempfile.TemporaryDirectory() as tmp:
        constraint, out = Path(tmp) / "torch.txt", Path(tmp) / "requirements.lock"
        constraint.write_text(torch + "\n")
        if LOCK.exists():  # uv keeps the versions of an existing output file: a re-lock moves only what changed
            shutil.copy(LOCK, out)
        cmd = [
            sys.executable, "-m", "uv", "pip", "compile", "pyproject.toml", "--quiet",
            *(a for e in EXTRAS for a in ("--extra", e)),
            "--generate-hashes", "--python-version", PYTHON, "--python-platform", PLATFORM,
            "--constraint", str(constraint), *find_links, "--no-emit-package", "torch",
            "--no-header", "--output-file", str(out),
        ]  # fmt: skip
        subprocess.run(cmd, cwd=ROOT, check=True)
        body = out.read_text()
    if CUDA_ONLY.search(body):
        sys.exit(f"resolved against a CUDA build of torch: put the CPU wheel of {torch} in PIP_FIND_LINKS")
    LOCK.write_text(header(torch) + body)
    print(f"wrote {LOCK.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
