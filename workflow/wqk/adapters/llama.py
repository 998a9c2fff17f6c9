"""Llama-layout decoders: Llama, Mistral, Mixtral (MoE FFN), MobileLLM.
Names: [model.]layers.{i}.self_attn.{q,k}_proj.weight, nn.Linear [out, in].

Grouped-query attention: q_proj is [H*k, d], k_proj [H_kv*k, d]. K stays [H_kv, d, k];
query head h pairs with key head h // (H // H_kv) (transformers' repeat_kv repeats each
key head for consecutive query heads). The authors paired h with h % H_kv (tiling), which
is wrong whenever 1 < H_kv < H. The rotary permutation of q/k rows in HF checkpoints is
the same for q and k, so it leaves every M_h = Q_h K_h^T unchanged.

MobileLLM checkpoints (facebook/MobileLLM-*) are remote code with model_type "mobilellm"
and Llama tensor names.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import AR, register
from .common import config_get, qk_stack

SELF = "layers.{i}.self_attn.{p}.weight"


def gqa_heads(ckpt: Checkpoint) -> tuple[int, int]:
    """(query heads, key/value heads) of a grouped-query decoder."""
    heads = int(config_get(ckpt, "num_attention_heads"))
    return heads, int(config_get(ckpt, "num_key_value_heads", default=heads))


@register("llama", "mistral", "mixtral", "mobilellm", decoder=AR)
def llama_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    yield from qk_stack(ckpt, "decoder", SELF, *gqa_heads(ckpt), prefixes=("model.", "model.language_model.", ""))
