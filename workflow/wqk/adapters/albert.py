"""ALBERT: cross-layer parameter sharing.

The encoder applies num_hidden_layers layers, but they reuse the weights of
num_hidden_groups groups (1 in every released ALBERT) of inner_group_num layers each.
We report the distinct weight sets found in the checkpoint, not the applied depth:
albert-base-v2 yields ONE encoder block (layer 0), not 12. Layer numbers enumerate the
(group, inner layer) pairs in order: layer = rank of (g, i) among those present.
Names: [albert.]encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.{query,key}.weight
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import BI, register
from .common import config_get, find_prefix, layer_indices, linear_heads

_PROBE = r"encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.(?:query|key)\.weight"


@register("albert", encoder=BI)
def albert_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["albert.", "model.", ""], _PROBE)
    heads = int(config_get(ckpt, "num_attention_heads"))
    for layer, (g, i) in enumerate(layer_indices(ckpt, re.escape(prefix) + _PROBE)):
        name = f"{prefix}encoder.albert_layer_groups.{g}.albert_layers.{i}.attention.{{}}.weight"
        wq = ckpt.store.get(name.format("query"))
        wk = ckpt.store.get(name.format("key"))
        yield AttentionBlock("encoder", layer, linear_heads(wq, heads), linear_heads(wk, heads))
