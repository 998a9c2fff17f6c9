"""GPT-NeoX / Pythia: fused query_key_value nn.Linear, weight [3d, d] (out, in).

The output rows are interleaved PER HEAD: for head h, rows [h*3k, h*3k+k) are q_h, the
next k rows k_h, the next k rows v_h (the model views the output as [..., H, 3k] and
chunks the last dim). Slicing the first d rows as W_q (the authors' code) mixes q, k and v
rows of different heads; tests/test_adapters_core.py guards against that layout.
"""

from __future__ import annotations

import re
from typing import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from ..errors import CorruptCheckpoint
from . import config_get, find_prefix, layer_indices, register


def neox_qk(w, heads: int):
    """[H*3k, d] interleaved per head -> (q [H, d, k], k [H, d, k])."""
    out, d = w.shape
    per = w.reshape(heads, 3, out // (3 * heads), d)  # [H, (q,k,v), k, d]
    return per[:, 0].transpose(1, 2).contiguous(), per[:, 1].transpose(1, 2).contiguous()


@register("gpt_neox")
def gpt_neox_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["gpt_neox.", "model.", ""], r"layers\.\d+\.attention\.query_key_value\.weight")
    heads = int(config_get(ckpt, "num_attention_heads"))
    for layer in layer_indices(ckpt, re.escape(prefix) + r"layers\.(\d+)\.attention\.query_key_value\.weight"):
        name = f"{prefix}layers.{layer}.attention.query_key_value.weight"
        w = ckpt.store.get(name)
        if w.shape[0] % (3 * heads):
            raise CorruptCheckpoint(f"{ckpt.model_id}: {name} {tuple(w.shape)} cannot hold q, k, v of {heads} heads")
        q, k = neox_qk(w, heads)
        yield AttentionBlock("decoder", layer, q, k)
