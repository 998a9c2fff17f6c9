"""Our cache of fetched hub models: `<root>/<slug>/<sha>/` (q/k tensors) or `<sha>-all/` (whole
files), each with config.json, the weights, `.wqk-fetch.json` and `.revision`; a GGUF file chosen
by name (org/name:FILE.gguf) has `<sha>-<file slug>[-all]/`, with that file and no config.json
(its metadata is the config).

A folder is built under a lock (two jobs fetching one model: the second waits, saying so on
stderr) in a staging folder, checked (checks.folder_problem), synced to disk and renamed when
complete, so a folder with `.revision` is always whole; a rebuild (force) replaces it the same way.
A failed build keeps its staging folder only when a rerun can resume from it (ranges.Interrupted). `refs/<branch>`
remembers which sha a branch or tag resolved to, for offline use. Only a 40-hex commit id ever
names a folder here (the client refuses any other from the hub). Whole files come through
huggingface_hub's own cache (never written into here) and are hard-linked, else symlinked; a
snapshot filled there by someone else serves offline too.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ...errors import CorruptCheckpoint, SourceUnavailable
from ...ids import is_commit, slug
from ..provenance import MANIFEST, REVISION
from .checks import folder_problem, hub_json
from .client import Hub, Unreachable
from .ranges import Interrupted, fetch_gguf, fetch_qk, fsync_dir
from .select import Factory, gguf_file, tensor_picker, weight_files


def cache_root(cache_dir=None) -> Path:
    """Our cache root: cache_dir, else $WQK_CACHE, else ~/.cache/wqk."""
    return Path(cache_dir or os.environ.get("WQK_CACHE") or "~/.cache/wqk").expanduser()


def write_ref(base: Path, revision: str, sha: str) -> None:
    """Remember that `revision` of the model cached at `base` resolved to commit `sha`."""
    p = _ref_path(base, revision)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}")
    tmp.write_text(sha + "\n")
    os.replace(tmp, p)


def _ref_path(base: Path, revision: str) -> Path:
    return base / "refs" / slug(revision)


def finished(base: Path, revision: str | None, suffix: str, use_refs: bool = False) -> Path | None:
    """Our finished folder for a commit sha, or (use_refs: offline, or the hub unreachable)
    for a branch/tag we resolved before; online, branches are re-resolved."""
    if not is_commit(revision):
        if not use_refs:
            return None
        ref = _ref_path(base, revision or "main")
        if not ref.exists():
            return None
        revision = ref.read_text().strip()
        if not is_commit(revision):
            return None
    for name in (f"{revision}{suffix}", f"{revision}{suffix.removesuffix('-all')}-all"):  # whole files serve q/k too
        if (base / name / REVISION).exists():
            return base / name
    return None


def from_hf_cache(hub: Hub, base: Path, revision: str | None, suffix: str) -> Path | None:
    """Our folder built from an HF cache snapshot (filled by snapshot_download elsewhere), without
    the network; None when that cache does not hold the model."""
    try:
        config = hub.download("config.json", revision or "main", local_only=True)
    except SourceUnavailable:
        return None
    sha = config.parent.name
    if not is_commit(sha):  # the HF cache names snapshots by the commit the hub sent
        return None
    done = finished(base, sha, suffix)
    if done is not None:
        return done
    files = sorted(p.name for p in config.parent.iterdir())
    try:
        return build(hub, base, sha, revision, suffix, files, qk_only=False, progress=False, local_only=True)
    except SourceUnavailable:
        return None


def build(
    hub: Hub,
    base: Path,
    sha: str,
    revision: str | None,
    suffix: str,
    files: list[str],
    *,
    qk_only: bool,
    progress: bool,
    local_only: bool = False,
    force: bool = False,
    tensors: Factory | None = None,
    file: str | None = None,
) -> Path:
    """Our folder `<base>/<sha><suffix>` for a repo whose files at `sha` are `files`: q/k byte
    ranges of safetensors shards or of a GGUF file (qk_only) or whole files linked from the HF
    cache. force: built again from the hub (whole files downloaded again), replacing a finished
    folder. tensors: config.json -> the tensors to take (select.tensor_picker; None: the name
    heuristic). file: the GGUF file chosen (select.gguf_file)."""
    if not is_commit(sha):
        raise SourceUnavailable(f"{hub.repo_id}: {sha!r} is not a 40-hex commit id: refusing it")
    gguf = gguf_file(hub, sha, files, file)
    if gguf is None and "config.json" not in files:
        raise SourceUnavailable(
            f"{hub.repo_id}@{sha} has no config.json: give a local folder with config.json and weights"
        )
    final = base / f"{sha}{suffix}"
    stage = base / f".{sha}{suffix}.partial"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{sha}{suffix}.lock", "w") as lock:
        _wait_for(lock, f"{hub.repo_id}@{sha}", final)
        if (final / REVISION).exists() and not force:
            return final
        if force:
            shutil.rmtree(stage, ignore_errors=True)  # start afresh, not from an earlier attempt
        stage.mkdir(exist_ok=True)
        try:
            if gguf is None:
                _fill(hub, stage, sha, revision, files, qk_only, progress, local_only, force, tensors)
            else:
                _fill_gguf(hub, stage, sha, revision, gguf, qk_only, progress, local_only, force, tensors)
        except (Interrupted, Unreachable, KeyboardInterrupt):
            if not any(stage.iterdir()):
                stage.rmdir()
            raise  # the staging folder holds what a rerun resumes from
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        _replace(stage, final)
    return final


def _fill(hub: Hub, stage: Path, sha, revision, files, qk_only, progress, local_only, force, tensors) -> None:
    """Fetch into the staging folder, check it and sync it to disk; `.revision` last."""
    config, config_data = hub_json(hub, "config.json", sha, local_only, force)
    pick = tensor_picker(config_data, tensors)
    kind, weights, indexes = weight_files(hub, sha, files, qk_only, local_only, force, pick)
    manifest = _manifest(hub, sha, revision) | {"source_files": weights}
    if qk_only and kind == "safetensors":
        manifest.update(fetch_qk(hub, sha, weights, stage, progress, pick), mode="qk-ranges")
    else:
        for name in indexes + weights:
            _link(hub.download(name, sha, local_only, force), stage / name)
        manifest["mode"] = "whole-files"
    shutil.copyfile(config, stage / "config.json")
    _finish(hub, stage, sha, manifest)


def _fill_gguf(hub: Hub, stage: Path, sha, revision, file: str, qk_only, progress, local_only, force, tensors) -> None:
    """As _fill, for one GGUF file: its header and the tensors the record reads (qk_only), else
    the whole file; kept under its own name, the config being its metadata."""
    manifest = _manifest(hub, sha, revision) | {"source_files": [file], "format": "gguf"}
    local = stage / file.rsplit("/", 1)[-1]
    if qk_only:
        manifest.update(fetch_gguf(hub, sha, file, local, progress, tensors), mode="qk-ranges")
    else:
        _link(hub.download(file, sha, local_only, force), local)
        manifest["mode"] = "whole-files"
    _finish(hub, stage, sha, manifest)


def _manifest(hub: Hub, sha: str, revision) -> dict:
    """What every cache folder's manifest says of where it came from."""
    return {"repo_id": hub.repo_id, "revision": revision, "sha": sha, "endpoint": hub.endpoint}


def _finish(hub: Hub, stage: Path, sha: str, manifest: dict) -> None:
    (stage / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    why = folder_problem(stage)
    if why is not None:
        raise CorruptCheckpoint(
            f"{hub.repo_id}@{sha}: what the hub at {hub.endpoint} sent does not check out ({why}): nothing kept; "
            "rerun, and if it persists check HF_ENDPOINT and any proxy or mirror, or fetch with --all-weights"
        )
    for f in stage.iterdir():
        _fsync_file(f)
    (stage / REVISION).write_text(sha + "\n")
    _fsync_file(stage / REVISION)
    fsync_dir(stage)


def _wait_for(lock, what: str, final: Path) -> None:
    """Take the build lock; while another process holds it, say so once on stderr."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(
            f"wqk: waiting for another process fetching {what} into {final} (its lock: {lock.name})",
            file=sys.stderr,
            flush=True,
        )
        fcntl.flock(lock, fcntl.LOCK_EX)


def _replace(stage: Path, final: Path) -> None:
    """stage renamed to final; a finished or stale final renamed aside first, then removed (a
    folder cannot be renamed onto a full one), so final is never seen half-replaced."""
    old = None
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
        os.replace(final, old / "x")
    os.replace(stage, final)
    fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old)


def _fsync_file(path: Path) -> None:
    if path.is_symlink() or not path.is_file():
        return  # a link into the HF cache: huggingface_hub wrote the file
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _link(src: Path, dst: Path) -> None:
    src = src.resolve()
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)  # survives an HF cache cleanup
    except OSError:
        os.symlink(src, dst)
