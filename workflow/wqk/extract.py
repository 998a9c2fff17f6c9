"""Checkpoint source -> (model info, stream of attention blocks)."""

from __future__ import annotations

from typing import Iterator

from . import adapters
from .blocks import AttentionBlock
from .matrices import ModelInfo
from .sources import open_checkpoint


def open_source(source: str, name: str | None = None, synthetic: bool = False) -> tuple[ModelInfo, Iterator[AttentionBlock]]:
    """Open a checkpoint lazily; blocks are read one layer at a time as the stream is consumed.

    A checkpoint whose config.json carries "wqk_synthetic": true (tiny random models built
    by `wqk tiny`) is marked synthetic whatever the caller says.
    """
    ckpt = open_checkpoint(source)
    info = ModelInfo(
        model=name or source,
        source=source,
        provenance=ckpt.provenance(),
        model_type=ckpt.model_type,
        synthetic=bool(synthetic or ckpt.config.get("wqk_synthetic", False)),
    )
    adapter = adapters.get_adapter(ckpt.model_type, ckpt.model_id)
    return info, adapter(ckpt)
