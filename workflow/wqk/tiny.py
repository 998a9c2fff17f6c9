"""Tiny RANDOM models of a model_type, for tests and for null references.

build_tiny() instantiates the transformers class of the small config that the model_type's
record declares (adapters, `Tiny`) with a fixed seed and saves config.json +
model.safetensors with save_pretrained. The weights are random: the
config carries wqk_synthetic=True so that nothing downstream mistakes them for data.
Same model_type, seed and overrides -> byte-identical model.safetensors.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from .progress import hub_bars


def tiny_types() -> list[str]:
    """The model types whose record has a tiny config."""
    from .adapters import records

    return [r.model_type for r in records() if r.tiny is not None]


def tiny_spec(model_type: str):
    """The record's Tiny (transformers class and config kwargs) of model_type."""
    from .adapters import _load_all, get_record
    from .errors import UnsupportedModelType

    _load_all()
    try:
        tiny = get_record(model_type).tiny  # a derived record has the tiny model it was derived on
    except UnsupportedModelType:
        tiny = None
    if tiny is None:
        raise UnsupportedModelType(
            f"no tiny config for model_type {model_type!r}; known: {', '.join(sorted(tiny_types()))}. "
            'Add Tiny(...) to its record (README.md, "Adding a model")'
        )
    return tiny


def tiny_class(model_type: str, architecture: str | None = None, tiny=None) -> type:
    """The model class of the type's tiny model (tiny: its Tiny, where the caller holds it; or of
    another architecture): transformers' own, or its modeling module's where transformers does not
    export it (BridgeTowerVisionModel, the towers of composites that derived records name)."""
    import transformers

    tiny = tiny or tiny_spec(model_type)
    name = architecture or tiny.architecture
    cls = getattr(transformers, name, None)
    if cls is None:
        from .derive.build import modeling_module

        cls = getattr(modeling_module(tiny.family or model_type), name)
    return cls


def tiny_model(model_type: str, seed: int = 0, architecture: str | None = None, **overrides):
    """The tiny model instance (random weights, eval mode), not saved."""
    import transformers

    tiny = tiny_spec(model_type)
    config = transformers.AutoConfig.for_model(tiny.family or model_type, **{**tiny.config, **overrides})
    config.wqk_synthetic = True
    cls = tiny_class(model_type, architecture, tiny)
    torch.manual_seed(seed)
    return cls(config).eval()


def build_tiny(model_type: str, out_dir: Path, seed: int = 0, architecture: str | None = None, **overrides) -> Path:
    """Build and save a tiny random model of model_type into out_dir (created); returns out_dir.

    overrides are config kwargs (e.g. is_decoder=True); architecture names another
    transformers class (e.g. "BertModel" for a checkpoint without prefix).
    """
    out_dir = Path(out_dir)
    if tiny_spec(model_type).family == "timm":  # a timm architecture: timm builds and lays it out
        from .derive.timm import save_tiny

        return save_tiny(tiny_spec(model_type), out_dir, seed)
    model = tiny_model(model_type, seed, architecture, **overrides)
    with hub_bars():  # no "Writing model shards" frames in the tiny rule's log
        model.save_pretrained(out_dir, safe_serialization=True)
    if tiny_spec(model_type).family:  # remote-code types: the family's class, the record's model_type
        path = out_dir / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**config, "model_type": model_type}, indent=2, sort_keys=True) + "\n")
    # transformers 5 writes model.safetensors through a private temp file (mode 0600):
    # give the files the permissions any other file written here would get.
    mask = os.umask(0)
    os.umask(mask)
    for f in out_dir.iterdir():
        f.chmod(0o666 & ~mask)
    return out_dir
