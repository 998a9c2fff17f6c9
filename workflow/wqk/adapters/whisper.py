"""Whisper (transformers names, as WhisperForConditionalGeneration saves them), BART's layout:

  model.encoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "encoder" (audio, bidirectional)
  model.decoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "decoder" (text, causal)
  model.decoder.layers.{i}.encoder_attn.{q,k}_proj.weight -> "cross"
Prefix "model." from the generation head, none from a bare WhisperModel. k_proj has no
bias (q_proj has one; biases are ignored). Heads: encoder_/decoder_attention_heads. Each
stack may be absent (an encoder-only export), but not all of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import AR, BI, register
from .bart import encoder_decoder
from .common import find_prefix


@register("whisper", encoder=BI, decoder=AR)
def whisper_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["model.", ""], r"(?:en|de)coder\.layers\.\d+\.self_attn\.[qk]_proj\.weight")
    yield from encoder_decoder(ckpt, [prefix], required=False)
