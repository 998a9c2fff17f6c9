"""Swin and Swin v2: hierarchical windowed attention. Each block's q/k projections are
scored per head all the same (window masks and relative position biases act on the
logits, not on the form). Swin v2's attention is cosine (q and k normalised per head, then
scaled): the form Q_h K_h^T is still the one between the normalised directions.

Names: [swin.|swinv2.]encoder.layers.{stage}.blocks.{block}.attention.self.{query,key}.weight.
Layers are numbered in depth order across stages; d and the head count change per stage.
"""

from __future__ import annotations

import re

from ..blocks import AttentionBlock
from . import BI, register
from .common import config_get, find_prefix, layer_indices, linear_heads

BLOCK_Q = r"encoder\.layers\.(\d+)\.blocks\.(\d+)\.attention\.self\.query\.weight"


def swin_stack(ckpt, heads_per_stage: list[int], prefixes: list[str], stack: str = "encoder"):
    """One block per (stage, block) found under the first of prefixes, numbered in depth order."""
    prefix = find_prefix(ckpt, prefixes, BLOCK_Q)
    for layer, (stage, block) in enumerate(layer_indices(ckpt, re.escape(prefix) + BLOCK_Q)):
        base = f"{prefix}encoder.layers.{stage}.blocks.{block}.attention.self."
        h = int(heads_per_stage[stage])
        yield AttentionBlock(
            stack,
            layer,
            linear_heads(ckpt.store.get(base + "query.weight"), h),
            linear_heads(ckpt.store.get(base + "key.weight"), h),
        )


@register("swin", "swinv2", encoder=BI)
def swin_blocks(ckpt):
    prefixes = [ckpt.model_type.replace("-", "_") + ".", "swin.", ""]
    yield from swin_stack(ckpt, list(config_get(ckpt, "num_heads")), prefixes)
