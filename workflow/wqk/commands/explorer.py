"""`wqk explorer`: the aggregates -> results/explorer/index.html (wqk.explorer), one page that
opens from disk with no network."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("--models", required=True, help="results/aggregate/models.parquet")
    p.add_argument("--layers", required=True, help="results/aggregate/layers.parquet")
    p.add_argument("--heads", required=True, help="results/aggregate/heads.parquet")
    p.add_argument(
        "--null-dir", metavar="DIR", help="the null reference of each model, DIR/<slug>.parquet (wqk null): its spread"
    )
    p.add_argument("--out-dir", required=True, help="folder of index.html (and data/<slug>.js when split)")
    p.add_argument(
        "--inline-limit",
        type=int,
        default=None,
        metavar="BYTES",
        help="per-model data above this many bytes go to one file per model, loaded on demand (default 2000000)",
    )
    p.add_argument("--title", default="wqk explorer", help="the page's title")


def run(args) -> int:
    import pandas as pd

    from .. import explorer
    from ..atomic import check_writable

    check_writable(args.out_dir, "--out-dir", folder=True)
    tables = {name: pd.read_parquet(getattr(args, name)) for name in ("models", "layers", "heads")}
    limit = explorer.INLINE_LIMIT if args.inline_limit is None else args.inline_limit
    built = explorer.build(**tables, null_dir=args.null_dir, inline_limit=limit, title=args.title)
    written = explorer.write(built, args.out_dir)
    size = sum(len(b) for b in built.values())
    log.info(
        "wrote %s (%d files, %.1f MB)", written[-1] if len(written) == 1 else args.out_dir, len(written), size / 1e6
    )
    return 0
