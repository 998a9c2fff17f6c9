"""Adapters: one declarative `Record` per model_type (record.py), read by generic code.

Each family module (bert.py, llama.py, ...) registers the records of its model types:

    register(Record("llama", (Attention("decoder", "layers.{i}.self_attn.{p}.weight", ...),),
                    objectives=dict(decoder=AR), rope=Rotary(...), tiny=Tiny(...)))

Every module of this package but the generic ones (GENERIC) is imported on first lookup,
without torch: the catalogue loader reads the objectives at Snakemake parse time. The
tensors are read by reader.py (q/k, biases, gains) and rope.py (rotary frequencies).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..contracts import ModelInfo
from ..errors import UnsupportedModelType
from .record import AR, BI, Attention, Authors, Record, Rotary, Tiny

if TYPE_CHECKING:
    from ..blocks import AttentionBlock
    from ..checkpoints import Checkpoint, Located

__all__ = ["AR", "BI", "Attention", "Authors", "Record", "Rotary", "Tiny", "register", "refuse", "get_record"]

Adapter = Callable[["Checkpoint"], Iterator["AttentionBlock"]]
GENERIC = {"common", "record", "reader", "rope", "tensors"}  # modules of generic code, not of records
_RECORDS: dict[str, Record] = {}
_REFUSED: dict[str, str] = {}  # model_type -> why wqk does not score it
_loaded = False


def register(record: Record) -> Record:
    """Register a record under its model_type (once: a second, different record raises)."""
    old = _RECORDS.get(record.model_type)
    if old is not None and old is not record:
        raise RuntimeError(f"model_type {record.model_type!r} registered twice")
    _RECORDS[record.model_type] = record
    return record


def refuse(model_type: str, reason: str) -> None:
    """Register a model_type that wqk knows and does not score: looking it up raises
    UnsupportedModelType with the reason (a sentence saying why)."""
    _REFUSED[model_type] = reason


def unregister(model_type: str) -> None:
    """Remove a record (tests that register made-up model types)."""
    _RECORDS.pop(model_type, None)


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name not in GENERIC:
            importlib.import_module(f"{__name__}.{info.name}")
    _loaded = True


def supported_model_types() -> list[str]:
    _load_all()
    return sorted(_RECORDS)


def records() -> list[Record]:
    """Every registered record, by model_type."""
    _load_all()
    return [_RECORDS[mt] for mt in sorted(_RECORDS)]


def is_hand(model_type: str) -> bool:
    """Whether model_type has a hand-written record (or a hand-written refusal)."""
    _load_all()
    return model_type in _RECORDS or model_type in _REFUSED


def get_record(model_type: str, model_id: str = "", config: dict | None = None) -> Record:
    """The record of model_type: the hand-written one, else the one derived from the installed
    transformers' own forward on a tiny model of config's structure (config.json fields; None:
    the config class's defaults), verified and cached (wqk.derive)."""
    _load_all()
    if model_type in _RECORDS:
        return _RECORDS[model_type]
    of = f" of {model_id}" if model_id else ""
    if model_type in _REFUSED:
        raise UnsupportedModelType(f"model_type {model_type!r}{of} is not scored: {_REFUSED[model_type]}")
    if not model_type:
        raise UnsupportedModelType(
            f'config.json{of} has no model_type: add the model\'s "model_type" (as on its hub page or in '
            "transformers' config class for it) to config.json"
        )
    return derived_record(model_type, model_id, config)


def derived_record(model_type: str, model_id: str = "", config: dict | None = None) -> Record:
    """The verified derived record of model_type (see get_record); UnsupportedModelType with the
    category and reason where there is none."""
    of = f" of {model_id}" if model_id else ""
    try:
        from ..derive.store import cached
    except ImportError as e:  # the light env: no torch, no transformers
        raise UnsupportedModelType(
            f"model_type {model_type!r}{of} has no hand-written record, and deriving one needs the models extra "
            f"({e.name} is not installed): pip install 'wqk[models]'"
        ) from None
    try:
        derivation = cached(model_type, config)
    except UnsupportedModelType as e:  # a library the derivation needs does not import (timm)
        raise UnsupportedModelType(f"model_type {model_type!r}{of}: {e}") from None
    if derivation.ok:
        return derivation.record
    unknown = derivation.category == "unknown type"
    raise UnsupportedModelType(
        f"model_type {model_type!r}{of} is not scored: {derivation.category}: {derivation.reason}"
        + (
            f"; hand-written records: {', '.join(supported_model_types())}. Check the model_type in its config.json, "
            'or add a record for it (README.md, "Adding a model")'
            if unknown
            else ""
        )
    )


def get_adapter(model_type: str, model_id: str = "", config: dict | None = None) -> Adapter:
    """ckpt -> its AttentionBlocks (q and k only), read from the model_type's record."""
    from .reader import read_blocks

    return functools.partial(read_blocks, record=get_record(model_type, model_id, config))


def stack_objectives(model_type: str) -> dict[str, str]:
    """stack -> objective of its self-attention ("bidirectional" or "autoregressive") for
    every stack but "cross" that the model_type's record can yield."""
    return dict(get_record(model_type).objectives)


def open_source(
    source: str | Located, name: str | None = None, synthetic: bool = False
) -> tuple[ModelInfo, Iterator[AttentionBlock]]:
    """A checkpoint's identity and its attention blocks (`model_blocks` of the opened source)."""
    from ..checkpoints import open_checkpoint

    return model_blocks(open_checkpoint(source), name, synthetic)


def model_blocks(
    ckpt: Checkpoint, name: str | None = None, synthetic: bool = False, provenance: str | None = None
) -> tuple[ModelInfo, Iterator[AttentionBlock]]:
    """A checkpoint's identity and its attention blocks, read one layer at a time as the
    stream is consumed. A config with "wqk_synthetic": true (tiny random models built by
    `wqk tiny`) marks the model synthetic whatever the caller says. provenance: default the
    checkpoint's own (its revision, else the hash of its weights), taken after the record
    is found, so that an unsupported model fails before its weights are hashed. The blocks
    carry the q/k biases, pre-norm gains and rotary embedding where the model has them
    (reader.with_extras: a few small tensors per layer, rope computed once per model)."""
    from ..config_errors import explain_bad_config
    from .reader import read_blocks, with_extras

    record = get_record(ckpt.model_type, ckpt.model_id, ckpt.config)
    info = ModelInfo(
        model=name or ckpt.model_id,
        source=ckpt.model_id,
        provenance=provenance or ckpt.provenance(),
        model_type=ckpt.model_type,
        synthetic=bool(synthetic or ckpt.config.get("wqk_synthetic", False)),
    )
    return info, explain_bad_config(ckpt, with_extras(ckpt, read_blocks(ckpt, record), record))
