"""Progress bars: on a terminal only, never with HF_HUB_DISABLE_PROGRESS_BARS or `wqk -q`.

Snakemake rules send stderr to logs/...: a bar there is a stream of carriage-return frames.
"""

import io
import os
import subprocess
import sys

import pytest

from wqk import progress
from wqk.tiny import build_tiny

ENV = progress.ENV  # HF_HUB_DISABLE_PROGRESS_BARS


@pytest.mark.parametrize(
    ("enabled", "quiet", "env", "expected"),
    [
        (True, False, None, None),  # None: tqdm draws on a terminal only
        (False, False, None, True),  # the caller asks for none
        (True, True, None, True),  # wqk -q
        (True, False, "1", True),
        (True, False, "true", True),
        (True, False, "YES", True),
        (True, False, "On", True),
        (True, False, "0", None),
        (True, False, "false", None),
        (True, False, "", None),
        (True, False, "no", None),
        (False, False, "0", True),  # a false value enables nothing the caller turned off
        (True, True, "0", True),
    ],
)
def test_when_a_bar_is_drawn(enabled, quiet, env, expected):
    environ = {} if env is None else {ENV: env}
    assert progress.disable(enabled, quiet=quiet, environ=environ) is expected


@pytest.mark.parametrize("value", ["1", "0", "true", "TRUE", "yes", "on", "off", "", "2", " 1", "y"])
def test_the_variable_reads_as_huggingface_hub_reads_it(value):
    from huggingface_hub.constants import _is_true

    assert progress.env_disables({ENV: value}) is _is_true(value)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_settings(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    progress.set_quiet(False)
    yield monkeypatch
    progress.set_quiet(False)


def _frames(stream, **kwargs) -> str:
    for _ in progress.bar(range(3), file=stream, desc="probe", **kwargs):
        pass
    return stream.getvalue()


def test_the_helper_draws_on_a_terminal_only(no_settings):
    assert "\r" in _frames(_Terminal()) and "probe" in _frames(_Terminal())
    assert _frames(io.StringIO()) == ""  # a file or pipe: nothing
    assert _frames(_Terminal(), enabled=False) == ""
    no_settings.setenv(ENV, "1")
    assert _frames(_Terminal()) == ""
    no_settings.delenv(ENV)
    progress.set_quiet(True)
    assert _frames(_Terminal()) == ""
    with pytest.raises(TypeError):
        progress.bar(range(3), disable=False)


# ---------------------------------------------------------------- `wqk score` as Snakemake and a user run it


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny("llama", tmp_path_factory.mktemp("progress") / "tiny-llama")


def _wqk(argv: list[str], tmp_path, terminal: bool, env: dict | None = None) -> tuple[str, str]:
    """(stdout, stderr) of `python -m wqk.cli argv`, stdout to a file and stderr to a file
    or to a pseudo-terminal (newlines not translated, 100 columns)."""
    environ = {k: v for k, v in os.environ.items() if k != ENV} | (env or {})
    cmd = [sys.executable, "-m", "wqk.cli", *argv]
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out_path, "wb") as out:
        if not terminal:
            with open(err_path, "wb") as err:
                run = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=environ, timeout=300)
            err_text, code = err_path.read_text(), run.returncode
        else:
            err_text, code = _on_terminal(cmd, out, environ)
    assert code == 0, err_text[-3000:]
    return out_path.read_text(), err_text


def _on_terminal(cmd, out, environ) -> tuple[str, int]:
    fcntl = pytest.importorskip("fcntl")
    pty = pytest.importorskip("pty")
    termios = pytest.importorskip("termios")
    import select
    import struct

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.ONLCR  # "\n" stays "\n": every "\r" is the program's own
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=slave, env=environ)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 300)
            if not ready:
                proc.kill()
                pytest.fail(f"{cmd} wrote nothing for 300 s")
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return b"".join(chunks).decode(errors="replace"), proc.wait(timeout=60)


def test_no_bar_frames_in_a_log_file(tiny, tmp_path):
    """stderr to a file, as a Snakemake rule's log: no bar, the timing line still there."""
    out, err = _wqk(["score", str(tiny), "--out", str(tmp_path / "s.parquet"), "--device", "cpu"], tmp_path, False)
    assert "\r" not in err and "scoring layers" not in err, err
    assert "wqk score: scored 2 layers" in err
    assert "median" in out


@pytest.mark.slow
def test_no_bar_frames_in_the_log_of_the_tiny_rule(tmp_path):
    """`wqk tiny` saves through transformers, whose own bars follow the same rules."""
    _, err = _wqk(["tiny", "llama", "--out", str(tmp_path / "t")], tmp_path, False)
    assert (tmp_path / "t" / "model.safetensors").is_file()
    assert "\r" not in err and "Writing model shards" not in err, err


@pytest.mark.parametrize(
    ("flags", "env", "drawn"),
    [
        ([], {}, True),
        ([], {ENV: "1"}, False),
        (["-q"], {}, False),
        (["--quiet"], {}, False),
    ],
    ids=["terminal", "env", "-q", "--quiet"],
)
def test_bars_on_a_terminal_unless_told_otherwise(tiny, tmp_path, flags, env, drawn):
    """On a terminal the scoring bar is drawn, unless HF_HUB_DISABLE_PROGRESS_BARS or the
    global `wqk -q`. `wqk score --quiet` still means only "no per-layer table"."""
    out_file = str(tmp_path / "s.parquet")
    argv = [*flags, "score", str(tiny), "--out", out_file, "--device", "cpu"]
    if not flags:
        argv.append("--quiet")  # the command's own flag: no table, bars as usual
    out, err = _wqk(argv, tmp_path, True, env)
    assert ("scoring layers" in err) is drawn, err
    assert ("\r" in err) is drawn, err
    assert "wqk score: scored 2 layers" in err
    assert ("median" in out) is bool(flags), out  # the global -q keeps the per-layer table
