"""Atomic outputs: write to a temporary name beside the target, rename when complete.

A failed or killed step leaves either the previous file or nothing, never half a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `out`; on success it replaces `out`, on error it is removed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(out: str | os.PathLike, text: str) -> Path:
    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(out)
