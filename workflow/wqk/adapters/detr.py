"""DETR and Mask2Former: set-prediction transformers whose "decoder" self-attention runs
over object queries WITHOUT a causal mask. The authors plotted these decoders with the
autoregressive ones; here the stack is still called "decoder" (it is the decoder side of
an encoder-decoder) but its objective is bidirectional (STACK_OBJECTIVES).

Mask2Former: the transformer decoder's self_attn (q_proj/k_proj), its masked
cross-attention (nn.MultiheadAttention, fused in_proj_weight [q | k | v]) as "cross", and
the Swin backbone as "encoder" (the pixel decoder uses deformable attention, which has no
q.k form, and is not reported).
"""

from __future__ import annotations

from . import layer_indices, linear_heads, register
from ..blocks import AttentionBlock
from .qk_templates import BI, cfg, fused_rows, linear_stack, objectives, prefix_for, template_regex
from .swin import swin_stack

objectives("detr", encoder=BI, decoder=BI)
objectives("mask2former", encoder=BI, decoder=BI)

NON_CAUSAL_DECODERS = {"detr": "decoder", "mask2former": "decoder", "sam": "decoder"}


@register("detr")
def detr_blocks(ckpt):
    c = ckpt.config
    for stack, heads in (("encoder", "encoder_attention_heads"), ("decoder", "decoder_attention_heads")):
        yield from linear_stack(
            ckpt, stack, f"{stack}.layers.{{i}}.self_attn.q_proj.weight", f"{stack}.layers.{{i}}.self_attn.k_proj.weight",
            int(cfg(c, heads)), prefixes=("model.", ""),
        )
    yield from linear_stack(
        ckpt, "cross", "decoder.layers.{i}.encoder_attn.q_proj.weight", "decoder.layers.{i}.encoder_attn.k_proj.weight",
        int(cfg(c, "decoder_attention_heads")), prefixes=("model.", ""),
    )


DEC = "transformer_module.decoder.layers.{i}."


@register("mask2former")
def mask2former_blocks(ckpt):
    c = ckpt.config
    names = ckpt.store.names()
    backbone = [p for p in ("model.pixel_level_module.encoder.", "pixel_level_module.encoder.") if any(n.startswith(p) for n in names)]
    if backbone and c.get("backbone_config", {}).get("model_type") in ("swin", None):
        yield from swin_stack(ckpt, list(cfg(c, "backbone_config.num_heads")), backbone)
    h = int(cfg(c, "num_attention_heads"))
    yield from linear_stack(ckpt, "decoder", DEC + "self_attn.q_proj.weight", DEC + "self_attn.k_proj.weight", h, prefixes=("model.", ""))
    prefix = prefix_for(ckpt, ["model.", ""], DEC + "cross_attn.in_proj_weight")
    for i in layer_indices(ckpt, prefix.replace(".", r"\.") + template_regex(DEC + "cross_attn.in_proj_weight")):
        w = ckpt.store.get(prefix + DEC.format(i=i) + "cross_attn.in_proj_weight")
        wq, wk, _ = fused_rows(w, h, w.shape[1] // h, 3, "blocks")
        yield AttentionBlock("cross", i, linear_heads(wq, h), linear_heads(wk, h))
