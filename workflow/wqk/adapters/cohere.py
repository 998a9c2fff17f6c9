"""Cohere (Command R, Command R+; model_type "cohere"): Llama's names ([model.]layers.{i}.self_attn.
{q,k}_proj.weight), num_key_value_heads, parallel attention and MLP after one pre-norm
input_layernorm (a LayerNorm without bias: weight = the gain). The rope pairs dims interleaved
(rows 2p and 2p + 1: Cohere's rotate_half), unlike Llama's.

With use_qk_norm (Command R+) each head's queries and keys pass a LayerNorm (q_norm [heads,
head_dim], k_norm [kv_heads, head_dim]) before the rope: its centring and gains are folded into
Q_h, K_h, the blocks marked "qk_norm_gain_folded"; the tiny model has it off, as Command R.
"""

from __future__ import annotations

import dataclasses

from . import Rotary, Tiny, register
from .llama import SELF, llama_like
from .sizes import TEXT_32

register(
    llama_like(
        "cohere",
        Tiny("CohereForCausalLM", dict(TEXT_32, num_key_value_heads=2, eos_token_id=2)),
        Rotary("cohere", "CohereRotaryEmbedding", layout="interleaved", by_hand=True),
        dataclasses.replace(
            SELF,
            qk_norm=("layers.{i}.self_attn.q_norm.weight", "layers.{i}.self_attn.k_norm.weight"),
            qk_norm_centred=True,
            norm_centred=True,  # input_layernorm: a LayerNorm without bias
        ),
    )
)
