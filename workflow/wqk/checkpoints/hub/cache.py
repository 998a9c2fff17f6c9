"""Our cache of fetched hub models: `<root>/<slug>/<sha>/` (q/k tensors) or `<sha>-all/` (whole
files), each with config.json, the weights, `.wqk-fetch.json` and `.revision`.

A folder is built under a lock (two jobs fetching one model: the second waits) in a staging
folder renamed when complete, so a folder with `.revision` is always whole. `refs/<branch>`
remembers which sha a branch or tag resolved to, for offline use. Only a 40-hex commit id ever
names a folder here (the client refuses any other from the hub). Whole files come through
huggingface_hub's own cache (never written into here) and are hard-linked, else symlinked; a
snapshot filled there by someone else serves offline too.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
from pathlib import Path

from ... import slug
from ...errors import SourceUnavailable
from .client import Hub
from .ranges import fetch_qk
from .select import weight_files

_SHA = re.compile(r"[0-9a-f]{40}")


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
    if revision is None or not _SHA.fullmatch(revision):
        if not use_refs:
            return None
        ref = _ref_path(base, revision or "main")
        if not ref.exists():
            return None
        revision = ref.read_text().strip()
        if not _SHA.fullmatch(revision):
            return None
    for name in (f"{revision}{suffix}", f"{revision}-all"):  # whole files serve q/k too
        if (base / name / ".revision").exists():
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
    if not _SHA.fullmatch(sha):  # the HF cache names snapshots by the commit the hub sent
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
) -> Path:
    """Our folder `<base>/<sha><suffix>` for a repo whose files at `sha` are `files`: q/k byte
    ranges of safetensors shards (qk_only) or whole files linked from the HF cache."""
    if not _SHA.fullmatch(sha):
        raise SourceUnavailable(f"{hub.repo_id}: {sha!r} is not a 40-hex commit id: refusing it")
    if "config.json" not in files:
        raise SourceUnavailable(
            f"{hub.repo_id}@{sha} has no config.json: give a local folder with config.json and weights"
        )
    final = base / f"{sha}{suffix}"
    stage = base / f".{sha}{suffix}.partial"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{sha}{suffix}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two jobs fetching one model: the second waits
        if (final / ".revision").exists():
            return final
        stage.mkdir(exist_ok=True)
        config = hub.download("config.json", sha, local_only)
        kind, weights, indexes = weight_files(hub, sha, files, qk_only, local_only)
        manifest = {
            "repo_id": hub.repo_id,
            "revision": revision,
            "sha": sha,
            "endpoint": hub.endpoint,
            "source_files": weights,
        }
        if qk_only and kind == "safetensors":
            manifest.update(fetch_qk(hub, sha, weights, stage, progress), mode="qk-ranges")
        else:
            for name in indexes + weights:
                _link(hub.download(name, sha, local_only), stage / name)
            manifest["mode"] = "whole-files"
        shutil.copyfile(config, stage / "config.json")
        (stage / ".wqk-fetch.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        (stage / ".revision").write_text(sha + "\n")
        if final.exists():  # a stale, incomplete folder (no .revision)
            shutil.rmtree(final)
        os.replace(stage, final)
    return final


def _link(src: Path, dst: Path) -> None:
    src = src.resolve()
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)  # survives an HF cache cleanup
    except OSError:
        os.symlink(src, dst)
