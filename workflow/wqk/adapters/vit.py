"""ViT-layout bidirectional encoders: ViT (and DINO, non-distilled DeiT: model_type "vit"),
BEiT/DiT (and data2vec-vision), DeiT, DINOv2, ViT-MAE (encoder, plus its bidirectional
pixel decoder). Pre-norm (layernorm_before; DINOv2 norm1).

Checkpoints (hub, and save_pretrained, which reverts transformers 5's renaming on save):
  [vit.|beit.|...]encoder.layer.{i}.attention.attention.{query,key}.weight
transformers >= 5 names ViT's modules in memory [vit.]layers.{i}.attention.{q,k}_proj; a
state_dict saved directly (safetensors save_file) has those names, so both are read for
model_type "vit". BEiT's relative position bias is added to the logits, not part of the
bilinear form; its key has no bias.
"""

from __future__ import annotations

import dataclasses

from . import BI, Attention, Record, Tiny, register
from .sizes import VISION_32

HUB = Attention(
    "encoder",
    "encoder.layer.{i}.attention.attention.{p}.weight",
    qk=("query", "key"),
    norm="encoder.layer.{i}.layernorm_before.weight",
)
IN_MEMORY = Attention(
    "encoder", "layers.{i}.attention.{p}.weight", norm="layers.{i}.layernorm_before.weight", alternative=True
)
# Hub checkpoints name the MAE decoder "decoder.decoder_layers.{i}"; transformers 5
# save_pretrained writes "decoder.decoder_encoder.layer.{i}".
MAE_DECODER = Attention(
    "decoder",
    "{i}.attention.attention.{p}.weight",
    qk=("query", "key"),
    prefixes=("decoder.decoder_layers.", "decoder.decoder_encoder.layer."),
    heads=("decoder_num_attention_heads",),
    norm="{i}.layernorm_before.weight",
    required=False,
)


def _vit(model_type, prefixes, architecture, tiny, attention=(), objectives=None, **hub):
    encoder = dataclasses.replace(HUB, prefixes=prefixes, **hub)
    return register(
        Record(model_type, (encoder, *attention), objectives or dict(encoder=BI), tiny=Tiny(architecture, tiny))
    )


_vit(
    "vit",
    ("vit.", "model.", ""),
    "ViTForImageClassification",
    dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32, patch_size=8),
    (dataclasses.replace(IN_MEMORY, prefixes=("vit.", "model.", "")),),
)
_vit("beit", ("beit.", ""), "BeitForImageClassification", dict(VISION_32, use_relative_position_bias=True))
_vit(
    "data2vec-vision", ("data2vec_vision.", ""), "Data2VecVisionModel", dict(VISION_32, use_relative_position_bias=True)
)
_vit("deit", ("deit.", ""), "DeiTForImageClassificationWithTeacher", dict(VISION_32))
_vit("dinov2", ("dinov2.", ""), "Dinov2Model", dict(VISION_32), norm="encoder.layer.{i}.norm1.weight")
_vit(
    "vit_mae",
    ("vit.", ""),
    "ViTMAEForPreTraining",
    dict(
        VISION_32,
        decoder_hidden_size=32,
        decoder_num_hidden_layers=2,
        decoder_num_attention_heads=4,
        decoder_intermediate_size=37,
    ),
    (MAE_DECODER,),
    dict(encoder=BI, decoder=BI),  # MAE decoder: unmasked self-attention over all patches
)
