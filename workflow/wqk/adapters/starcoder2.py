"""StarCoder2: Llama's names ([model.]layers.{i}.self_attn.{q,k}_proj.weight) with q/k/v biases
(use_bias), grouped-query attention (num_key_value_heads), pre-norm input_layernorm (a LayerNorm:
its weight is the gain, its bias is not part of the form), rotate_half rope."""

from __future__ import annotations

from . import Rotary, Tiny, register
from .llama import llama_like
from .sizes import TEXT_32

register(
    llama_like(
        "starcoder2",
        Tiny("Starcoder2ForCausalLM", dict(TEXT_32, num_key_value_heads=2)),
        Rotary("starcoder2", "Starcoder2RotaryEmbedding", by_hand=True),
    )
)
