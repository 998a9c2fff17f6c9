"""Mask2Former: the transformer decoder's self_attn (q_proj/k_proj) over object queries,
WITHOUT a causal mask ("decoder", objective bidirectional, like DETR's), its masked
cross-attention (nn.MultiheadAttention, fused in_proj_weight [q | k | v]; keys: pixel-decoder
features, no norm of their own) as "cross", and the Swin backbone as "encoder" when the
backbone is a Swin (the pixel decoder uses deformable attention, which has no q.k form,
and is not reported). Pre-norm only with config pre_norm.

Names: [model.]transformer_module.decoder.layers.{i}.{self_attn.{q,k}_proj,cross_attn.in_proj_weight},
[model.]pixel_level_module.encoder.encoder.layers.{s}.blocks.{b}... (swin.py).
"""

from __future__ import annotations

import dataclasses

from . import BI, Attention, Record, Tiny, register
from .swin import SWIN

DEC = "transformer_module.decoder.layers.{i}."


def swin_backbone(config: dict) -> bool:
    """The backbone is read when it is a Swin (the default backbone_config)."""
    return config.get("backbone_config", {}).get("model_type") in ("swin", None)


register(
    Record(
        "mask2former",
        (
            dataclasses.replace(
                SWIN,
                prefixes=("model.pixel_level_module.encoder.", "pixel_level_module.encoder."),
                heads=("backbone_config.num_heads",),
                required=False,
                only_if=swin_backbone,
            ),
            Attention(
                "decoder",
                DEC + "self_attn.{p}.weight",
                prefixes=("model.", ""),
                norm=DEC + "self_attn_layer_norm.weight",
                pre_norm="pre_norm",
            ),
            Attention(
                "cross",
                DEC + "cross_attn.in_proj_weight",
                fused="blocks",
                prefixes=("model.", ""),
                norm=DEC + "cross_attn_layer_norm.weight",
                pre_norm="pre_norm",
            ),
        ),
        dict(encoder=BI, decoder=BI),
        tiny=Tiny(
            "Mask2FormerModel",
            dict(
                backbone_config=dict(
                    model_type="swin",
                    image_size=64,
                    patch_size=4,
                    embed_dim=16,
                    depths=[1, 1, 1, 1],
                    num_heads=[1, 1, 2, 2],
                    window_size=4,
                    out_features=["stage1", "stage2", "stage3", "stage4"],
                ),
                hidden_dim=32,
                mask_feature_size=32,
                feature_size=32,
                num_queries=6,
                num_attention_heads=4,
                decoder_layers=3,
                encoder_layers=1,
                dim_feedforward=37,
                encoder_feedforward_dim=37,
                num_labels=3,
                use_pretrained_backbone=False,
            ),
        ),
    )
)
