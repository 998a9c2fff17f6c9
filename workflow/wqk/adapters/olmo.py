"""OLMo and OLMo-2 decoders (AllenAI): Llama's names ([model.]layers.{i}.self_attn.{q,k}_proj.
weight), num_key_value_heads, rotate_half rope, no q/k biases (attention_bias false).

OLMo's pre-norm is a LayerNorm without parameters: no gain. Its clip_qkv (OLMo-1.7) clamps q, k
and v to [-clip, clip]: where it acts, the logits leave the bilinear form (not marked; most
entries of q and k lie inside the clip). OLMo-2 norms after the attention
(post_attention_layernorm: no gain feeds q/k) and has a QK-norm: an RMSNorm over the whole
projection (q_norm [heads * head_dim], k_norm [kv_heads * head_dim]; one scale per token for
all heads) before the rope: the gains are folded per head into Q_h, K_h, the blocks marked
"qk_norm_gain_folded".
"""

from __future__ import annotations

import dataclasses

from . import Rotary, Tiny, register
from .llama import SELF, llama_like
from .sizes import TEXT_32

_TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)

register(
    llama_like(
        "olmo",
        Tiny("OlmoForCausalLM", dict(TEXT_32, num_key_value_heads=2, **_TOKENS)),
        Rotary("olmo", "OlmoRotaryEmbedding", by_hand=True),
        dataclasses.replace(SELF, norm=None),
    )
)
register(
    llama_like(
        "olmo2",
        Tiny("Olmo2ForCausalLM", dict(TEXT_32, num_key_value_heads=2, **_TOKENS)),
        Rotary("olmo2", "Olmo2RotaryEmbedding", by_hand=True),
        dataclasses.replace(
            SELF, norm=None, qk_norm=("layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.k_norm.weight")
        ),
    )
)
