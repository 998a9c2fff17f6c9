"""`wqk validate`: our scores against the paper's published ones, per model and per layer."""

from __future__ import annotations

import logging

from ..aggregate import write_csv
from ..validate import TOLERANCE, compare, read_inputs

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("--models", required=True, help="results/aggregate/models.parquet")
    p.add_argument("--published", required=True, help="the paper's published_scores.csv")
    p.add_argument("--paper-models", required=True, help="the paper's models.csv (notes on its mistakes)")
    p.add_argument("--layers", help="results/aggregate/layers.parquet: also compare every published layer")
    p.add_argument("--published-layers", help="the paper's published_layer_scores.csv")
    p.add_argument("--authors-models", help="models.parquet of `wqk score --method authors`: proves causes")
    p.add_argument("--authors-layers", help="layers.parquet of `wqk score --method authors`")
    p.add_argument("--out", required=True, help="comparison CSV (e.g. results/validation/paper_comparison.csv)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="flag |ours - paper| above this")


def run(args) -> int:
    from ..atomic import check_writable

    check_writable(args.out)
    (models, published, paper_models), more = read_inputs(
        args.models,
        args.published,
        args.paper_models,
        layers=args.layers,
        published_layers=args.published_layers,
        authors=args.authors_models,
        authors_layers=args.authors_layers,
    )
    out = compare(models, published, paper_models, args.tolerance, **more)
    write_csv(out, args.out)
    n_flag, n_expl = int(out["flag"].sum()), int(out["explained"].sum())
    log.info(
        "wrote %s: %d comparisons of %d models, %d flagged (%d explained)",
        args.out, len(out), out["model"].nunique(), n_flag, n_expl,
    )  # fmt: skip
    return 0
