"""`wqk corpus`: a training corpus as token ids (.npy, with --tokenizer) or as text.

The documents are streamed from their source and tokenised in chunks into a memory-mapped
array of token ids (uint16, or uint32 for vocabularies over 65536): each paragraph's ids
followed by [SEP]. `wqk train` reads its batches from that array. Without --tokenizer the
documents are written as one text file instead (separated by blank lines).
"""

from __future__ import annotations

from ..training.corpus import NAMES


def add_arguments(p) -> None:
    p.add_argument("--name", choices=NAMES, required=True)
    p.add_argument("--out", required=True, help="output file: token ids (.npy) with --tokenizer, else text")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder (`wqk tokenizer`): write token ids")
    p.add_argument(
        "--jigsaw-dir",
        default="data/jigsaw",
        help="folder with Kaggle's Jigsaw train.csv",
    )
    p.add_argument(
        "--red-pajama-url",
        default=None,
        help="RedPajama-V2's URL or a local copy with the same layout (listings/, documents/)",
    )
    p.add_argument("--max-chars", type=int, default=None, help="stop after this many characters of text")
    p.add_argument("--max-tokens", type=int, default=None, help="with --tokenizer: stop after this many tokens")


def run(args) -> int:
    from ..atomic import check_writable
    from ..errors import WqkError
    from ..training.corpus import documents, paragraphs, write_corpus, write_tokens

    check_writable(args.out)
    docs = documents(args.name, args.jigsaw_dir, args.red_pajama_url)
    if args.tokenizer is None:
        if args.max_tokens is not None:
            raise WqkError("--max-tokens needs --tokenizer (token ids); for text use --max-chars")
        n = write_corpus(docs, args.out, args.max_chars)
        print(f"{args.out}: {n} characters")
        return 0

    from ..progress import bar
    from ..training.tokenizer import load

    tok = load(args.tokenizer)
    with bar(total=args.max_tokens, desc=args.name, unit="tok", unit_scale=True) as progress:
        n = write_tokens(paragraphs(docs, args.max_chars), tok, args.out, args.max_tokens, progress=progress.update)
    print(f"{args.out}: {n} tokens")
    return 0
