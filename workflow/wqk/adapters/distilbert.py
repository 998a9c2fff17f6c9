"""DistilBERT: [distilbert.]transformer.layer.{i}.attention.{q_lin,k_lin}.weight; heads in n_heads."""

from __future__ import annotations

from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import BI, register
from .common import config_get, qk_stack


@register("distilbert", encoder=BI)
def distilbert_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    heads = int(config_get(ckpt, "n_heads", "num_attention_heads"))
    template, qk = "transformer.layer.{i}.attention.{p}.weight", ("q_lin", "k_lin")
    yield from qk_stack(ckpt, "encoder", template, heads, qk=qk, prefixes=["distilbert.", "model.", ""])
