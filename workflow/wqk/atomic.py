"""Atomic outputs: write to a temporary name beside the target, rename when complete.

A failed or killed step leaves either the previous file or nothing, never half a file.
`check_writable` checks an output path before a command does its work, so that a path that
cannot be written fails at once, not after the work.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import WqkError


@contextmanager
def atomic_path(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `out`; on success it replaces `out`, on error it is removed."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WqkError(f"cannot create the folder of {out}: {e.strerror or e}") from None
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        try:
            os.replace(tmp, out)
        except OSError as e:
            raise WqkError(f"cannot write {out}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_text(out: str | os.PathLike, text: str) -> Path:
    with atomic_path(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(out)


def symlink_loop(path: str | os.PathLike) -> Path | None:
    """The first part of `path` that is a symlink loop (a link that resolves to itself, or
    too many levels of links), None when there is none."""
    path = Path(os.path.expanduser(path))
    for part in (*reversed(path.parents), path):
        try:
            os.stat(part)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return part
            if not isinstance(e, (FileNotFoundError, NotADirectoryError)):
                return None
    return None


def check_writable(path: str | os.PathLike | None, what: str = "--out", folder: bool = False) -> Path:
    """`path` as a Path when a file (folder=True: a folder) can be written there; else a
    WqkError now, before any work: the path is empty, is a folder where a file goes (a file
    where a folder goes), has a file or a symlink loop on its way, or its nearest existing
    folder cannot be written (no permission, a read-only file system: os.access, which
    says so to root too). Missing folders on the way are fine: writing creates them."""
    kind = "folder" if folder else "file"
    text = "" if path is None else os.fspath(path)
    if not str(text).strip():
        raise WqkError(f"{what} is empty: give a {kind} path")
    target = Path(text)
    where = f"{what} {text}"
    existing = None  # the deepest part of the path that exists, and its stat
    for part in (*reversed(target.parents), target):
        try:
            st = os.stat(part)
        except (FileNotFoundError, NotADirectoryError):
            break
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise WqkError(
                    f"{where}: {part} is a symlink loop (a link that resolves to itself); fix the link"
                ) from None
            raise WqkError(f"{where}: cannot check {part} ({e.strerror or e})") from None
        if part != target and not stat.S_ISDIR(st.st_mode):
            raise WqkError(f"{where}: {part} is a file, not a folder; give a path in a folder")
        existing = (part, st)
    if existing is None:  # not even the current folder
        raise WqkError(f"{where}: no folder of it exists (was the current folder removed?)")
    part, st = existing
    if part == target:
        if not folder and stat.S_ISDIR(st.st_mode):
            raise WqkError(f"{where} is a folder, not a file; give a file name (e.g. inside it)")
        if folder and not stat.S_ISDIR(st.st_mode):
            raise WqkError(f"{where} is a file, not a folder; give a folder (new or existing)")
        if not folder:
            part = target.parent
    if not os.access(part, os.W_OK | os.X_OK):
        raise WqkError(f"{where}: cannot write in {part} (read-only file system or no permission)")
    return target
