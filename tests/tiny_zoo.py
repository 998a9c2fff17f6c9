"""Tiny config kwargs per model_type (hidden 32, 4 heads of 8, 2-3 layers) for the model types
that wqk.tiny does not build: the adapter logits tests (tests/test_adapters_paper.py) and the
stand-in hub (tests/standin_hub) build their random models from these. `AutoConfig.for_model(
model_type, **TINY_MORE[model_type])` gives the config; nested configs are plain dicts."""

from __future__ import annotations

_TXT = dict(vocab_size=99, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=37)
_AUDIO = dict(
    hidden_size=32,
    num_attention_heads=4,
    num_hidden_layers=2,
    intermediate_size=37,
    conv_dim=(16, 16),
    conv_stride=(5, 2),
    conv_kernel=(10, 3),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2,
    vocab_size=20,
)
_SEQ2SEQ = dict(
    vocab_size=99,
    d_model=32,
    encoder_layers=2,
    decoder_layers=3,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=37,
    decoder_ffn_dim=37,
    max_position_embeddings=64,
)
_VIS = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, image_size=32, patch_size=8
)
TINY_MORE: dict[str, dict] = {
    "deberta": dict(_TXT, relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=16),
    "deberta-v2": dict(
        _TXT, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8, norm_rel_ebd="layer_norm"
    ),
    "modernbert": dict(_TXT, num_hidden_layers=3, global_attn_every_n_layers=3, local_attention=4, pad_token_id=0),
    "openai-gpt": dict(vocab_size=99, n_embd=32, n_head=4, n_layer=2, n_positions=32),
    "imagegpt": dict(vocab_size=99, n_embd=32, n_head=4, n_layer=2, n_positions=32),
    "gpt_neo": dict(
        vocab_size=99,
        hidden_size=32,
        num_heads=4,
        num_layers=2,
        attention_types=[[["global", "local"], 1]],
        window_size=4,
        max_position_embeddings=32,
    ),
    "gptj": dict(vocab_size=99, n_embd=32, n_head=4, n_layer=2, rotary_dim=4, n_positions=32),
    "mixtral": dict(_TXT, intermediate_size=32, num_key_value_heads=2, num_local_experts=2, num_experts_per_tok=1),
    "phi": dict(_TXT, partial_rotary_factor=0.5),
    "phi3": dict(_TXT, num_key_value_heads=2, pad_token_id=0),
    "bart": dict(_SEQ2SEQ),
    "mbart": dict(_SEQ2SEQ),
    "speech_to_text": dict(
        _SEQ2SEQ,
        input_feat_per_channel=8,
        input_channels=1,
        conv_channels=16,
        num_conv_layers=2,
        conv_kernel_sizes=[5, 5],
        max_source_positions=64,
    ),
    "speecht5": dict(
        hidden_size=32,
        encoder_layers=2,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=37,
        decoder_ffn_dim=37,
        speech_decoder_postnet_layers=1,
        vocab_size=99,
    ),
    "beit": dict(_VIS, use_relative_position_bias=True),
    "data2vec-vision": dict(_VIS, use_relative_position_bias=True),
    "deit": dict(_VIS),
    "dinov2": dict(_VIS),
    "vit_mae": dict(
        _VIS,
        decoder_hidden_size=32,
        decoder_num_hidden_layers=2,
        decoder_num_attention_heads=4,
        decoder_intermediate_size=37,
    ),
    "swin": dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 2], num_heads=[2, 4], window_size=4),
    "swinv2": dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 2], num_heads=[2, 4], window_size=4),
    "hubert": dict(_AUDIO),
    "wavlm": dict(_AUDIO, num_buckets=16, max_bucket_distance=32),
    "unispeech-sat": dict(_AUDIO),
    "unispeech": dict(_AUDIO),
    "wav2vec2": dict(_AUDIO),
    "data2vec-audio": dict(_AUDIO),
    "git": dict(
        _TXT,
        vision_config=dict(
            hidden_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=37,
            image_size=16,
            patch_size=8,
        ),
    ),
}

TINY_MORE |= {
    "mllama": dict(
        vision_config=dict(
            hidden_size=32,
            attention_heads=4,
            num_hidden_layers=2,
            num_global_layers=1,
            intermediate_size=37,
            image_size=16,
            patch_size=8,
            max_num_tiles=1,
            intermediate_layers_indices=[0],
            supported_aspect_ratios=[[1, 1]],
            vision_output_dim=64,
        ),
        text_config=dict(
            vocab_size=99,
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_hidden_layers=3,
            intermediate_size=37,
            cross_attention_layers=[1],
            pad_token_id=0,
        ),
    ),
    "musicgen": dict(
        text_encoder=dict(model_type="t5", vocab_size=99, d_model=32, d_kv=8, num_heads=4, num_layers=2, d_ff=37),
        audio_encoder=dict(
            model_type="encodec",
            num_filters=4,
            hidden_size=8,
            codebook_size=16,
            upsampling_ratios=[2, 2],
            num_residual_layers=1,
            codebook_dim=8,
        ),
        decoder=dict(
            model_type="musicgen_decoder",
            vocab_size=16,
            hidden_size=32,
            num_attention_heads=4,
            num_hidden_layers=3,
            ffn_dim=37,
            num_codebooks=2,
            max_position_embeddings=32,
        ),
    ),
    "detr": dict(
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=37,
        decoder_ffn_dim=37,
        num_queries=6,
        backbone_config=dict(
            model_type="resnet", embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=["stage2"]
        ),
    ),
    "sam": dict(
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
    "mask2former": dict(
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
}
