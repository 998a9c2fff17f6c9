#!/usr/bin/env bash
# Runs inside the new light conda env. Snakemake calls it from the working directory, with a
# copy of this file under .snakemake/conda/: the wqk source is WQK_SOURCE where the workflow
# sets it (deployed as a module), else the working directory (the checkout's root).
set -euo pipefail
src=${WQK_SOURCE:-.}
# --no-deps: analysis.yaml lists wqk's [project] dependencies (tests/test_packaging.py checks it
# against pyproject.toml) and none of its extras, which `pip install -e` would not add anyway.
python -m pip install --no-deps --no-build-isolation -e "$src"
# Fail here, once, rather than in every job at `import wqk`, if the env misses a dependency of
# wqk or holds one at a version pyproject.toml excludes (`pip check` reads [project] only).
broken=$(python -m pip check 2>&1 | grep -i '^wqk ' || true)
if [ -n "$broken" ]; then
    echo "workflow/envs/analysis.yaml does not satisfy wqk's dependencies:" >&2
    echo "$broken" >&2
    exit 1
fi
