"""`wqk aggregate`: scores Parquets of many models -> results/aggregate/{models,groups,layers,heads}."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from .. import aggregate as agg

log = logging.getLogger(__name__)


def add_arguments(p):
    scores = p.add_mutually_exclusive_group(required=True)
    scores.add_argument("--scores", nargs="+", metavar="PARQUET", help="per-model scores (wqk score)")
    scores.add_argument(
        "--scores-dir",
        metavar="DIR",
        help="the scores of every catalogue model, DIR/<slug>.parquet: a command line that does not grow with the catalogue",
    )
    p.add_argument(
        "--catalogue",
        required=True,
        metavar="TSV",
        help="catalogue TSV (columns: workflow/schemas/catalogue.schema.yaml)",
    )
    null = p.add_mutually_exclusive_group()
    null.add_argument("--null", nargs="*", default=[], metavar="PARQUET", help="null references (wqk null)")
    null.add_argument(
        "--null-dir", metavar="DIR", help="the null reference of every catalogue model, DIR/<slug>.parquet"
    )
    p.add_argument("--out-dir", required=True, help="folder for models/groups/layers/heads .parquet (+ .csv)")


def _per_model(folder: str | None, cat: pd.DataFrame) -> list[str]:
    """FOLDER/<slug>.parquet for each catalogue line, in catalogue order."""
    return [str(Path(folder) / f"{slug}.parquet") for slug in cat["slug"]] if folder else []


def run(args) -> int:
    from ..atomic import check_writable

    check_writable(args.out_dir, "--out-dir", folder=True)
    cat = agg.read_catalogue(args.catalogue)
    scores = agg.read_scores(args.scores or _per_model(args.scores_dir, cat))
    null_paths = args.null or _per_model(args.null_dir, cat)
    null = pd.concat([pd.read_parquet(p) for p in null_paths], ignore_index=True) if null_paths else None
    tables = agg.aggregate(scores, cat, null)
    for path in agg.write_outputs(tables, args.out_dir):
        log.info("wrote %s", path)
    return 0
