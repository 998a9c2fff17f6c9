"""SAM: ViT image encoder (fused [model.]vision_encoder.layers.{i}.attn.qkv.weight, outputs
viewed as [3, H, k]; windowed and global layers; decomposed relative position terms are
added to the logits, not part of the form) and the mask decoder's two-way transformer
(mask_decoder.transformer.layers.{i}.self_attn.{q,k}_proj), whose token self-attention is
bidirectional ("decoder" stack, objective bidirectional). The two-way cross-attentions
(token->image, image->token, on a downsampled internal width) are not reported.
"""

from __future__ import annotations

from . import BI, register
from .common import config_get, find_prefix, qk_stack, template_regex

QKV = "vision_encoder.layers.{i}.attn.qkv.weight"
TOKENS = "mask_decoder.transformer.layers.{i}.self_attn.{p}.weight"


@register("sam", encoder=BI, decoder=BI)
def sam_blocks(ckpt):
    prefix = find_prefix(ckpt, ["", "model."], template_regex(QKV))
    h = int(config_get(ckpt, "vision_config.num_attention_heads"))
    yield from qk_stack(ckpt, "encoder", QKV, h, fused="blocks", prefixes=[prefix])
    h = int(config_get(ckpt, "mask_decoder_config.num_attention_heads"))
    yield from qk_stack(ckpt, "decoder", TOKENS, h, prefixes=[prefix])
