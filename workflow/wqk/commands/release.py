"""`wqk release`: a finished run -> release/<name>-<version>/ (wqk.release): the tables, the
catalogue with provenance, figures, the config and lock, a dataset card, Croissant, SHA256SUMS."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("--name", required=True, help="the dataset's name (the folder is NAME-VERSION)")
    p.add_argument("--version", dest="release_version", help="the release's version (default: wqk's)")
    p.add_argument("--aggregate-dir", required=True, type=Path, help="results/aggregate (wqk aggregate)")
    p.add_argument("--catalogue", required=True, type=Path, help="results/catalogue.tsv")
    p.add_argument("--scores-dir", required=True, type=Path, help="DIR/<slug>.parquet of every catalogue model")
    p.add_argument("--null-dir", type=Path, help="DIR/<slug>.parquet: the null reference of every model")
    p.add_argument("--matrices-dir", type=Path, help="DIR/<slug>.parquet: Q_h, K_h (only licence-allowed ones go in)")
    p.add_argument("--sweeps-dir", type=Path, help="results/aggregate_sweeps, with --sweeps-catalogue")
    p.add_argument("--sweeps-catalogue", type=Path, help="results/catalogue_sweeps.tsv, with --sweeps-dir")
    p.add_argument("--validation", nargs="*", default=[], type=Path, help="the comparison with the paper (CSV)")
    p.add_argument("--tables", nargs="*", default=[], type=Path, help="table files (CSV, Markdown, LaTeX)")
    p.add_argument("--figures", nargs="*", default=[], type=Path, help="figure files (PDF, PNG)")
    p.add_argument("--config", required=True, type=Path, help="the config the run used (YAML)")
    p.add_argument("--lock", required=True, type=Path, help="requirements.lock")
    p.add_argument("--citation", required=True, type=Path, help="CITATION.cff (the software and the paper)")
    p.add_argument("--out", required=True, help="the release folder")


def run(args) -> int:
    from .. import release
    from ..atomic import check_writable
    from ..version import __version__

    check_writable(args.out, "--out", folder=True)
    inputs = release.Inputs(
        aggregate_dir=args.aggregate_dir,
        catalogue=args.catalogue,
        scores_dir=args.scores_dir,
        config=args.config,
        lock=args.lock,
        citation=args.citation,
        null_dir=args.null_dir,
        matrices_dir=args.matrices_dir,
        validation=args.validation,
        tables=args.tables,
        figures=args.figures,
        sweeps_dir=args.sweeps_dir,
        sweeps_catalogue=args.sweeps_catalogue,
    )
    bundle = release.build(inputs, args.name, args.release_version or __version__)
    written = release.write(bundle, args.out)
    log.info("wrote %s: %d files", args.out, len(written))
    return 0
