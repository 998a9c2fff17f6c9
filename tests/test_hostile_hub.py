"""The hub fetch against a hostile hub: the stand-in hub (tests/standin_hub) in each of its HOSTILE
modes, as a broken proxy or mirror would answer. Each case ends in the correct result or one
clear line naming the repo, the file and the way out: no wrong byte cached, no endless wait, no
leftover staging folder, no traceback."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path

import pytest

from standin_hub import point_at, start
from test_hub import CONFIG, FakeHub, assert_qk_only, data_bytes, llama_tensors, serving, sharded_repo
from wqk.checkpoints.hub import fetch_hub
from wqk.cli import main
from wqk.errors import CorruptCheckpoint, SourceUnavailable

REPO = "acme/tiny-llama"
SHARD = "model-00002-of-00002.safetensors"


@pytest.fixture(scope="module")
def tensors():
    return llama_tensors()


@pytest.fixture(scope="module")
def server(tmp_path_factory, tensors):
    root = tmp_path_factory.mktemp("hostile")
    folder = root / "models" / REPO
    folder.mkdir(parents=True)
    for name, data in sharded_repo(tensors).items():
        (folder / name).write_bytes(data)
    (root / "manifest.json").write_text(json.dumps({"models": {REPO: {}}}))
    hub = start(root, log_unknown=False)
    yield hub
    hub.stop()


@pytest.fixture
def hub(server, tmp_path, monkeypatch):
    """The server with no hostile mode, and this test's own caches behind HF_ENDPOINT."""
    server.hostile, server.trickle_s = set(), 0.5
    point_at(server, monkeypatch, tmp_path, token=None)
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RETRIES", 1)
    server.model_cache = tmp_path / "wqk" / "acme--tiny-llama"
    server.sha = server.repos["models", REPO].sha
    yield server
    server.hostile = set()


def one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(f"wqk {command}: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def cached(hub) -> list[str]:
    """What our cache holds for the model besides refs/ and the build lock."""
    if not hub.model_cache.exists():
        return []
    return sorted(p.name for p in hub.model_cache.iterdir() if p.name != "refs" and not p.name.endswith(".lock"))


def score(tmp_path, *extra) -> int:
    return main(["score", REPO, "--out", str(tmp_path / "scores.parquet"), "--quiet", *extra])


def test_a_wrong_content_range_is_refused_and_nothing_is_cached(hub, tensors, tmp_path, capsys):
    hub.hostile = {"wrong-range"}
    assert score(tmp_path) == 1
    line = one_error_line(capsys, "score")
    assert REPO in line and ".safetensors" in line and "Content-Range 'bytes " in line and "HF_ENDPOINT" in line
    assert cached(hub) == [] and not (tmp_path / "scores.parquet").exists()
    hub.hostile = set()
    assert score(tmp_path) == 0
    assert_qk_only(hub.model_cache / hub.sha, tensors, gains=True)


@pytest.mark.parametrize(
    "limit, says",
    [
        ({"WQK_HUB_MIN_RATE": "1000", "WQK_HUB_RATE_WINDOW": "1"}, "under the minimum of 1000 bytes/s"),
        ({"WQK_HUB_MIN_RATE": "0.001", "WQK_HUB_REQUEST_DEADLINE": "1"}, "more than 1 s (WQK_HUB_REQUEST_DEADLINE)"),
    ],
)
def test_a_trickle_trips_the_progress_deadline_and_resumes(hub, tensors, tmp_path, monkeypatch, capsys, limit, says):
    for var, value in limit.items():
        monkeypatch.setenv(var, value)
    hub.hostile, hub.trickle_s = {"trickle"}, 0.2
    t0 = time.monotonic()
    assert score(tmp_path) == 1
    assert time.monotonic() - t0 < 30
    line = one_error_line(capsys, "score")
    assert "answered for acme/tiny-llama/model-0000" in line and "but stalled" in line and says in line
    assert "rerun to resume" in line and "cannot reach" not in line
    assert cached(hub) == [f".{hub.sha}.partial"]  # what the rerun resumes from
    hub.hostile = set()
    assert score(tmp_path) == 0
    assert_qk_only(hub.model_cache / hub.sha, tensors, gains=True)
    assert cached(hub) == [hub.sha]


def test_a_body_that_stops_is_a_stall_not_an_unreachable_hub(hub, tmp_path):
    hub.hostile, hub.trickle_s = {"trickle"}, 3.0  # nothing for longer than the read timeout
    with pytest.raises(SourceUnavailable) as e:
        fetch_hub(REPO, timeout=0.5, progress=False)
    msg = str(e.value)
    assert "answered for acme/tiny-llama but stalled (ReadTimeout" in msg and "WQK_HUB_TIMEOUT" in msg, msg


def test_a_bad_deadline_setting_names_the_variable(hub, monkeypatch):
    monkeypatch.setenv("WQK_HUB_RATE_WINDOW", "soon")
    with pytest.raises(SourceUnavailable, match=r"WQK_HUB_RATE_WINDOW='soon' is not a positive number"):
        fetch_hub(REPO, progress=False)


def test_an_html_config_is_refused_then_fetched_again(hub, tmp_path, capsys):
    hub.hostile = {"html-config"}
    assert main(["fetch", REPO, "--no-progress"]) == 1
    line = one_error_line(capsys, "fetch")
    assert f"{REPO}@{hub.sha}/config.json" in line and "is not JSON (it starts b'<!DOCTYPE html>" in line
    assert "proxy" in line and cached(hub) == []
    hub.hostile = set()  # the HTML page is still in the HF cache: downloaded again
    assert main(["fetch", REPO, "--no-progress"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert json.loads((folder / "config.json").read_text()) == CONFIG


@pytest.mark.parametrize("damage", ["html config", "truncated weights", "missing weights"])
def test_a_damaged_cache_is_fetched_again_and_named_offline(hub, tensors, monkeypatch, capsys, caplog, damage):
    assert main(["fetch", REPO, "--no-progress"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    weights = folder / "model.safetensors"
    if damage == "html config":
        (folder / "config.json").write_text("<html>a proxy's error page</html>")
    elif damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:-100])
    else:
        weights.unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", REPO, "--no-progress"]) == 1
    line = one_error_line(capsys, "fetch")
    assert f"the cached copy in {folder} is damaged" in line and f"wqk fetch --force {REPO}" in line
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert main(["fetch", REPO, "--no-progress"]) == 0
    assert Path(capsys.readouterr().out.strip()) == folder
    assert any(
        f"{folder} is damaged" in r.getMessage() and "fetching it again" in r.getMessage() for r in caplog.records
    )
    assert json.loads((folder / "config.json").read_text()) == CONFIG
    assert_qk_only(folder, tensors, gains=True)
    assert cached(hub) == [hub.sha]


def test_fetch_force_fetches_again_and_replaces_the_folder(hub, tensors, capsys):
    assert main(["fetch", REPO, "--no-progress"]) == 0
    folder = Path(capsys.readouterr().out.strip())
    before = (folder / "model.safetensors").stat().st_ino
    ranges = len([r for r in hub.cdn.seen if r["range"]])
    assert main(["fetch", REPO, "--no-progress", "--force"]) == 0
    assert Path(capsys.readouterr().out.strip()) == folder
    assert (folder / "model.safetensors").stat().st_ino != before
    assert len([r for r in hub.cdn.seen if r["range"]]) > ranges  # the ranges asked for again
    assert_qk_only(folder, tensors, gains=True)
    assert cached(hub) == [hub.sha]  # no staging or old folder left
    for damage in ("config.json", "model.safetensors"):  # --force also when the folder is broken
        (folder / damage).write_bytes(b"")
    assert main(["fetch", REPO, "--no-progress", "--force"]) == 0
    assert_qk_only(folder, tensors, gains=True)


def test_fetch_force_needs_the_hub(hub, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", REPO, "--no-progress", "--force"]) == 1
    assert "--force fetches from the hub again and HF_HUB_OFFLINE=1 is set" in one_error_line(capsys, "fetch")


BROKEN_JSON = [
    ("nested-config", "config.json", "is JSON nested too deeply to read"),
    ("nested-index", "model.safetensors.index.json", "is JSON nested too deeply to read"),
    ("no-weight-map", "model.safetensors.index.json", "has no weight_map"),
]


@pytest.mark.parametrize(
    "mode, file, says, qk_only",
    [(*case, qk_only) for case in BROKEN_JSON for qk_only in (True, False)]
    + [("nested-header", "model-00001-of-00002.safetensors", "header is JSON nested too deeply", True)],
)
def test_broken_json_from_the_hub_is_named(hub, mode, file, says, qk_only):
    hub.hostile = {mode}
    with pytest.raises(CorruptCheckpoint) as e:
        fetch_hub(REPO, qk_only=qk_only, progress=False)
    msg = str(e.value)
    assert f"{REPO}@{hub.sha}/{file}" in msg and says in msg and "\n" not in msg, msg
    assert cached(hub) == []


@pytest.mark.parametrize(
    "mode, says, qk_only",
    [
        ("redirect-loop", "redirected a request for acme/tiny-llama in a loop", True),
        ("redirect-loop", "redirected a request for acme/tiny-llama in a loop", False),
        ("bad-commit", "huggingface_hub refused the answer of the hub at", True),
        ("bad-commit", "huggingface_hub refused the answer of the hub at", False),
        ("short-body", "but stalled (RemoteProtocolError", True),
        ("short-body", "but stalled (RemoteProtocolError", False),
        ("corrupt-lfs", "has sha256", False),  # whole files: the LFS sha256 is checked
    ],
)
def test_a_hostile_answer_is_one_clear_error(hub, tensors, mode, says, qk_only):
    hub.hostile = {mode}
    with pytest.raises(SourceUnavailable) as e:
        fetch_hub(REPO, qk_only=qk_only, progress=False)
    msg = str(e.value)
    assert REPO in msg and says in msg and "\n" not in msg, msg
    assert [p for p in cached(hub) if not p.endswith(".partial")] == []
    hub.hostile = set()  # nothing wrong was kept: the same call now gives the right tensors
    folder = fetch_hub(REPO, qk_only=qk_only, progress=False)
    assert folder.name == (hub.sha if qk_only else f"{hub.sha}-all")
    assert_qk_only(folder, tensors) if qk_only else None


def test_a_process_waiting_for_the_lock_says_so(hub, tensors, capfd):
    hub.model_cache.mkdir(parents=True)
    lock_path = hub.model_cache / f".{hub.sha}.lock"
    result = {}
    with open(lock_path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiter = threading.Thread(target=lambda: result.update(folder=fetch_hub(REPO, progress=False)))
        waiter.start()
        deadline = time.monotonic() + 20
        err = ""
        while "waiting for another process" not in err and time.monotonic() < deadline:
            time.sleep(0.05)
            err += capfd.readouterr().err
        assert waiter.is_alive()
    waiter.join(20)
    line = next(line for line in err.splitlines() if "waiting for another process" in line)
    assert f"fetching {REPO}@{hub.sha}" in line and str(lock_path) in line
    assert_qk_only(result["folder"], tensors)


# ---------------------------------------------------------------- the sidecar vouches only for synced bytes


def test_a_resume_refetches_a_range_whose_bytes_were_lost(tensors, tmp_path, monkeypatch):
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RETRIES", 0)
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RECORD_EVERY", 8192)
    synced, fsync = [], os.fsync
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.os.fsync", lambda fd: synced.append(fd) or fsync(fd))
    kw = dict(cache_dir=tmp_path / "wqk", hf_cache_dir=tmp_path / "hf", progress=False)
    with serving(FakeHub(sharded_repo(tensors))) as server:
        server.cut_after, server.cuts_left = 40_000, 1
        with pytest.raises(SourceUnavailable, match="rerun to resume"):
            fetch_hub(REPO, endpoint=server.url, **kw)
        stage = tmp_path / "wqk" / "acme--tiny-llama" / f".{server.sha}.partial"
        record = json.loads((stage / "model.safetensors.part.json").read_text())
        assert synced and len(record["xxh3"]) == len(record["done"])
        lost = record["done"].index(40_000)  # the cut range: as if its bytes never reached the disk
        head_len = 8 + int.from_bytes((stage / "model.safetensors.part").read_bytes()[:8], "little")
        part = stage / "model.safetensors.part"
        data = bytearray(part.read_bytes())
        from wqk.checkpoints.hub import ranges
        from wqk.checkpoints.hub.client import Hub

        _, plan, _ = ranges._plan(
            Hub.connect(REPO, server.url), server.sha, sorted(f for f in server.files if f.endswith(".safetensors"))
        )
        at = head_len + plan[lost].out
        data[at : at + 40_000] = bytes(40_000)
        part.write_bytes(bytes(data))
        first = data_bytes(server)
        folder = fetch_hub(REPO, endpoint=server.url, **kw)
    assert_qk_only(folder, tensors)
    others = sum(d for i, d in enumerate(record["done"]) if i != lost)
    refetched = data_bytes(server) - first
    assert refetched == sum(r.end - r.start for r in plan) - others  # the lost range from its start, no more


# ---------------------------------------------------------------- each answer against its request


def answer(status=206, content_range=None, length=None, commit=None, history=()):
    from types import SimpleNamespace

    headers = {k: v for k, v in {"Content-Range": content_range, "Content-Length": length}.items() if v is not None}
    if commit is not None:
        headers["X-Repo-Commit"] = commit
    return SimpleNamespace(status_code=status, headers=headers, history=list(history))


@pytest.mark.parametrize(
    "r, ok",
    [
        (answer(content_range="bytes 100-199/1000", length="100"), True),
        (answer(content_range="bytes 100-149/150", length="50"), True),  # the rest of a shorter file
        (answer(content_range="bytes 100-199/1000"), True),  # no Content-Length: the body is counted
        (answer(content_range="bytes 96-195/1000", length="100"), False),  # another range
        (answer(content_range="bytes 100-199/1000", length="99"), False),  # a body of another length
        (answer(content_range="bytes 100-198/1000", length="99"), False),  # short of the range
        (answer(length="100"), False),  # no Content-Range at all
        (answer(content_range="bytes 100-199/1000", length="100", commit="f" * 40), False),  # another commit
        (answer(content_range="bytes 100-199/1000", history=[answer(302, commit="f" * 40)]), False),  # via redirect
        (answer(content_range="bytes 100-199/1000", history=[answer(302, commit="a" * 40)]), True),
    ],
)
def test_every_range_answer_is_checked_against_its_request(r, ok):
    from wqk.checkpoints.hub.client import BadAnswer, _check_answer

    where = f"{REPO}@{'a' * 40}/{SHARD}"
    if ok:
        _check_answer(r, where, "http://hub", "a" * 40, 100, 200)
        return
    with pytest.raises(BadAnswer) as e:
        _check_answer(r, where, "http://hub", "a" * 40, 100, 200)
    assert where in str(e.value) and "HF_ENDPOINT" in str(e.value)


def test_nested_json_in_a_local_folder_is_named(tmp_path):
    from wqk.checkpoints.formats import read_json
    from wqk.checkpoints.formats.safetensors import parse_header

    nested = b"[" * 100_000 + b"]" * 100_000
    (tmp_path / "config.json").write_bytes(nested)
    with pytest.raises(CorruptCheckpoint, match=r"config.json is JSON nested too deeply to read; re-download it"):
        read_json(tmp_path / "config.json")
    with pytest.raises(CorruptCheckpoint, match=r"model.safetensors: safetensors header is JSON nested too deeply"):
        parse_header(b'{"a":' + nested + b"}", str(tmp_path / "model.safetensors"))
