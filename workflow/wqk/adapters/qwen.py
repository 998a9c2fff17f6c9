"""Qwen2 (Qwen2, Qwen2.5) and Qwen3 decoders: Llama's names ([model.]layers.{i}.self_attn.
{q,k}_proj.weight, nn.Linear [out, in]), grouped-query attention (num_key_value_heads), pre-norm
input_layernorm (RMSNorm), rotary with rotate_half pairing.

Qwen2 always has q/k/v biases. Qwen3 has none (attention_bias false) and a QK-norm: an RMSNorm
over each head's head_dim (q_norm, k_norm: one gain of head_dim shared by the heads) between the
projections and the rope, so its logits are not a bilinear form of the token vectors: the gains
are folded into Q_h, K_h and the blocks marked "qk_norm_gain_folded" (Attention.qk_norm).
Qwen3's head_dim is its own config key (Qwen3-0.6B: hidden 1024, 16 heads of 128).
"""

from __future__ import annotations

import dataclasses

from . import Rotary, Tiny, register
from .llama import SELF, llama_like
from .sizes import TEXT_32

register(
    llama_like(
        "qwen2",
        Tiny("Qwen2ForCausalLM", dict(TEXT_32, num_key_value_heads=2)),
        Rotary("qwen2", "Qwen2RotaryEmbedding", by_hand=True),
    )
)
register(
    llama_like(
        "qwen3",
        Tiny("Qwen3ForCausalLM", dict(TEXT_32, num_key_value_heads=2, head_dim=16)),
        Rotary("qwen3", "Qwen3RotaryEmbedding", by_hand=True),
        dataclasses.replace(SELF, qk_norm=("layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.k_norm.weight")),
    )
)
