"""wqk extract SOURCE --out MATRICES.parquet"""


def add_arguments(p):
    p.add_argument("source", help="local folder, pypi:<package>, or hub id org/name[@revision]")
    p.add_argument("--out", required=True, help="matrices Parquet to write")
    p.add_argument("--name", help="model name to record (default: the source string)")
    p.add_argument("--synthetic", action="store_true", help="mark as synthetic (not real data)")


def run(args):
    from ..atomic import check_writable
    from ..checkpoints import locate

    out = check_writable(args.out)
    found = locate(args.source)  # starts the provenance hash, which runs while torch loads
    from ..adapters import open_source
    from ..matrices import write_matrices

    info, blocks = open_source(found, args.name, args.synthetic)
    n = write_matrices(info, blocks, out)
    print(f"{info.model}: {n} attention layers -> {out}")
    return 0
