"""Phi-1/1.5/2 (Llama's tensor names, read by llama.py) and Phi-3, whose q/k/v projections
are one fused [model.]layers.{i}.self_attn.qkv_proj.weight.

Phi3Attention: qkv = qkv_proj(x); q = qkv[..., :H*k], k = qkv[..., H*k : H*k + H_kv*k]
(blocks of output rows; with GQA the k block is H_kv*k rows, not d). The weight is
[out, in]: the authors' missing transpose put the form in head space.
"""

from __future__ import annotations

from . import AR, register
from .common import qk_stack
from .llama import gqa_heads, llama_blocks

QKV = "layers.{i}.self_attn.qkv_proj.weight"


@register("phi", decoder=AR)
def phi_blocks(ckpt):
    yield from llama_blocks(ckpt)


@register("phi3", decoder=AR)
def phi3_blocks(ckpt):
    yield from qk_stack(ckpt, "decoder", QKV, *gqa_heads(ckpt), fused="blocks", prefixes=("model.", ""))
