"""Checks of what a fetch keeps: config.json and *.index.json as the hub sent them (before a cache
folder is finalized), and a finished cache folder (before it is handed out again).

A JSON file fails when it does not parse (an HTML page a proxy served, JSON nested past Python's
recursion limit), is not an object, or (an index) has no `weight_map` of tensor -> file names.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ...errors import CorruptCheckpoint, WqkError
from ..formats.safetensors import read_safetensors_header
from ..provenance import MANIFEST
from .client import Hub, evict, offline

log = logging.getLogger(__name__)


def json_problem(path: Path, name: str) -> tuple[object, str | None]:
    """(the parsed JSON of file `path`, None) or (None, what is wrong with it); `name`, the
    file's name in its repo, decides whether it must be an index."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        return None, f"cannot be read ({e.strerror})"
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None, f"is not JSON (it starts {raw[:40]!r})"
    except RecursionError:
        return None, "is JSON nested too deeply to read"
    if not isinstance(data, dict):
        return None, f"is JSON but not an object (a {type(data).__name__})"
    if name.endswith(".index.json"):
        wmap = data.get("weight_map")
        if not isinstance(wmap, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in wmap.items()):
            return None, "has no weight_map (an object of tensor name -> file name)"
    return data, None


def hub_json(hub: Hub, name: str, sha: str, local_only: bool, force: bool = False) -> tuple[Path, dict]:
    """(path in the HF cache, parsed content) of config.json or an index of the repo at `sha`,
    downloaded whole and checked (json_problem). One that fails is downloaded once again (a
    proxy's page cached earlier?), then CorruptCheckpoint naming repo, file and the way out."""
    path = hub.download(name, sha, local_only, force)
    data, why = json_problem(path, name)
    can_fetch = not (local_only or offline())
    if why and can_fetch and not force:
        log.warning("%s/%s in the HF cache %s: downloading it again", hub.repo_id, name, why)
        evict(path)
        path = hub.download(name, sha, local_only)
        data, why = json_problem(path, name)
    if why is None:
        return path, data
    if can_fetch:
        evict(path)  # the next run asks the hub again
        raise CorruptCheckpoint(
            f"{hub.repo_id}@{sha}/{name} as the hub at {hub.endpoint} sends it {why}: refusing it; check "
            "HF_ENDPOINT and any proxy or mirror (a login or error page?), or report it to the repository's owner"
        )
    raise CorruptCheckpoint(
        f"{hub.repo_id}@{sha}/{name} in the HF cache ({path}) {why}: run `wqk fetch --force {hub.repo_id}@{sha}` "
        "where the hub is reachable"
    )


def folder_problem(folder: Path) -> str | None:
    """What is wrong with a finished cache folder (a damaged or truncated file), or None: its
    config.json and indexes (json_problem), its safetensors headers against their sizes, and
    every weight file its manifest names. Reads headers only, never the weights."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        mode, sources = manifest["mode"], list(manifest["source_files"])
    except (OSError, ValueError, RecursionError, KeyError, TypeError):
        return f"{folder / MANIFEST} is missing or damaged"
    if manifest.get("format") == "gguf":
        return (
            _gguf_problem(folder / str(sources[0]).rsplit("/", 1)[-1]) if sources else f"{folder / MANIFEST} is damaged"
        )
    weights = ["model.safetensors"] if mode == "qk-ranges" else sources
    for name in ["config.json", *sorted(p.name for p in folder.glob("*.index.json")), *weights]:
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if name.endswith(".json"):
            why = json_problem(path, name)[1]
            if why:
                return f"{path} {why}"
        elif name.endswith(".safetensors"):
            try:
                read_safetensors_header(path)
            except CorruptCheckpoint as e:
                return str(e).split("; ")[0]
        elif path.stat().st_size == 0:
            return f"{path} is empty"
    return None


def _gguf_problem(path: Path) -> str | None:
    """What is wrong with a fetched GGUF file (its header, its tensors against its size), or None."""
    from ..formats.gguf import GgufStore

    if not path.is_file():
        return f"{path} is missing"
    try:
        GgufStore(path)
    except WqkError as e:
        return str(e).split("; ")[0]
    return None


def folder_config(folder: Path) -> dict:
    """The config of a finished cache folder: its config.json, else (a GGUF) its metadata's."""
    path = Path(folder) / "config.json"
    if path.is_file():
        return json.loads(path.read_text())
    from ..formats.gguf import GgufStore

    return GgufStore(next(Path(folder).glob("*.gguf"))).config
