"""StableLM (StableLM-3B-4E1T, StableLM 2): Llama's names ([model.]layers.{i}.self_attn.{q,k}_proj.
weight), q/k/v biases where use_qkv_bias, num_key_value_heads, pre-norm input_layernorm (a
LayerNorm: weight = the gain), rotate_half rope on the first partial_rotary_factor (0.25) of
each head.

With qk_layernorm (StableLM 2 12B) each head's queries and keys pass a LayerNorm of their own
(q_layernorm.norms.{h}.weight, no bias) before the rope: its centring and gains are folded into
Q_h, K_h, the blocks marked "qk_norm_gain_folded"; the tiny model has it off, as the most used
checkpoints.
"""

from __future__ import annotations

import dataclasses

from . import Rotary, Tiny, register
from .llama import SELF, llama_like
from .sizes import TEXT_32

_NORMS = ("layers.{i}.self_attn.q_layernorm.norms.{h}.weight", "layers.{i}.self_attn.k_layernorm.norms.{h}.weight")

register(
    llama_like(
        "stablelm",
        Tiny("StableLmForCausalLM", dict(TEXT_32, num_key_value_heads=2, use_qkv_bias=True)),
        Rotary("stablelm", "StableLmRotaryEmbedding", by_hand=True),
        dataclasses.replace(SELF, qk_norm=_NORMS, qk_norm_centred=True),
    )
)
