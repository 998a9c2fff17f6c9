"""`wqk corpus`: build a training corpus as one text file (documents separated by blank lines)."""

from __future__ import annotations

from ..training.corpus import NAMES


def add_arguments(p) -> None:
    p.add_argument("--name", choices=NAMES, required=True)
    p.add_argument("--out", required=True, help="output text file")
    p.add_argument(
        "--jigsaw-dir",
        default="data/jigsaw",
        help="folder with Kaggle's Jigsaw train.csv",
    )
    p.add_argument("--max-chars", type=int, default=None, help="stop after this many characters")


def run(args) -> int:
    from ..atomic import check_writable
    from ..training.corpus import documents, write_corpus

    check_writable(args.out)
    n = write_corpus(documents(args.name, args.jigsaw_dir), args.out, args.max_chars)
    print(f"{args.out}: {n} characters")
    return 0
