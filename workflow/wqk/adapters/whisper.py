"""Whisper (transformers names, as WhisperForConditionalGeneration saves them):

  model.encoder.layers.{l}.self_attn.{q,k}_proj.weight    -> "encoder" (audio, bidirectional)
  model.decoder.layers.{l}.self_attn.{q,k}_proj.weight    -> "decoder" (text, causal)
  model.decoder.layers.{l}.encoder_attn.{q,k}_proj.weight -> "cross"
Prefix "model." from the generation head, none from a bare WhisperModel. k_proj has no
bias (q_proj has one; biases are ignored). Heads: encoder_/decoder_attention_heads.
"""

from __future__ import annotations

from typing import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import config_get, find_prefix, linear_qk_blocks, register


@register("whisper")
def whisper_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["model.", ""], r"(en|de)coder\.layers\.\d+\.self_attn\.(q|k)_proj\.weight")
    enc_heads = int(config_get(ckpt, "encoder_attention_heads", "num_attention_heads"))
    dec_heads = int(config_get(ckpt, "decoder_attention_heads", "num_attention_heads"))
    layout = [
        ("encoder", "encoder.layers.{l}.self_attn.{p}.weight", enc_heads),
        ("decoder", "decoder.layers.{l}.self_attn.{p}.weight", dec_heads),
        ("cross", "decoder.layers.{l}.encoder_attn.{p}.weight", dec_heads),
    ]
    for stack, template, heads in layout:
        yield from linear_qk_blocks(ckpt, stack, prefix + template, "q_proj", "k_proj", heads, required=False)
