"""Mask2Former: the transformer decoder's self_attn (q_proj/k_proj) over object queries,
WITHOUT a causal mask ("decoder", objective bidirectional, like DETR's), its masked
cross-attention (nn.MultiheadAttention, fused in_proj_weight [q | k | v]) as "cross", and
the Swin backbone as "encoder" (the pixel decoder uses deformable attention, which has no
q.k form, and is not reported).

Names: [model.]transformer_module.decoder.layers.{i}.{self_attn.{q,k}_proj,cross_attn.in_proj_weight},
[model.]pixel_level_module.encoder.encoder.layers.{stage}.blocks.{block}... (swin.py).
"""

from __future__ import annotations

from . import BI, register
from .common import config_get, qk_stack
from .swin import swin_stack

DEC = "transformer_module.decoder.layers.{i}."


@register("mask2former", encoder=BI, decoder=BI)
def mask2former_blocks(ckpt):
    names = ckpt.store.names()
    backbone = [
        p
        for p in ("model.pixel_level_module.encoder.", "pixel_level_module.encoder.")
        if any(n.startswith(p) for n in names)
    ]
    if backbone and ckpt.config.get("backbone_config", {}).get("model_type") in ("swin", None):
        yield from swin_stack(ckpt, list(config_get(ckpt, "backbone_config.num_heads")), backbone)
    h = int(config_get(ckpt, "num_attention_heads"))
    yield from qk_stack(ckpt, "decoder", DEC + "self_attn.{p}.weight", h, prefixes=("model.", ""))
    yield from qk_stack(ckpt, "cross", DEC + "cross_attn.in_proj_weight", h, fused="blocks", prefixes=("model.", ""))
