"""ViT-layout bidirectional encoders: ViT (and DINO, non-distilled DeiT: model_type "vit"),
BEiT/DiT (and data2vec-vision), DeiT, DINOv2, ViT-MAE (encoder, plus its bidirectional
pixel decoder).

Checkpoints (hub, and save_pretrained, which reverts transformers 5's renaming on save):
  [vit.|beit.|...]encoder.layer.{i}.attention.attention.{query,key}.weight
transformers >= 5 names ViT's modules in memory [vit.]layers.{i}.attention.{q,k}_proj; a
state_dict saved directly (safetensors save_file) has those names, so both are read for
model_type "vit". BEiT's relative position bias is added to the logits, not part of the
bilinear form.
"""

from __future__ import annotations

from . import BI, register
from .common import config_get, find_prefix, qk_stack, template_regex

_PREFIXES = {
    "vit": ("vit.", "model.", ""),
    "beit": ("beit.", ""),
    "data2vec-vision": ("data2vec_vision.", ""),
    "deit": ("deit.", ""),
    "dinov2": ("dinov2.", ""),
    "vit_mae": ("vit.", ""),
}
HUB = ("encoder.layer.{i}.attention.attention.{p}.weight", ("query", "key"))
IN_MEMORY = ("layers.{i}.attention.{p}.weight", ("q_proj", "k_proj"))
# Hub checkpoints name the MAE decoder "decoder.decoder_layers.{i}"; transformers 5
# save_pretrained writes "decoder.decoder_encoder.layer.{i}".
MAE_DECODER = ("decoder.decoder_layers.", "decoder.decoder_encoder.layer.")


@register("vit", "beit", "data2vec-vision", "deit", "dinov2", encoder=BI)
def vit_blocks(ckpt):
    heads = int(config_get(ckpt, "num_attention_heads"))
    prefixes = _PREFIXES[ckpt.model_type]
    layouts = [HUB, IN_MEMORY] if ckpt.model_type == "vit" else [HUB]
    for n, (template, qk) in enumerate(layouts, 1):  # the first layout found; the last one is required
        found = yield from qk_stack(
            ckpt, "encoder", template, heads, qk=qk, prefixes=prefixes, required=n == len(layouts)
        )
        if found:
            return


@register("vit_mae", encoder=BI, decoder=BI)  # MAE decoder: unmasked self-attention over all patches
def vit_mae_blocks(ckpt):
    yield from vit_blocks(ckpt)
    template, qk = "{i}.attention.attention.{p}.weight", ("query", "key")
    prefix = find_prefix(ckpt, MAE_DECODER, template_regex(template, qk), required=False)
    if prefix is not None:
        heads = int(config_get(ckpt, "decoder_num_attention_heads"))
        yield from qk_stack(ckpt, "decoder", template, heads, qk=qk, prefixes=[prefix])
