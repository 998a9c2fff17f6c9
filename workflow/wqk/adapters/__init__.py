"""Adapters: one function per architecture family, keyed by config `model_type`.

An adapter takes a Checkpoint and yields AttentionBlocks (one per stack and layer) in
order, reading only the q/k tensors of one layer at a time. Register with

    @register("bert", "roberta")
    def bert_blocks(ckpt): ...

Every module of this package is imported on first lookup (one module per family).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Callable, Iterator

import torch

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint, Located, open_checkpoint
from ..contracts import ModelInfo
from ..errors import MissingTensor, UnsupportedModelType

Adapter = Callable[[Checkpoint], Iterator[AttentionBlock]]
_REGISTRY: dict[str, Adapter] = {}
_loaded = False


def register(*model_types: str):
    def wrap(fn: Adapter) -> Adapter:
        for mt in model_types:
            if mt in _REGISTRY and _REGISTRY[mt] is not fn:
                raise RuntimeError(f"model_type {mt!r} registered twice")
            _REGISTRY[mt] = fn
        return fn

    return wrap


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True


def supported_model_types() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get_adapter(model_type: str, model_id: str = "") -> Adapter:
    _load_all()
    try:
        return _REGISTRY[model_type]
    except KeyError:
        where = f" of {model_id}" if model_id else ""
        raise UnsupportedModelType(
            f"model_type {model_type!r}{where} is not supported; supported: {', '.join(supported_model_types())}"
        ) from None


def open_source(
    source: str | Located, name: str | None = None, synthetic: bool = False
) -> tuple[ModelInfo, Iterator[AttentionBlock]]:
    """A checkpoint's identity and its attention blocks, read one layer at a time as the
    stream is consumed. A config.json with "wqk_synthetic": true (tiny random models built
    by `wqk tiny`) marks the model synthetic whatever the caller says."""
    ckpt = open_checkpoint(source)
    info = ModelInfo(
        model=name or ckpt.model_id,
        source=ckpt.model_id,
        provenance=ckpt.provenance(),
        model_type=ckpt.model_type,
        synthetic=bool(synthetic or ckpt.config.get("wqk_synthetic", False)),
    )
    return info, get_adapter(ckpt.model_type, ckpt.model_id)(ckpt)


# --- helpers shared by adapters -------------------------------------------------------


def linear_heads(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """nn.Linear weight [n_heads*k, d] (out, in) -> per-head factors [n_heads, d, k].

    A view, not a copy: scoring works on the transposes [n_heads, k, d], which are then
    the weight's own contiguous rows."""
    out, d = weight.shape
    if out % n_heads:
        raise ValueError(f"projection with {out} outputs cannot be split into {n_heads} heads")
    return weight.reshape(n_heads, out // n_heads, d).transpose(1, 2)


def conv1d_heads(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """GPT-2 style Conv1D weight [d, n_heads*k] (in, out) -> [n_heads, d, k]."""
    return linear_heads(weight.T, n_heads)


def layer_indices(ckpt: Checkpoint, pattern: str) -> list[int]:
    """Layer numbers present in the weights for a regex with one group, e.g.
    r"encoder\\.layer\\.(\\d+)\\.attention\\.self\\.query\\.weight". Counting from the
    weights, never from config fields that may alias or miss layers."""
    rx = re.compile(pattern)
    found = sorted({int(m.group(1)) for n in ckpt.store.names() if (m := rx.fullmatch(n))})
    if not found:
        raise MissingTensor(
            f"{ckpt.model_id}: no tensor matches {pattern!r} (model_type {ckpt.model_type!r}); "
            "is this the right architecture, or a checkpoint with renamed weights?"
        )
    return found


def find_prefix(ckpt: Checkpoint, candidates: list[str], probe: str) -> str:
    """The first prefix p in candidates such that p + probe names a tensor (checkpoints
    saved from a task head carry e.g. 'bert.' before the base model's names)."""
    names = ckpt.store.names()
    for p in candidates:
        full = p + probe
        if any(n == full or re.fullmatch(full, n) for n in names):
            return p
    raise MissingTensor(
        f"{ckpt.model_id}: none of {[p + probe for p in candidates]} found among {len(names)} tensors"
    )


_NO_DEFAULT = object()


def config_get(ckpt: Checkpoint, *keys: str, default=_NO_DEFAULT):
    """The first non-null config field among keys. Families spell the same thing differently
    (num_attention_heads, n_head, n_heads, num_heads, encoder_attention_heads): config.json
    holds the family's own spelling, not transformers' attribute aliases."""
    for key in keys:
        if ckpt.config.get(key) is not None:
            return ckpt.config[key]
    if default is not _NO_DEFAULT:
        return default
    from ..errors import CorruptCheckpoint

    raise CorruptCheckpoint(
        f"{ckpt.model_id}: config.json (model_type {ckpt.model_type!r}) has none of {list(keys)}; "
        "add the field to config.json or check that the model_type is right"
    )


def _template_regex(template: str, proj: str) -> str:
    """'x.{l}.{p}.weight' -> regex with the layer as group 1 and {p} matching proj."""
    head, tail = template.split("{l}")
    return re.escape(head) + r"(\d+)" + re.escape(tail).replace(re.escape("{p}"), proj)


def linear_qk_blocks(
    ckpt: Checkpoint,
    stack: str,
    template: str,
    q: str,
    k: str,
    n_heads: int,
    n_kv_heads: int | None = None,
    required: bool = True,
) -> Iterator[AttentionBlock]:
    """Blocks of one stack whose q and k projections are separate nn.Linear weights.

    template names a weight with {l} for the layer and {p} for the projection, e.g.
    "bert.encoder.layer.{l}.attention.self.{p}.weight" with q="query", k="key". Layers are
    those where q or k is found, so a layer missing one of them raises MissingTensor naming
    it. required=False: a stack absent from the weights (e.g. the decoder of an
    encoder-only export) yields nothing instead of raising.
    """
    pattern = _template_regex(template, f"(?:{re.escape(q)}|{re.escape(k)})")
    if not required and not any(re.fullmatch(pattern, n) for n in ckpt.store.names()):
        return
    for layer in layer_indices(ckpt, pattern):
        wq = ckpt.store.get(template.format(l=layer, p=q))
        wk = ckpt.store.get(template.format(l=layer, p=k))
        yield AttentionBlock(stack, layer, linear_heads(wq, n_heads), linear_heads(wk, n_kv_heads or n_heads))
