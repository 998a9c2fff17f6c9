"""GPT-J: [transformer.]h.{i}.attn.{q,k}_proj.weight, separate nn.Linear; partial rotary
(acts between Q and K: ignored)."""

from __future__ import annotations

from . import AR, register
from .common import config_get, qk_stack


@register("gptj", decoder=AR)
def gptj_blocks(ckpt):
    heads = int(config_get(ckpt, "n_head", "num_attention_heads"))
    yield from qk_stack(ckpt, "decoder", "h.{i}.attn.{p}.weight", heads, prefixes=("transformer.", ""))
