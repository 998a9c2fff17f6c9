"""`wqk tokenizer`: train a deterministic WordPiece tokenizer on a corpus, or fetch a pretrained one."""

from __future__ import annotations


def add_arguments(p) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="text file to train a WordPiece tokenizer on")
    src.add_argument("--pretrained", help="hub tokenizer to fetch instead, e.g. bert-base-uncased")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument(
        "--out",
        required=True,
        help="output folder (tokenizer.json, tokenizer_config.json)",
    )


def run(args) -> int:
    from ..atomic import check_writable
    from ..training.tokenizer import build

    check_writable(args.out, folder=True)
    build(
        args.out,
        corpus=args.corpus,
        vocab_size=args.vocab_size,
        pretrained_name=args.pretrained,
    )
    return 0
