"""SpeechT5: a BART-layout encoder-decoder behind pre/post-nets, with the encoder's
self-attention named "attention"; post-norm:

  [speecht5.]encoder.wrapped_encoder.layers.{i}.attention.{q,k}_proj.weight -> "encoder"
  [speecht5.]decoder.wrapped_decoder.layers.{i}.self_attn.{q,k}_proj.weight -> "decoder"
  [speecht5.]decoder.wrapped_decoder.layers.{i}.encoder_attn...              -> "cross"

The authors' code scored 5 decoder layers of 6 on all three checkpoints, the value of
speech_decoder_postnet_layers (num_hidden_layers aliased to it in their transformers).
"""

from __future__ import annotations

from . import AR, BI, Authors, Record, Tiny, register
from .bart import bart_stacks

register(
    Record(
        "speecht5",
        tuple(
            bart_stacks(
                ("speecht5.", ""),
                pre_norm=False,
                encoder="encoder.wrapped_encoder.layers.{i}.attention.",
                decoder="decoder.wrapped_decoder.layers.{i}.",
            ).values()
        ),
        dict(encoder=BI, decoder=AR),
        authors=Authors(layers={"decoder": ("speech_decoder_postnet_layers", 5)}),
        tiny=Tiny(
            "SpeechT5Model",
            dict(
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
        ),
    )
)
