"""Swin and Swin v2: hierarchical windowed attention. Each block's q/k projections are
scored per head all the same (window masks and relative position biases act on the
logits, not on the form). Swin v2's attention is cosine (q and k normalised per head, then
scaled): the form Q_h K_h^T is still the one between the normalised directions; it is
res-post-norm (no gain feeds the attention).

Names: [swin.|swinv2.]encoder.layers.{s}.blocks.{b}.attention.self.{query,key}.weight.
Layers are numbered in depth order across stages (s, b); d and the head count
(num_heads[s]) change per stage.
"""

from __future__ import annotations

import dataclasses

from . import BI, Attention, Record, Tiny, register

SWIN = Attention(
    "encoder",
    "encoder.layers.{s}.blocks.{b}.attention.self.{p}.weight",
    qk=("query", "key"),
    prefixes=("swin.", ""),
    heads=("num_heads",),
    heads_by="s",
    norm="encoder.layers.{s}.blocks.{b}.layernorm_before.weight",
)
_TINY = dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 2], num_heads=[2, 4], window_size=4)

register(Record("swin", (SWIN,), dict(encoder=BI), tiny=Tiny("SwinModel", dict(_TINY))))
register(
    Record(
        "swinv2",
        (dataclasses.replace(SWIN, prefixes=("swinv2.", "swin.", ""), pre_norm=False),),
        dict(encoder=BI),
        tiny=Tiny("Swinv2Model", dict(_TINY)),
    )
)
