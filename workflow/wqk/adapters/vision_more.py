"""ViT-layout vision encoders beyond ViT itself: BEiT/DiT (and data2vec-vision), DeiT,
DINOv2, ViT-MAE (encoder, plus its bidirectional pixel decoder).

DINO (facebook/dino-*) and the non-distilled DeiT checkpoints are model_type "vit" (vit.py).
BEiT's relative position bias is added to the logits, not part of the bilinear form.
"""

from __future__ import annotations

from . import register
from .qk_templates import BI, cfg, linear_stack, objectives

Q = "encoder.layer.{i}.attention.attention.query.weight"
K = "encoder.layer.{i}.attention.attention.key.weight"
for _mt in ("beit", "data2vec-vision", "deit", "dinov2", "vit_mae"):
    objectives(_mt, encoder=BI)
objectives("vit_mae", decoder=BI)  # MAE decoder: unmasked self-attention over all patches

_PREFIX = {"beit": "beit.", "data2vec-vision": "data2vec_vision.", "deit": "deit.", "dinov2": "dinov2.", "vit_mae": "vit."}


@register("beit", "data2vec-vision", "deit", "dinov2", "vit_mae")
def vit_layout_blocks(ckpt):
    c = ckpt.config
    prefixes = (_PREFIX[ckpt.model_type], "")
    yield from linear_stack(ckpt, "encoder", Q, K, int(cfg(c, "num_attention_heads")), prefixes=prefixes)
    if ckpt.model_type != "vit_mae":
        return
    # Hub checkpoints name the MAE decoder "decoder.decoder_layers.{i}"; transformers 5
    # save_pretrained writes "decoder.decoder_encoder.layer.{i}".
    for layers in ("decoder.decoder_layers.", "decoder.decoder_encoder.layer."):
        if any(n.startswith(layers) for n in ckpt.store.names()):
            yield from linear_stack(
                ckpt,
                "decoder",
                layers + "{i}.attention.attention.query.weight",
                layers + "{i}.attention.attention.key.weight",
                int(cfg(c, "decoder_num_attention_heads")),
            )
            return
