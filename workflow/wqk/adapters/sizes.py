"""Sizes shared by the tiny configs of several records (hidden 64 for the types `wqk tiny`
built first, hidden 32 with 4 heads of 8 and 2-3 layers for the others). Small, but with the
shapes that matter (GQA, d_kv != d/H, a decoder deeper than its encoder)."""

from __future__ import annotations

BERT_64 = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    vocab_size=128,
    max_position_embeddings=64,
)
TEXT_32 = dict(vocab_size=99, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=37)
AUDIO_32 = dict(
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
SEQ2SEQ_32 = dict(
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
VISION_32 = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, image_size=32, patch_size=8
)
