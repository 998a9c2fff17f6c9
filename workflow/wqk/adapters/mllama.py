"""Mllama (Llama 3.2 Vision): the vision tower ("encoder": bidirectional; its 32 local
layers then its 8 gated global layers, numbered in depth order) and the text model's
self-attention layers ("decoder", GQA; the interleaved cross-attention layers carry
cross_attn instead of self_attn and are not reported). The authors plotted the vision
tower as a decoder.
"""

from __future__ import annotations

from . import layer_indices, register
from .qk_templates import AR, BI, cfg, linear_stack, objectives, prefix_for, template_regex

objectives("mllama", encoder=BI, decoder=AR)

LOCAL = "vision_model.transformer.layers.{i}.self_attn.{p}_proj.weight"
GLOBAL = "vision_model.global_transformer.layers.{i}.self_attn.{p}_proj.weight"
TEXT = "layers.{i}.self_attn.{p}_proj.weight"


def _qk(t: str):
    return t.replace("{p}", "q"), t.replace("{p}", "k")


@register("mllama")
def mllama_blocks(ckpt):
    c = ckpt.config
    hv = int(cfg(c, "vision_config.attention_heads", "vision_config.num_attention_heads", default=16))
    prefixes = ("", "model.")
    n_local = len(layer_indices(ckpt, prefix_for(ckpt, list(prefixes), _qk(LOCAL)[0]).replace(".", r"\.") + template_regex(_qk(LOCAL)[0])))
    yield from linear_stack(ckpt, "encoder", *_qk(LOCAL), hv, prefixes=prefixes)
    yield from linear_stack(ckpt, "encoder", *_qk(GLOBAL), hv, prefixes=prefixes, first_layer=n_local)
    ht = int(cfg(c, "text_config.num_attention_heads", default=32))
    hkv = int(cfg(c, "text_config.num_key_value_heads", default=ht))
    yield from linear_stack(
        ckpt, "decoder", *_qk(TEXT), ht, hkv,
        prefixes=("language_model.model.", "model.language_model.", "language_model."),
    )
