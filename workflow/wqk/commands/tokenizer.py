"""`wqk tokenizer`: train a deterministic WordPiece tokenizer on a corpus, or fetch a pretrained one."""

from __future__ import annotations

from ..training.corpus import NAMES


def add_arguments(p) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--dataset",
        choices=NAMES,
        help="corpus to train a WordPiece tokenizer on, its documents streamed from the source (as `wqk corpus`)",
    )
    src.add_argument("--corpus", help="text file to train a WordPiece tokenizer on (paragraphs at blank lines)")
    src.add_argument("--pretrained", help="hub tokenizer to fetch instead, e.g. bert-base-uncased")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--max-chars", type=int, default=None, help="with --dataset: train on its first N characters only")
    p.add_argument("--jigsaw-dir", default="data/jigsaw", help="with --dataset jigsaw: folder with Kaggle's train.csv")
    p.add_argument(
        "--red-pajama-url",
        default=None,
        help="with --dataset red_pajama: the dataset's URL or a local copy of it (default: the published one)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="output folder (tokenizer.json, tokenizer_config.json)",
    )


def run(args) -> int:
    from ..atomic import check_writable
    from ..training.corpus import documents, paragraphs
    from ..training.tokenizer import build

    check_writable(args.out, folder=True)
    corpus = args.corpus
    if args.dataset:

        def corpus():
            docs = documents(args.dataset, args.jigsaw_dir, args.red_pajama_url)
            return paragraphs(docs, args.max_chars)

    build(
        args.out,
        corpus=corpus,
        vocab_size=args.vocab_size,
        pretrained_name=args.pretrained,
    )
    return 0
