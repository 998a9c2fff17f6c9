"""SAM: ViT image encoder (fused [model.]vision_encoder.layers.{i}.attn.qkv.weight, outputs
viewed as [3, H, k]; windowed and global layers; decomposed relative position terms are
added to the logits, not part of the form; pre-norm layer_norm1) and the mask decoder's
two-way transformer (mask_decoder.transformer.layers.{i}.self_attn.{q,k}_proj), whose token
self-attention is bidirectional ("decoder" stack, objective bidirectional) and normalised
after. The two-way cross-attentions (token->image, image->token, on a downsampled internal
width) are not reported.
"""

from __future__ import annotations

from . import BI, Attention, Record, Tiny, register

register(
    Record(
        "sam",
        (
            Attention(
                "encoder",
                "vision_encoder.layers.{i}.attn.qkv.weight",
                fused="blocks",
                prefixes=("", "model."),
                heads=("vision_config.num_attention_heads",),
                norm="vision_encoder.layers.{i}.layer_norm1.weight",
            ),
            Attention(
                "decoder",
                "mask_decoder.transformer.layers.{i}.self_attn.{p}.weight",
                prefixes=("", "model."),
                heads=("mask_decoder_config.num_attention_heads",),
                pre_norm=False,
            ),
        ),
        dict(encoder=BI, decoder=BI),
        tiny=Tiny(
            "SamModel",
            dict(
                vision_config=dict(
                    hidden_size=32,
                    num_hidden_layers=2,
                    num_attention_heads=4,
                    mlp_dim=37,
                    image_size=64,
                    patch_size=8,
                    output_channels=16,
                    window_size=4,
                    global_attn_indexes=[1],
                    num_pos_feats=8,
                ),
                prompt_encoder_config=dict(hidden_size=16, image_size=64, patch_size=8, mask_input_channels=4),
                mask_decoder_config=dict(
                    hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_dim=32, iou_head_hidden_dim=16
                ),
            ),
        ),
    )
)
