"""DETR: a set-prediction transformer with BART's layout ([model.]encoder.layers.{i}.self_attn,
decoder.layers.{i}.self_attn and .encoder_attn, {q,k}_proj), whose "decoder" self-attention
runs over object queries WITHOUT a causal mask. The authors plotted these decoders with the
autoregressive ones; here the stack is still called "decoder" (it is the decoder side of
an encoder-decoder) but its objective is bidirectional.
"""

from __future__ import annotations

from . import BI, register
from .bart import encoder_decoder


@register("detr", encoder=BI, decoder=BI)
def detr_blocks(ckpt):
    yield from encoder_decoder(ckpt, ("model.", ""))
