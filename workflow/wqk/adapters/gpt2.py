"""GPT-2: Conv1D projections (weight [in, out], already d x out).

Self-attention: [transformer.]h.{l}.attn.c_attn.weight [d, 3d] = [q | k | v] along the
output dim, each part H heads of k columns. Cross-attention (add_cross_attention):
h.{l}.crossattention.q_attn.weight [d, d] for queries and .c_attn.weight [d, 2d] = [k | v].
"""

from __future__ import annotations

import re
from typing import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import config_get, conv1d_heads, find_prefix, layer_indices, register


def _split(w, parts: int, name: str, ckpt: Checkpoint):
    d_out = w.shape[1]
    if d_out % parts:
        from ..errors import CorruptCheckpoint

        raise CorruptCheckpoint(f"{ckpt.model_id}: {name} has {d_out} outputs, not {parts} equal parts")
    return w.split(d_out // parts, dim=1)


@register("gpt2")
def gpt2_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["transformer.", "model.", ""], r"h\.\d+\.attn\.c_attn\.weight")
    heads = int(config_get(ckpt, "n_head", "num_attention_heads"))
    p = re.escape(prefix)
    for layer in layer_indices(ckpt, p + r"h\.(\d+)\.attn\.c_attn\.weight"):
        name = f"{prefix}h.{layer}.attn.c_attn.weight"
        q, k, _ = _split(ckpt.store.get(name), 3, name, ckpt)
        yield AttentionBlock("decoder", layer, conv1d_heads(q, heads), conv1d_heads(k, heads))
    cross = p + r"h\.(\d+)\.crossattention\.(?:q_attn|c_attn)\.weight"
    if any(re.fullmatch(cross, n) for n in ckpt.store.names()):
        for layer in layer_indices(ckpt, cross):
            base = f"{prefix}h.{layer}.crossattention."
            q = ckpt.store.get(base + "q_attn.weight")
            k, _ = _split(ckpt.store.get(base + "c_attn.weight"), 2, base + "c_attn.weight", ckpt)
            yield AttentionBlock("cross", layer, conv1d_heads(q, heads), conv1d_heads(k, heads))
