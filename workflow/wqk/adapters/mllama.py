"""Mllama (Llama 3.2 Vision): the vision tower ("encoder": bidirectional; its 32 local
layers then its 8 gated global layers, numbered in depth order) and the text model's
self-attention layers ("decoder", GQA; the interleaved cross-attention layers carry
cross_attn instead of self_attn and are not reported). The authors plotted the vision
tower as a decoder.

Names: [model.]vision_model.{transformer,global_transformer}.layers.{i}.self_attn.{q,k}_proj,
{language_model.model.,model.language_model.,language_model.}layers.{i}.self_attn.{q,k}_proj.
"""

from __future__ import annotations

from . import AR, BI, register
from .common import config_get, qk_stack

LOCAL = "vision_model.transformer.layers.{i}.self_attn.{p}.weight"
GLOBAL = "vision_model.global_transformer.layers.{i}.self_attn.{p}.weight"
TEXT = "layers.{i}.self_attn.{p}.weight"


@register("mllama", encoder=BI, decoder=AR)
def mllama_blocks(ckpt):
    hv = int(config_get(ckpt, "vision_config.attention_heads", "vision_config.num_attention_heads", default=16))
    prefixes = ("", "model.")
    n_local = yield from qk_stack(ckpt, "encoder", LOCAL, hv, prefixes=prefixes)
    yield from qk_stack(ckpt, "encoder", GLOBAL, hv, prefixes=prefixes, first_layer=n_local)
    ht = int(config_get(ckpt, "text_config.num_attention_heads", default=32))
    hkv = int(config_get(ckpt, "text_config.num_key_value_heads", default=ht))
    yield from qk_stack(
        ckpt, "decoder", TEXT, ht, hkv, prefixes=("language_model.model.", "model.language_model.", "language_model.")
    )
