"""T5: encoder self-attention, decoder self-attention and decoder cross-attention.

  encoder.block.{i}.layer.0.SelfAttention.{q,k}.weight   -> "encoder"
  decoder.block.{i}.layer.0.SelfAttention.{q,k}.weight   -> "decoder"
  decoder.block.{i}.layer.1.EncDecAttention.{q,k}.weight -> "cross"
nn.Linear [H*d_kv, d_model]; d_kv is its own config field and H*d_kv need not equal
d_model. T5 applies no 1/sqrt(k) scale (it is folded into initialisation); scores are
scale-free anyway. An encoder-only export (T5EncoderModel) yields only "encoder".
"""

from __future__ import annotations

from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import AR, BI, register
from .common import config_get, find_prefix, qk_stack

ENCODER = "encoder.block.{i}.layer.0.SelfAttention.{p}.weight"  # MusicGen's text encoder too
_LAYOUT = [
    ("encoder", ENCODER),
    ("decoder", "decoder.block.{i}.layer.0.SelfAttention.{p}.weight"),
    ("cross", "decoder.block.{i}.layer.1.EncDecAttention.{p}.weight"),
]


@register("t5", encoder=BI, decoder=AR)
def t5_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(
        ckpt, ["", "transformer.", "model."], r"(?:en|de)coder\.block\.\d+\.layer\.0\.SelfAttention\.[qk]\.weight"
    )
    heads = int(config_get(ckpt, "num_heads", "num_attention_heads"))
    for stack, template in _LAYOUT:
        yield from qk_stack(ckpt, stack, template, heads, qk=("q", "k"), prefixes=[prefix], required=stack == "encoder")
