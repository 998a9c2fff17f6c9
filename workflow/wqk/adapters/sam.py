"""SAM: ViT image encoder (fused qkv Linear, outputs viewed as [3, H, k]; windowed and
global layers; decomposed relative position terms are added to the logits, not part of
the form) and the mask decoder's two-way transformer, whose token self-attention is
bidirectional ("decoder" stack, objective bidirectional). The two-way cross-attentions
(token->image, image->token, on a downsampled internal width) are not reported.
"""

from __future__ import annotations

from . import layer_indices, linear_heads, register
from ..blocks import AttentionBlock
from .qk_templates import BI, cfg, fused_rows, linear_stack, objectives, prefix_for, template_regex

objectives("sam", encoder=BI, decoder=BI)
QKV = "vision_encoder.layers.{i}.attn.qkv.weight"


@register("sam")
def sam_blocks(ckpt):
    c = ckpt.config
    h = int(cfg(c, "vision_config.num_attention_heads"))
    prefix = prefix_for(ckpt, ["", "model."], QKV)
    for i in layer_indices(ckpt, prefix.replace(".", r"\.") + template_regex(QKV)):
        w = ckpt.store.get(prefix + QKV.format(i=i))
        wq, wk, _ = fused_rows(w, h, w.shape[0] // (3 * h), 3, "blocks")
        yield AttentionBlock("encoder", i, linear_heads(wq, h), linear_heads(wk, h))
    yield from linear_stack(
        ckpt, "decoder",
        "mask_decoder.transformer.layers.{i}.self_attn.q_proj.weight",
        "mask_decoder.transformer.layers.{i}.self_attn.k_proj.weight",
        int(cfg(c, "mask_decoder_config.num_attention_heads")), prefixes=(prefix,),
    )
