"""GPT-2 and the other decoders with its Conv1D c_attn (openai-gpt, imagegpt): weights
[in, out], already d x out.

Self-attention: [transformer.]h.{i}.attn.c_attn.weight [d, 3d] = [q | k | v] along the
output dim, each part H heads of k columns. Cross-attention (GPT-2 add_cross_attention):
h.{i}.crossattention.q_attn.weight [d, d] for queries and .c_attn.weight [d, 2d] = [k | v].
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from ..errors import CorruptCheckpoint
from . import AR, register
from .common import config_get, conv1d_heads, find_prefix, layer_indices, qk_stack

C_ATTN = r"h\.\d+\.attn\.c_attn\.weight"


@register("gpt2", "openai-gpt", "imagegpt", decoder=AR)
def gpt2_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["transformer.", "model.", ""], C_ATTN)
    heads = int(config_get(ckpt, "n_head", "num_attention_heads"))
    yield from qk_stack(
        ckpt, "decoder", "h.{i}.attn.c_attn.weight", heads, fused="blocks", conv1d=True, prefixes=[prefix]
    )
    cross = re.escape(prefix) + r"h\.(\d+)\.crossattention\.(?:q_attn|c_attn)\.weight"
    if any(re.fullmatch(cross, n) for n in ckpt.store.names()):
        for layer in layer_indices(ckpt, cross):
            base = f"{prefix}h.{layer}.crossattention."
            q = ckpt.store.get(base + "q_attn.weight")
            kv = ckpt.store.get(base + "c_attn.weight")  # [d, 2d] = [k | v]
            if kv.shape[1] % 2:
                raise CorruptCheckpoint(f"{ckpt.model_id}: {base}c_attn.weight has {kv.shape[1]} outputs, not k | v")
            yield AttentionBlock("cross", layer, conv1d_heads(q, heads), conv1d_heads(kv[:, : kv.shape[1] // 2], heads))
