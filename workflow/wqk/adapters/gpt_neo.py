"""GPT-Neo: [transformer.]h.{i}.attn.attention.{q,k}_proj.weight, separate nn.Linear without
bias and no 1/sqrt(k) scaling; alternate layers use local (windowed) attention: the same
bilinear form, a narrower mask."""

from __future__ import annotations

from . import AR, register
from .common import config_get, qk_stack


@register("gpt_neo", decoder=AR)
def gpt_neo_blocks(ckpt):
    heads = int(config_get(ckpt, "num_heads", "num_attention_heads"))
    yield from qk_stack(ckpt, "decoder", "h.{i}.attn.attention.{p}.weight", heads, prefixes=("transformer.", ""))
