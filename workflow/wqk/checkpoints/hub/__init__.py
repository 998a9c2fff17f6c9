"""Fetch from the Hugging Face hub only what extraction needs.

`fetch_hub(repo_id)` returns a folder of our own, `<cache>/<slug>/<commit sha>/`, holding
config.json, the weights and a `.revision` file with the commit sha. For safetensors repos
(the default, qk_only=True) it reads each shard's header with HTTP range requests and then
only the byte ranges of the tensors extraction reads, written into one local model.safetensors:
a 7B model moves ~1/8 of its weights (fused qkv tensors whole), not all of it. Which tensors:
those the record of the config's model_type names (q/k or fused weights, biases, the norm
gains feeding the attention, QK-norm gains), as `tensors(config)` says: a factory the callers
above pass in (wqk.adapters.tensors.tensor_filter; this package does not import the adapters);
none, or no record for the model_type: the name heuristic `is_qk_tensor`. A cache folder records
its selection (manifest `selection`); one fetched with another selection than the record's
now (the heuristic, an older record) is fetched again, or used with a warning when offline.
A GGUF repo (org/name:FILE.gguf, or a repo whose only weights are one .gguf file) is fetched the
same way: the file's header by ranges, then the tensors the record reads, into a GGUF file of
its own (ranges.fetch_gguf). Whole files (pytorch_model.bin repos, qk_only=False) go through huggingface_hub into the
standard HF cache and are hard-linked (else symlinked) into our folder.

A cached folder that fails its checks (a truncated shard, an HTML page as config.json) is
fetched again when the hub is reachable; force=True (`wqk fetch --force`) always does.

Modules, each calling only those below it:
    cache    our cache folders, refs, locks, atomic builds, HF-cache reuse
    ranges   q/k byte ranges of remote safetensors shards or a GGUF file, a few at once, resumable per range
    select   which tensors (the record's, else `is_qk_tensor`), weight files or GGUF file a fetch takes
    checks   config.json and indexes as the hub sent them; finished cache folders
    client   `Hub`: the HTTP client, hub errors as one-line SourceUnavailable, offline, retries,
             every answer checked against its request, progress deadlines; a repo's refs
    listing  `GET /api/models`: the models a query matches, for `wqk catalogue` (uses client)
Hub ids are parsed by `wqk.checkpoints.source.parse_source`, not here.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ...errors import CorruptCheckpoint, SourceUnavailable
from ...ids import slug
from ..provenance import MANIFEST
from .cache import build, cache_root, finished, from_hf_cache, write_ref
from .checks import folder_config, folder_problem
from .client import Hub, Stalled, Unreachable, offline
from .select import HEURISTIC, Factory, is_qk_tensor, selection_key

__all__ = ["cache_root", "fetch_hub", "is_qk_tensor", "repo_refs", "resolve_revision"]

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
    force: bool = False,
    tensors: Factory | None = None,
    file: str | None = None,
) -> Path:
    """A local folder with config.json, weights and `.revision` (the commit sha) for one hub
    model: `<cache_dir>/<slug>/<sha>/` (q/k tensors only) or `<sha>-all/` (whole files).
    file: the GGUF file of the repo to read (org/name:FILE.gguf): `<sha>-<file slug>[-all]/`,
    holding it (only the tensors the record reads, unless qk_only=False) and no config.json.

    cache_dir: our cache root ($WQK_CACHE, else ~/.cache/wqk). endpoint: $HF_ENDPOINT, else
    huggingface.co. token: None reads HF_TOKEN (or the stored login) via huggingface_hub.
    hf_cache_dir: the HF cache for whole files (default: huggingface_hub's). force: fetched again
    from the hub, replacing the cached folder. tensors: config.json -> the predicate on tensor names
    to fetch (None, or None returned: is_qk_tensor). With HF_HUB_OFFLINE=1 only the caches are used.
    Raises SourceUnavailable, or CorruptCheckpoint for a damaged cache that cannot be fetched again.
    """
    hub = Hub.connect(repo_id, endpoint, token, hf_cache_dir, timeout)
    base = cache_root(cache_dir) / slug(repo_id)
    suffix = ("" if file is None else f"-{slug(file)}") + ("" if qk_only else "-all")
    at = (f"@{revision}" if revision else "") + (f":{file}" if file else "")
    if force and offline():
        raise SourceUnavailable(
            f"{repo_id}{at}: --force fetches from the hub again and HF_HUB_OFFLINE=1 is set: unset it where the "
            "hub is reachable"
        )
    repair = force
    if not force:
        done = finished(base, revision, suffix, use_refs=offline())
        if done is not None and _sound(done, repo_id, at, tensors):
            return done
        repair = done is not None
    if offline():
        return (file is None and from_hf_cache(hub, base, revision, suffix)) or _raise_offline(repo_id, at)
    try:
        info = hub.info(revision)
    except Unreachable:
        got = None if repair else finished(base, revision, suffix, use_refs=True)
        got = got or (file is None and from_hf_cache(hub, base, revision, suffix)) or None
        if got is None or folder_problem(got) is not None:
            raise
        log.warning("hub unreachable: using the cached copy of %s", repo_id)
        _sound(got, repo_id, at, tensors, usable=True)  # warns if it lacks tensors of the record
        return got
    sha = info.sha
    if revision != sha:
        write_ref(base, revision or "main", sha)  # lets HF_HUB_OFFLINE=1 resolve it later
    if not repair:
        done = finished(base, sha, suffix)
        if done is not None and _sound(done, repo_id, at, tensors):
            return done
        repair = done is not None
    hub.check_access(info)
    files = [s.rfilename for s in (info.siblings or [])]
    return build(
        hub, base, sha, revision, suffix, files, qk_only=qk_only, progress=progress, force=repair, tensors=tensors,
        file=file,
    )  # fmt: skip


def _sound(folder: Path, repo_id: str, at: str, tensors: Factory | None, usable: bool = False) -> bool:
    """Whether a finished cache folder passes its checks and holds the selection `tensors` asks
    for; False (logged) when it is to be fetched again, CorruptCheckpoint naming it when it cannot
    be (offline). A folder of another selection is used, with a warning, offline (or `usable`)."""
    why = folder_problem(folder)
    if why is None:
        other = _other_selection(folder, tensors)
        if other is None:
            return True
        if offline() or usable:
            log.warning(
                "%s%s: the cached copy in %s %s; using it: run `wqk fetch --force %s%s` where the hub is reachable",
                repo_id,
                at,
                folder,
                other,
                repo_id,
                at,
            )
            return True
        log.warning("%s%s: the cached copy in %s %s: fetching it again", repo_id, at, folder, other)
        return False
    if offline():
        raise CorruptCheckpoint(
            f"{repo_id}{at}: the cached copy in {folder} is damaged ({why}) and HF_HUB_OFFLINE=1: run "
            f"`wqk fetch --force {repo_id}{at}` where the hub is reachable"
        )
    log.warning("%s%s: the cached copy in %s is damaged (%s): fetching it again", repo_id, at, folder, why)
    return False


def _other_selection(folder: Path, tensors: Factory | None) -> str | None:
    """How a q/k cache folder's selection differs from the one tensors(its config) asks for, or
    None: it is that one, holds whole files, or the caller takes any (no factory, or no record)."""
    if tensors is None:
        return None
    manifest = json.loads((folder / MANIFEST).read_text())  # folder_problem parsed it
    if manifest.get("mode") != "qk-ranges":
        return None
    pick = tensors(folder_config(folder))
    if pick is None:
        return None
    want, got = selection_key(pick), manifest.get("selection", HEURISTIC)
    return None if want == got else f"holds the tensors of selection {got!r}, not of {want!r} (the record's now)"


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
    at = f"{repo_id}@{revision or 'main'}"
    return _asked(
        repo_id, f"{at}: resolving a revision", f"resolve {at}", lambda hub: hub.info(revision).sha,
        endpoint, token, timeout,
    )  # fmt: skip


def repo_refs(
    repo_id: str, *, endpoint: str | None = None, token: str | None = None, timeout: float | None = None
) -> dict[str, str]:
    """The branches and tags of a hub model, name -> commit sha, asked of the hub now (what a
    revision sweep's pattern is sampled from, wqk.sweeps). Raises SourceUnavailable."""
    return _asked(
        repo_id, f"{repo_id}: listing its branches", f"list the branches of {repo_id}", lambda hub: hub.refs(),
        endpoint, token, timeout,
    )  # fmt: skip


def _asked(repo_id: str, doing: str, to: str, ask, endpoint, token, timeout):
    """ask(hub) for one API answer: refused offline, an unreachable hub one line naming `to`."""
    if offline():
        raise SourceUnavailable(
            f"{doing} needs the hub and HF_HUB_OFFLINE=1 is set: unset it where the hub is reachable"
        )
    hub = Hub.connect(repo_id, endpoint, token, timeout=timeout)
    try:
        return ask(hub)
    except Unreachable as e:
        if e.status is not None or isinstance(e, Stalled):  # 429/5xx retried, or it answered: the message says so
            raise
        raise SourceUnavailable(
            f"cannot reach the Hugging Face hub at {hub.endpoint} to {to} "
            f"({type(e.__cause__ or e).__name__}): check the network and HF_ENDPOINT, then rerun"
        ) from e


def _raise_offline(repo_id: str, at: str):
    raise SourceUnavailable(
        f"{repo_id}{at} is not in the cache and HF_HUB_OFFLINE=1: run `wqk fetch {repo_id}{at}` "
        "where the hub is reachable (or fill the HF cache), or give a local folder"
    )
