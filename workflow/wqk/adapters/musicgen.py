"""MusicGen: a T5 text encoder (text_encoder.encoder.block.{i}.layer.0.SelfAttention.{q,k})
and a BART-layout decoder over audio codes (decoder.model.decoder.layers.{i}...). A decoder
saved on its own is model_type "musicgen_decoder" ([model.]decoder.layers.{i}...).

The decoder stack is self_attn; encoder_attn is cross-attention (queries from audio codes,
keys from the projected T5 text states) and goes to the "cross" stack.
"""

from __future__ import annotations

from . import AR, BI, register
from .bart import decoder_stacks
from .common import config_get, qk_stack
from .t5 import ENCODER


@register("musicgen", encoder=BI, decoder=AR)
def musicgen_blocks(ckpt):
    heads = int(config_get(ckpt, "text_encoder.num_heads"))
    yield from qk_stack(ckpt, "encoder", "text_encoder." + ENCODER, heads, qk=("q", "k"))
    yield from decoder_stacks(ckpt, int(config_get(ckpt, "decoder.num_attention_heads")), ("decoder.model.",))


@register("musicgen_decoder", decoder=AR)
def musicgen_decoder_blocks(ckpt):
    yield from decoder_stacks(ckpt, int(config_get(ckpt, "num_attention_heads")), ("model.", ""))
