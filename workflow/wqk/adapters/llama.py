"""Llama-layout decoders: Llama, Mistral, Mixtral (MoE FFN), MobileLLM.
Names: [model.]layers.{i}.self_attn.{q,k}_proj.weight, nn.Linear [out, in]; pre-norm
input_layernorm (RMSNorm); rotary, rotate_half pairing.

Grouped-query attention: q_proj is [H*k, d], k_proj [H_kv*k, d]. K stays [H_kv, d, k];
query head h pairs with key head h // (H // H_kv) (transformers' repeat_kv repeats each
key head for consecutive query heads). The authors paired h with h % H_kv (tiling), which
is wrong whenever 1 < H_kv < H. The rotary permutation of q/k rows in HF checkpoints is
the same for q and k, so it leaves every M_h = Q_h K_h^T unchanged.

MobileLLM checkpoints (facebook/MobileLLM-*) are remote code with model_type "mobilellm"
and Llama tensor names (its tiny model: a Llama, relabelled).
"""

from __future__ import annotations

import dataclasses

from . import AR, Attention, Record, Rotary, Tiny, register
from .sizes import BERT_64, TEXT_32

SELF = Attention(
    "decoder",
    "layers.{i}.self_attn.{p}.weight",
    prefixes=("model.", "model.language_model.", ""),
    kv_heads=("num_key_value_heads",),
    norm="layers.{i}.input_layernorm.weight",
)
_MIXTRAL = dict(TEXT_32, intermediate_size=32, num_key_value_heads=2, num_local_experts=2, num_experts_per_tok=1)


def llama_like(model_type: str, tiny: Tiny, rope: Rotary, attention: Attention = SELF) -> Record:
    """A record with Llama's layout."""
    return Record(model_type, (attention,), dict(decoder=AR), rope=rope, tiny=tiny)


LLAMA = register(
    llama_like(
        "llama",
        Tiny("LlamaForCausalLM", dict(BERT_64, num_attention_heads=8, num_key_value_heads=2)),
        Rotary("llama", "LlamaRotaryEmbedding", by_hand=True),
    )
)
register(
    llama_like(
        "mistral",
        Tiny("MistralForCausalLM", dict(BERT_64, num_attention_heads=8, num_key_value_heads=2, sliding_window=32)),
        Rotary("mistral", "MistralRotaryEmbedding", by_hand=True),
    )
)
register(
    llama_like(
        "mixtral", Tiny("MixtralForCausalLM", _MIXTRAL), Rotary("mixtral", "MixtralRotaryEmbedding", by_hand=True)
    )
)
register(dataclasses.replace(LLAMA, model_type="mobilellm", tiny=Tiny("LlamaForCausalLM", _MIXTRAL, family="llama")))
