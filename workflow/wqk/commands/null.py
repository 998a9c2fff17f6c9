"""`wqk null`: scores of random Gaussian Q, K with the shapes of one model's scores."""

from __future__ import annotations

import logging

import pandas as pd

from ..score_table import write_scores
from ..errors import WqkError
from ..null import null_scores

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("--scores", required=True, metavar="PARQUET", help="the model's scores (wqk score)")
    p.add_argument("--out", required=True, metavar="PARQUET", help="null scores, same columns, synthetic=True")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")


def run(args) -> int:
    try:
        scores = pd.read_parquet(args.scores)
    except FileNotFoundError as e:
        raise WqkError(f"scores file {args.scores} not found: run `wqk score` for that model first") from e
    out = null_scores(scores, seed=args.seed, device=args.device)
    write_scores(out, args.out)
    log.info("wrote %s (%d rows)", args.out, len(out))
    return 0
