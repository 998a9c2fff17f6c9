"""`wqk null`: scores of random Gaussian Q, K with the shapes of one model's scores.

The workflow draws the null in the scoring job (`wqk score ... --null-out`), which saves
this command's start (importing torch alone takes about a second); both draw the same
layers (wqk.null: a quarter of each stack's layers, at least 2, at most 8).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("--scores", required=True, metavar="PARQUET", help="the model's scores (wqk score)")
    p.add_argument("--out", required=True, metavar="PARQUET", help="null scores, same columns, synthetic=True")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument(
        "--all-layers", action="store_true", help="draw every layer (default: a quarter of each stack's, 2 to 8)"
    )


def run(args) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..atomic import check_writable
    from ..errors import WqkError
    from ..scoring import resolve

    check_writable(args.out)
    device = resolve(args.device)  # checked before the work
    try:
        scores = pq.read_table(args.scores)
    except FileNotFoundError as e:
        raise WqkError(f"scores file {args.scores} not found: run `wqk score` for that model first") from e
    except (pa.ArrowException, OSError) as e:
        raise WqkError(
            f"{args.scores} is not a readable Parquet file ({str(e).splitlines()[0]}): truncated or corrupt? "
            "write it again with `wqk score`"
        ) from None
    from ..null import null_table
    from ..score_table import write_scores

    out = null_table(scores, seed=args.seed, device=device, all_layers=args.all_layers)
    write_scores(out, args.out)
    log.info("wrote %s (%d rows)", args.out, out.num_rows)
    return 0
