"""`wqk aggregate`: scores Parquets of many models -> results/aggregate/{models,groups,layers,heads}."""

from __future__ import annotations

import logging

import pandas as pd

from .. import aggregate as agg

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("--scores", nargs="+", required=True, metavar="PARQUET", help="per-model scores (wqk score)")
    p.add_argument(
        "--catalogue",
        required=True,
        metavar="TSV",
        help="catalogue TSV (columns: workflow/schemas/catalogue.schema.yaml)",
    )
    p.add_argument("--null", nargs="*", default=[], metavar="PARQUET", help="null references (wqk null)")
    p.add_argument("--out-dir", required=True, help="folder for models/groups/layers/heads .parquet (+ .csv)")


def run(args) -> int:
    from ..atomic import check_writable

    check_writable(args.out_dir, "--out-dir", folder=True)
    cat = agg.read_catalogue(args.catalogue)
    scores = agg.read_scores(args.scores)
    null = pd.concat([pd.read_parquet(p) for p in args.null], ignore_index=True) if args.null else None
    tables = agg.aggregate(scores, cat, null)
    for path in agg.write_outputs(tables, args.out_dir):
        log.info("wrote %s", path)
    return 0
