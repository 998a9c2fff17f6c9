"""`wqk tiny MODEL_TYPE --out DIR [--seed N]`: a tiny random model (config.json + model.safetensors)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import WqkError

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model_type", help="config model_type, e.g. bert, gpt2, llama, t5, whisper")
    parser.add_argument("--out", required=True, help="folder to write (must not exist, or --force)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed for the random weights (default 0)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def run(args: argparse.Namespace) -> int:
    from ..atomic import check_writable
    from ..tiny import build_tiny

    out = check_writable(args.out, folder=True)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise WqkError(f"{out} exists and is not empty; remove it or pass --force")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    mask = os.umask(0)
    os.umask(mask)
    tmp.chmod(0o777 & ~mask)  # mkdtemp makes it 0700
    try:
        build_tiny(args.model_type, tmp, seed=args.seed)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("tiny random %s (seed %d) written to %s", args.model_type, args.seed, out)
    return 0
