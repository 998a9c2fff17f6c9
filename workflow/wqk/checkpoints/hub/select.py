"""What a hub fetch takes: `tensor_picker` the tensors (those the model_type's record names, via
the callers' factory, else `is_qk_tensor`'s name heuristic), `weight_files` the weight files of a
repo (all of them, or only the shards that hold picked tensors), `gguf_file` the GGUF file of a
repo that is read as one."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import SourceUnavailable
from .checks import hub_json

if TYPE_CHECKING:
    from .client import Hub

_QK_TOKENS = {"q", "k", "qk", "qkv", "kv", "query", "key", "wq", "wk", "wqkv", "querykey"}
_QK_COMPONENTS = {"c_attn", "in_proj", "in_proj_weight", "in_proj_bias"}
HEURISTIC = "heuristic"  # the selection key of is_qk_tensor
Pick = Callable[[str], bool]  # tensor name -> fetched; a `key` attribute (str) names the selection
Factory = Callable[[dict], Pick | None]  # config.json -> the picker of its model_type (None: unknown)

_LAYOUTS = (
    ("safetensors", "model.safetensors", "model.safetensors.index.json"),
    ("bin", "pytorch_model.bin", "pytorch_model.bin.index.json"),
)  # kind, single file, index


def is_qk_tensor(name: str) -> bool:
    """Whether tensor `name` holds (part of) a query or key projection.

    Errs on the side of too much: fused qkv tensors are taken whole, as are q/k biases and
    q/k norms. A dotted component matches when one of its "_"-separated words is q, k, qk,
    qkv, kv, query, key, wq, wk or wqkv (q_proj, k_lin, query_key_value, to_q, attn_qkv,
    SelfAttention.q, Wqkv, kv_b_proj ...), or it is c_attn / in_proj* (GPT-2,
    nn.MultiheadAttention), or it is `linears.0`/`linears.1` (q, k of the annotated
    transformer's 4-linear attention).
    """
    parts = name.lower().split(".")
    for i, part in enumerate(parts):
        if part in _QK_COMPONENTS or _QK_TOKENS.intersection(part.split("_")):
            return True
        if part in ("linears", "linear") and i + 1 < len(parts) and parts[i + 1] in ("0", "1"):
            return True
        if part in ("linear_0", "linear_1"):
            return True
    return False


def tensor_picker(config: dict, tensors: Factory | None) -> Pick:
    """The picker of a repo's tensors: tensors(config) (the names the model_type's record reads),
    else (no factory, or no record for the model_type) is_qk_tensor."""
    return (tensors(config) if tensors is not None else None) or is_qk_tensor


def selection_key(pick: Pick) -> str:
    """The name of a selection, recorded in a cache folder's manifest (`selection`)."""
    key = getattr(pick, "key", None)
    return key if isinstance(key, str) and key else HEURISTIC


def weight_files(
    hub: Hub,
    sha: str,
    files: list[str],
    qk_only: bool,
    local_only: bool,
    force: bool = False,
    pick: Pick = is_qk_tensor,
) -> tuple[str, list[str], list[str]]:
    """(kind "safetensors"|"bin", weight files to fetch, index files to keep) of a repo whose
    files at commit `sha` are `files`; safetensors win. qk_only: only the shards an index
    places picked tensors in (the index checked: hub_json). force: the index downloaded again."""
    for kind, single, index in _LAYOUTS:
        if index in files:
            wmap = hub_json(hub, index, sha, local_only, force)[1]["weight_map"]
            names = [n for n in wmap if pick(n)] if qk_only else list(wmap)
            return kind, sorted({_plain_file(hub, sha, wmap[n], files) for n in names}), [index]
        if single in files:
            return kind, [single], []
        roots = sorted(f for f in files if "/" not in f and f.endswith("." + kind))
        if kind == "safetensors" and roots:
            return kind, [_plain_file(hub, sha, f, files) for f in roots], []
    raise SourceUnavailable(
        f"{hub.repo_id}@{sha} has no safetensors or pytorch_model.bin weights "
        "at its root: give a local folder with converted weights"
    )


def _plain_file(hub: Hub, sha: str, name, files: list[str]) -> str:
    """`name` (a shard an index names, from the hub: untrusted) if it is a plain file name in the
    repo's file list; it becomes a local path and part of a URL."""
    if isinstance(name, str) and name in files and name not in ("", ".", "..") and not any(c in name for c in "/\\\0"):
        return name
    raise SourceUnavailable(
        f"{hub.repo_id}@{sha}: the weight file {name!r} (from its index) is not a plain "
        "file name of the repository: refusing it; report it to the repository's owner"
    )


_SPLIT_GGUF = re.compile(r"-\d{5}-of-\d{5}\.gguf$")


def gguf_file(hub: Hub, sha: str, files: list[str], chosen: str | None) -> str | None:
    """The GGUF file of the repo (files at commit `sha`) to fetch: `chosen` (org/name:FILE.gguf),
    which must be one of its files; else its only .gguf file, when it has no safetensors or
    pytorch_model.bin weights; None: read its safetensors/bin weights. Several GGUF files and no
    choice is an error that lists them."""
    ggufs = sorted(f for f in files if f.endswith(".gguf"))
    listed = ", ".join(ggufs) if ggufs else "none"
    if chosen is not None:
        if chosen not in files:
            raise SourceUnavailable(f"{hub.repo_id}@{sha} has no file {chosen!r}; its GGUF files: {listed}")
        picked = chosen
    else:
        weights = any(f in files for _, single, index in _LAYOUTS for f in (single, index))
        if weights or any("/" not in f and f.endswith(".safetensors") for f in files) or not ggufs:
            return None
        if len(ggufs) > 1:
            raise SourceUnavailable(
                f"{hub.repo_id}@{sha} holds {len(ggufs)} GGUF files ({listed}): choose one, as "
                f"{hub.repo_id}:{ggufs[0]} (in a catalogue: its `file` column)"
            )
        picked = ggufs[0]
    if _SPLIT_GGUF.search(picked):
        raise SourceUnavailable(
            f"{hub.repo_id}@{sha}/{picked} is one part of a split GGUF (llama.cpp's gguf-split), which wqk does not "
            "read: merge the parts with `llama-gguf-split --merge` and score the merged file"
        )
    return picked
