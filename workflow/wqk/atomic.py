"""Atomic outputs: write to a temporary name beside the target, rename when complete.

A failed or killed step leaves either the previous file or nothing, never half a file.
What a killed writer leaves (its hidden `.NAME.tmp-PID`, up to the output's size) is removed
by the next writer of the same output. `check_writable` checks an output path before a
command does its work, so that a path that cannot be written fails at once, not after the work.
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
    """Yield a temporary path beside `out`; on success it replaces `out`, on error it is removed.
    Temporary files of earlier writers of `out` that are dead are removed first; a full disk
    is one WqkError naming `out`."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WqkError(f"cannot create the folder of {out}: {_reason(e, out.parent)}") from None
    remove_dead_writers_files(out)
    tmp = _tmp_name(out, os.getpid())
    try:
        try:
            yield tmp
        except OSError as e:
            if _disk_full(e):
                raise WqkError(f"cannot write {out}: {_reason(e, out.parent)}") from None
            raise
        try:
            os.replace(tmp, out)
        except OSError as e:
            raise WqkError(f"cannot write {out}: {_reason(e, out.parent)}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _tmp_name(out: Path, pid: int) -> Path:
    return out.with_name(f".{out.name}.tmp-{pid}")


def remove_dead_writers_files(out: str | os.PathLike) -> list[Path]:
    """Remove the `.NAME.tmp-PID` files beside `out` whose writer is dead (kill -9, out of
    memory, power loss); the paths removed. A file whose pid is alive is kept (a concurrent
    writer's) unless that process started after the file was last written (the pid was reused
    by another process after the writer died)."""
    out = Path(out)
    prefix = _tmp_name(out, 0).name[:-1]
    try:
        names = [n for n in os.listdir(out.parent) if n.startswith(prefix) and n[len(prefix) :].isdigit()]
    except OSError:
        return []
    removed = []
    for name in names:
        pid, leftover = int(name[len(prefix) :]), out.parent / name
        if pid == os.getpid() or _may_be_writing(pid, leftover):
            continue
        try:
            leftover.unlink()
        except OSError:  # gone already (another writer cleaned it), or not ours to remove
            continue
        removed.append(leftover)
    return removed


# how much later than a file's last write a live pid's process must have started to be taken
# for a reused pid: generous, since wall-clock steps (NTP, a resumed VM) shift process start times
_REUSED_PID_MARGIN_S = 60.0


def _may_be_writing(pid: int, leftover: Path) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    except (OSError, OverflowError):  # not a pid this system can have: leave the file alone
        return True
    started = _process_start(pid)
    try:
        written = leftover.stat().st_mtime
    except OSError:
        return True
    return started is None or started <= written + _REUSED_PID_MARGIN_S


def _process_start(pid: int) -> float | None:
    """When process pid started (seconds since the epoch, from /proc); None where unknown."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime")
        )
        ticks = int(stat_line.rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks after boot
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _disk_full(e: OSError) -> bool:
    # Arrow's write errors carry no errno, only the system's message
    return e.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(e)


def _reason(e: OSError, folder: Path) -> str:
    if _disk_full(e):
        return (
            f"the disk is full (no space left on the file system of {folder}, or the quota there is used up); "
            "free space there, "
            "or write the output elsewhere, and rerun"
        )
    return e.strerror or str(e)


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
