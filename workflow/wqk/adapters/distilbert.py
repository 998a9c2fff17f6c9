"""DistilBERT: [distilbert.]transformer.layer.{l}.attention.{q_lin,k_lin}.weight; heads in n_heads."""

from __future__ import annotations

from typing import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import config_get, find_prefix, linear_qk_blocks, register


@register("distilbert")
def distilbert_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, ["distilbert.", "model.", ""], r"transformer\.layer\.\d+\.attention\.(q|k)_lin\.weight")
    heads = int(config_get(ckpt, "n_heads", "num_attention_heads"))
    yield from linear_qk_blocks(
        ckpt, "encoder", prefix + "transformer.layer.{l}.attention.{p}.weight", "q_lin", "k_lin", heads
    )
