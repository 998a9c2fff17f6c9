"""Phi-1/1.5/2 (Llama's tensor names, with q/k biases and partial rotary) and Phi-3, whose
q/k/v projections are one fused [model.]layers.{i}.self_attn.qkv_proj.weight.

Phi3Attention: qkv = qkv_proj(x); q = qkv[..., :H*k], k = qkv[..., H*k : H*k + H_kv*k]
(blocks of output rows; with GQA the k block is H_kv*k rows, not d). The weight is
[out, in]: the authors' missing transpose put the form in head space.
"""

from __future__ import annotations

import dataclasses

from . import Authors, Rotary, Tiny, register
from .llama import SELF, llama_like
from .sizes import TEXT_32

register(
    llama_like(
        "phi",
        Tiny("PhiForCausalLM", dict(TEXT_32, partial_rotary_factor=0.5)),
        Rotary("phi", "PhiRotaryEmbedding"),
    )
)
register(
    dataclasses.replace(
        llama_like(
            "phi3",
            Tiny("Phi3ForCausalLM", dict(TEXT_32, num_key_value_heads=2, pad_token_id=0)),
            Rotary("phi3", "Phi3RotaryEmbedding"),
            dataclasses.replace(
                SELF, weight="layers.{i}.self_attn.qkv_proj.weight", fused="blocks", prefixes=("model.", "")
            ),
        ),
        authors=Authors(untransposed=True),
    )
)
