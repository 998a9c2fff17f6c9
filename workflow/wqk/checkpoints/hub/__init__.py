"""Fetch from the Hugging Face hub only what extraction needs.

`fetch_hub(repo_id)` returns a folder of our own, `<cache>/<slug>/<commit sha>/`, holding
config.json, the weights and a `.revision` file with the commit sha. For safetensors repos
(the default, qk_only=True) it reads each shard's header with HTTP range requests and then
only the byte ranges of the query/key tensors, written into one local model.safetensors:
a 7B model moves ~1/8 of its weights (fused qkv tensors whole), not all of it.
Whole files (pytorch_model.bin repos, qk_only=False) go through huggingface_hub into the
standard HF cache and are hard-linked (else symlinked) into our folder.

Modules, each calling only those below it:
    cache    our cache folders, refs, locks, atomic builds, HF-cache reuse
    ranges   q/k byte ranges of remote safetensors shards, a few at once, resumable per range
    select   which tensors (`is_qk_tensor`) and weight files a fetch takes
    client   `Hub`: the HTTP client, hub errors as one-line SourceUnavailable, offline, retries
Hub ids are parsed by `wqk.checkpoints.source.parse_source`, not here.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ... import slug
from ...errors import SourceUnavailable
from .cache import build, cache_root, finished, from_hf_cache, write_ref
from .client import Hub, Unreachable, offline
from .select import is_qk_tensor

__all__ = ["cache_root", "fetch_hub", "is_qk_tensor", "resolve_revision"]

log = logging.getLogger(__name__)


def fetch_hub(
    repo_id: str,
    revision: str | None = None,
    cache_dir=None,
    *,
    qk_only: bool = True,
    progress: bool = True,
    endpoint: str | None = None,
    token: str | None = None,
    hf_cache_dir=None,
    timeout: float | None = None,
) -> Path:
    """A local folder with config.json, weights and `.revision` (the commit sha) for one hub
    model: `<cache_dir>/<slug>/<sha>/` (q/k tensors only) or `<sha>-all/` (whole files).

    cache_dir: our cache root ($WQK_CACHE, else ~/.cache/wqk). endpoint: $HF_ENDPOINT, else
    huggingface.co. token: None reads HF_TOKEN (or the stored login) via huggingface_hub.
    hf_cache_dir: the HF cache for whole files (default: huggingface_hub's).
    With HF_HUB_OFFLINE=1 only the caches are used. Raises SourceUnavailable.
    """
    hub = Hub.connect(repo_id, endpoint, token, hf_cache_dir, timeout)
    base = cache_root(cache_dir) / slug(repo_id)
    suffix = "" if qk_only else "-all"
    done = finished(base, revision, suffix, use_refs=offline())
    if done is not None:
        return done
    if offline():
        return from_hf_cache(hub, base, revision, suffix) or _raise_offline(repo_id, revision)
    try:
        info = hub.info(revision)
    except Unreachable:
        got = finished(base, revision, suffix, use_refs=True) or from_hf_cache(hub, base, revision, suffix)
        if got is None:
            raise
        log.warning("hub unreachable: using the cached copy of %s", repo_id)
        return got
    sha = info.sha
    if revision != sha:
        write_ref(base, revision or "main", sha)  # lets HF_HUB_OFFLINE=1 resolve it later
    done = finished(base, sha, suffix)
    if done is not None:
        return done
    hub.check_access(info)
    files = [s.rfilename for s in (info.siblings or [])]
    return build(hub, base, sha, revision, suffix, files, qk_only=qk_only, progress=progress)


def resolve_revision(
    repo_id: str,
    revision: str | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
) -> str:
    """The 40-hex commit sha that `revision` (branch, tag or sha; None: main) of a hub model names
    now, asked of the hub (endpoint/token as in fetch_hub). Raises SourceUnavailable."""
    if offline():
        raise SourceUnavailable(
            f"{repo_id}@{revision or 'main'}: resolving a revision needs the hub and "
            "HF_HUB_OFFLINE=1 is set: unset it where the hub is reachable"
        )
    hub = Hub.connect(repo_id, endpoint, token, timeout=timeout)
    try:
        return hub.info(revision).sha
    except Unreachable as e:
        if e.status is not None:  # 429/5xx, retried: its message says so
            raise
        raise SourceUnavailable(
            f"cannot reach the Hugging Face hub at {hub.endpoint} to resolve {repo_id}@{revision or 'main'} "
            f"({type(e.__cause__ or e).__name__}): check the network and HF_ENDPOINT, then rerun"
        ) from e


def _raise_offline(repo_id: str, revision: str | None):
    at = f"@{revision}" if revision else ""
    raise SourceUnavailable(
        f"{repo_id}{at} is not in the cache and HF_HUB_OFFLINE=1: run `wqk fetch {repo_id}{at}` "
        "where the hub is reachable (or fill the HF cache), or give a local folder"
    )
