"""Llama and Mistral: [model.]layers.{l}.self_attn.{q,k}_proj.weight, nn.Linear [out, in].

Grouped-query attention: q_proj is [H*k, d], k_proj [H_kv*k, d]. K stays [H_kv, d, k];
query head h pairs with key head h // (H // H_kv) (transformers' repeat_kv repeats each
key head for consecutive query heads). The authors paired h with h % H_kv (tiling), which
is wrong whenever 1 < H_kv < H. The rotary permutation of q/k rows in HF checkpoints is
the same for q and k, so it leaves every M_h = Q_h K_h^T unchanged.
"""

from __future__ import annotations

from typing import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import config_get, find_prefix, linear_qk_blocks, register


@register("llama", "mistral")
def llama_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["model.", "model.language_model.", ""], r"layers\.\d+\.self_attn\.(q|k)_proj\.weight")
    heads = int(config_get(ckpt, "num_attention_heads"))
    kv_heads = int(config_get(ckpt, "num_key_value_heads", default=heads))
    yield from linear_qk_blocks(
        ckpt, "decoder", prefix + "layers.{l}.self_attn.{p}.weight", "q_proj", "k_proj", heads, kv_heads
    )
