"""Atomic outputs: what a killed writer leaves is removed by the next writer, never a live
writer's temporary file; a full disk is one line naming the output, nothing partial left."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wqk.atomic import atomic_path, remove_dead_writers_files, write_text
from wqk.cli import main
from wqk.errors import WqkError
from wqk.tiny import build_tiny

# writes 10 MB into the temporary file of argv[1], says so, then waits to be killed
WRITER = """
import sys, time
from wqk.atomic import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    with open(tmp, "wb") as f:
        f.write(b"x" * 10_000_000)
        f.flush()
        print(tmp, flush=True)
        time.sleep(float(sys.argv[2]))
"""


def start_writer(out: Path, seconds: float = 60) -> tuple[subprocess.Popen, Path]:
    """A writer of `out` in another process, stopped halfway: its temporary file exists."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(seconds)], stdout=subprocess.PIPE, text=True)
    tmp = Path(proc.stdout.readline().strip())
    assert tmp.parent == out.parent and tmp.stat().st_size == 10_000_000
    return proc, tmp


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_killed_writers_leftover_is_removed_by_the_next_writer(tmp_path):
    out = tmp_path / "m.parquet"
    proc, tmp = start_writer(out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert tmp.exists() and not out.exists()  # what kill -9 leaves
    write_text(out, "rerun\n")
    assert out.read_text() == "rerun\n"
    assert hidden(tmp_path) == []


def test_live_writers_temporary_file_is_kept(tmp_path):
    out = tmp_path / "s.csv"
    proc, tmp = start_writer(out, seconds=3)
    try:
        write_text(out, "first\n")  # a second writer of the same output meanwhile
        assert tmp.exists() and tmp.stat().st_size == 10_000_000
        assert remove_dead_writers_files(out) == []
    finally:
        assert proc.wait(timeout=60) == 0
    assert out.read_bytes() == b"x" * 10_000_000  # the live writer finished: its file won
    assert hidden(tmp_path) == []


def test_reused_pid_does_not_keep_a_dead_writers_leftover(tmp_path):
    """A live process holds the dead writer's pid, but started after the file was last
    written: not its writer. The same pid with a fresh file is kept (it may be writing it)."""
    out = tmp_path / "m.parquet"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        old, fresh = tmp_path / f".m.parquet.tmp-{other.pid}", tmp_path / f".n.parquet.tmp-{other.pid}"
        old.write_bytes(b"left by a writer killed an hour ago")
        os.utime(old, (time.time() - 3600,) * 2)
        fresh.write_bytes(b"being written")
        assert remove_dead_writers_files(out) == [old]
        assert remove_dead_writers_files(tmp_path / "n.parquet") == []
        assert fresh.exists() and not old.exists()
    finally:
        other.kill()
        other.wait()


def test_only_the_outputs_own_temporary_files_are_touched(tmp_path):
    out = tmp_path / "a.csv"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    others = [f".ab.csv.tmp-{pid}", f".b.csv.tmp-{pid}", ".a.csv.tmp-notapid", f".a.csv.tmp-{pid}.keep", "a.csv.tmp-1"]
    for name in [f".a.csv.tmp-{pid}", *others]:
        (tmp_path / name).write_text("x")
    write_text(out, "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.csv", *others])


def test_full_disk_names_the_output_and_leaves_nothing(tmp_path):
    out = tmp_path / "sub" / "s.parquet"
    for error in (
        OSError(errno.ENOSPC, "No space left on device"),
        OSError("Error writing bytes: No space left on device"),
    ):
        with pytest.raises(WqkError) as e:
            with atomic_path(out) as tmp:
                tmp.write_bytes(b"half")
                raise error
        assert str(out) in str(e.value) and "disk is full" in str(e.value) and "free space" in str(e.value)
        assert list(out.parent.iterdir()) == []
    with pytest.raises(PermissionError):  # other errors pass unchanged
        with atomic_path(out):
            raise PermissionError(errno.EACCES, "Permission denied")


def test_full_disk_while_scoring_is_one_line(tmp_path, capsys, monkeypatch):
    import pyarrow.parquet as pq

    model = build_tiny("llama", tmp_path / "llama")
    real_write_table = pq.write_table

    def full_disk(table, where, **kw):
        real_write_table(table, where, **kw)  # the bytes land, then the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full_disk)
    out = tmp_path / "scores" / "s.parquet"
    capsys.readouterr()
    assert main(["score", str(model), "--out", str(out), "--device", "cpu", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = next(ln for ln in err.splitlines() if ln.startswith("wqk score: error: "))
    assert f"cannot write {out}" in line and "disk is full" in line
    assert list(out.parent.iterdir()) == []
