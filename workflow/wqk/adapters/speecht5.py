"""SpeechT5: a BART-layout encoder-decoder behind pre/post-nets, with the encoder's
self-attention named "attention":

  [speecht5.]encoder.wrapped_encoder.layers.{i}.attention.{q,k}_proj.weight -> "encoder"
  [speecht5.]decoder.wrapped_decoder.layers.{i}.self_attn.{q,k}_proj.weight -> "decoder"
  [speecht5.]decoder.wrapped_decoder.layers.{i}.encoder_attn...              -> "cross"
"""

from __future__ import annotations

from . import AR, BI, register
from .bart import encoder_decoder


@register("speecht5", encoder=BI, decoder=AR)
def speecht5_blocks(ckpt):
    yield from encoder_decoder(
        ckpt,
        ("speecht5.", ""),
        encoder="encoder.wrapped_encoder.layers.{i}.attention.{p}.weight",
        decoder="decoder.wrapped_decoder.",
    )
