"""Adapters: one function per architecture family, keyed by config `model_type`.

An adapter takes a Checkpoint and yields AttentionBlocks (one per stack and layer) in
order, reading only the q/k tensors of one layer at a time. Register it with the objective
of each self-attention stack it can yield (cross-attention carries none):

    @register("bert", "roberta", encoder=BI, decoder=AR)
    def bert_blocks(ckpt): ...

so that the catalogue never has to guess from the word "decoder": several vision
"decoders" (DETR, Mask2Former, SAM) run bidirectional self-attention over object queries
or tokens. Every module of this package is imported on first lookup (one module per
architecture family; shared helpers in common.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint, Located, open_checkpoint
from ..contracts import OBJECTIVES, STACKS, ModelInfo
from ..errors import UnsupportedModelType

Adapter = Callable[[Checkpoint], Iterator[AttentionBlock]]
BI, AR = OBJECTIVES  # "bidirectional", "autoregressive"
_REGISTRY: dict[str, tuple[Adapter, dict[str, str]]] = {}
_loaded = False


def register(*model_types: str, **objectives: str):
    """Register an adapter for model_types; objectives: stack=objective for every
    self-attention stack (encoder, decoder) the adapter can yield."""
    bad = {s: o for s, o in objectives.items() if s not in STACKS or s == "cross" or o not in OBJECTIVES}
    if bad or not objectives:
        raise ValueError(
            f"{model_types}: objectives {bad or objectives} are not stack=objective, objective in {OBJECTIVES}"
        )

    def wrap(fn: Adapter) -> Adapter:
        for mt in model_types:
            if mt in _REGISTRY and _REGISTRY[mt] != (fn, objectives):
                raise RuntimeError(f"model_type {mt!r} registered twice")
            _REGISTRY[mt] = (fn, dict(objectives))
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


def _registered(model_type: str, model_id: str = "") -> tuple[Adapter, dict[str, str]]:
    _load_all()
    try:
        return _REGISTRY[model_type]
    except KeyError:
        of = f" of {model_id}" if model_id else ""
        if not model_type:
            raise UnsupportedModelType(
                f'config.json{of} has no model_type: add the model\'s "model_type" (as on its hub page or in '
                "transformers' config class for it) to config.json"
            ) from None
        raise UnsupportedModelType(
            f"model_type {model_type!r}{of} is not supported; supported: {', '.join(supported_model_types())}. "
            'Check the model_type in its config.json, or add an adapter for it (README.md, "Adding a model")'
        ) from None


def get_adapter(model_type: str, model_id: str = "") -> Adapter:
    return _registered(model_type, model_id)[0]


def stack_objectives(model_type: str) -> dict[str, str]:
    """stack -> objective of its self-attention ("bidirectional" or "autoregressive") for
    every stack but "cross" that the model_type's adapter can yield."""
    return dict(_registered(model_type)[1])


def open_source(
    source: str | Located, name: str | None = None, synthetic: bool = False
) -> tuple[ModelInfo, Iterator[AttentionBlock]]:
    """A checkpoint's identity and its attention blocks (`model_blocks` of the opened source)."""
    return model_blocks(open_checkpoint(source), name, synthetic)


def model_blocks(
    ckpt: Checkpoint, name: str | None = None, synthetic: bool = False, provenance: str | None = None
) -> tuple[ModelInfo, Iterator[AttentionBlock]]:
    """A checkpoint's identity and its attention blocks, read one layer at a time as the
    stream is consumed. A config with "wqk_synthetic": true (tiny random models built by
    `wqk tiny`) marks the model synthetic whatever the caller says. provenance: default the
    checkpoint's own (its revision, else the hash of its weights), taken after the adapter
    is found, so that an unsupported model fails before its weights are hashed. The blocks
    carry the q/k biases, pre-norm gains and rotary embedding where the model has them
    (extras.with_extras: a few small tensors per layer, rope computed once per model)."""
    from .extras import with_extras

    adapter = get_adapter(ckpt.model_type, ckpt.model_id)
    info = ModelInfo(
        model=name or ckpt.model_id,
        source=ckpt.model_id,
        provenance=provenance or ckpt.provenance(),
        model_type=ckpt.model_type,
        synthetic=bool(synthetic or ckpt.config.get("wqk_synthetic", False)),
    )
    return info, with_extras(ckpt, adapter(ckpt))
