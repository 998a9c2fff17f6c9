"""Swin and Swin v2: hierarchical windowed attention. Each block's q/k projections are
scored per head all the same (window masks and relative position biases act on the
logits, not on the form). Swin v2's attention is cosine (q and k normalised per head, then
scaled): the form Q_h K_h^T is still the one between the normalised directions.

Layers are numbered in depth order across stages; d and the head count change per stage.
"""

from __future__ import annotations

import re

from . import find_prefix, linear_heads, register
from ..blocks import AttentionBlock
from ..errors import MissingTensor
from .qk_templates import BI, cfg, objectives

for _mt in ("swin", "swinv2"):
    objectives(_mt, encoder=BI)

BLOCK_Q = r"encoder\.layers\.(\d+)\.blocks\.(\d+)\.attention\.self\.query\.weight"


def swin_stack(ckpt, heads_per_stage: list[int], prefixes: list[str], stack: str = "encoder"):
    prefix = find_prefix(ckpt, [re.escape(p) for p in prefixes], BLOCK_Q).replace("\\", "")
    rx = re.compile(re.escape(prefix) + BLOCK_Q)
    found = sorted({(int(m.group(1)), int(m.group(2))) for n in ckpt.store.names() if (m := rx.fullmatch(n))})
    if not found:
        raise MissingTensor(f"{ckpt.model_id}: no Swin blocks under {prefix!r}")
    for layer, (stage, block) in enumerate(found):
        base = f"{prefix}encoder.layers.{stage}.blocks.{block}.attention.self."
        h = int(heads_per_stage[stage])
        yield AttentionBlock(
            stack, layer, linear_heads(ckpt.store.get(base + "query.weight"), h), linear_heads(ckpt.store.get(base + "key.weight"), h)
        )


@register("swin", "swinv2")
def swin_blocks(ckpt):
    prefixes = [ckpt.model_type.replace("-", "_") + ".", "swin.", ""]
    yield from swin_stack(ckpt, list(cfg(ckpt.config, "num_heads")), prefixes)
