"""Gemma, Gemma 2 and Gemma 3 (text) decoders: Llama's names ([model.]layers.{i}.self_attn.
{q,k}_proj.weight), multi-/grouped-query attention (num_key_value_heads; gemma-2b has one key
head), head_dim its own config key (256), pre-norm input_layernorm, rotate_half rope.

Gemma's RMSNorm scales by 1 + w (w stored, zero-initialised): every gain is 1 + the stored
weight (Attention.gain_offset). The score scale is query_pre_attn_scalar**-0.5 (Gemma 2, 3).
Gemma 2 soft-caps the logits, cap * tanh(s / cap) (attn_logit_softcapping), after q.k: a
monotone map of the bilinear form's value, which is what is scored. Gemma 3 drops the cap and
adds a QK-norm (RMSNorm over head_dim, gains 1 + w) before the rope: the gains are folded into
Q_h, K_h, the blocks marked "qk_norm_gain_folded". Its sliding and full attention layers
(config.layer_types) have rotary frequencies of their own (rope_parameters per layer type).
"""

from __future__ import annotations

import dataclasses

from . import Rotary, Tiny, register
from .llama import SELF, llama_like
from .sizes import TEXT_32

GEMMA_SELF = dataclasses.replace(SELF, gain_offset=1.0)
_GEMMA_32 = dict(TEXT_32, head_dim=16, num_key_value_heads=2)

register(
    llama_like(
        "gemma",
        Tiny("GemmaForCausalLM", dict(_GEMMA_32, num_key_value_heads=1)),
        Rotary("gemma", "GemmaRotaryEmbedding", by_hand=True),
        GEMMA_SELF,
    )
)
register(
    llama_like(
        "gemma2",
        Tiny("Gemma2ForCausalLM", dict(_GEMMA_32, query_pre_attn_scalar=16, sliding_window=4)),
        Rotary("gemma2", "Gemma2RotaryEmbedding", by_hand=True),
        GEMMA_SELF,
    )
)
register(
    llama_like(
        "gemma3_text",
        Tiny(
            "Gemma3ForCausalLM",
            dict(
                _GEMMA_32,
                num_hidden_layers=3,
                layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                query_pre_attn_scalar=16,
                sliding_window=4,
            ),
        ),
        Rotary("gemma3_text", "Gemma3RotaryEmbedding", per_layer_type=True, module="gemma3"),
        dataclasses.replace(
            GEMMA_SELF, qk_norm=("layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.k_norm.weight")
        ),
    )
)
