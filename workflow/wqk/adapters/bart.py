"""BART-layout encoder-decoders: BART, mBART, Speech2Text (and the layout of DETR,
SpeechT5, MusicGen and Whisper, whose modules use these helpers).

  [model.]encoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "encoder" (bidirectional)
  [model.]decoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "decoder" (causal)
  [model.]decoder.layers.{i}.encoder_attn.{q,k}_proj.weight -> "cross" (decoder queries
                                                               against encoder states)
Layers are counted per stack from the weights: SpeechT5's config aliases
num_hidden_layers to encoder_layers, which is not the decoder's depth.
"""

from __future__ import annotations

from . import AR, BI, register
from .common import config_get, qk_stack

SELF = "layers.{i}.self_attn.{p}.weight"
CROSS = "layers.{i}.encoder_attn.{p}.weight"


def decoder_stacks(ckpt, n_heads: int, prefixes, name: str = "decoder.", required: bool = True):
    """The decoder's self-attention ("decoder") and its encoder_attn ("cross")."""
    yield from qk_stack(ckpt, "decoder", name + SELF, n_heads, prefixes=prefixes, required=required)
    yield from qk_stack(ckpt, "cross", name + CROSS, n_heads, prefixes=prefixes, required=required)


def encoder_decoder(ckpt, prefixes, encoder: str = "encoder." + SELF, decoder: str = "decoder.", required: bool = True):
    """Encoder self-attention (template `encoder`), then decoder_stacks under `decoder`."""
    h_enc = int(config_get(ckpt, "encoder_attention_heads", "num_attention_heads"))
    h_dec = int(config_get(ckpt, "decoder_attention_heads", "num_attention_heads"))
    yield from qk_stack(ckpt, "encoder", encoder, h_enc, prefixes=prefixes, required=required)
    yield from decoder_stacks(ckpt, h_dec, prefixes, decoder, required)


@register("bart", "mbart", "speech_to_text", encoder=BI, decoder=AR)
def bart_blocks(ckpt):
    yield from encoder_decoder(ckpt, ("model.", ""))
