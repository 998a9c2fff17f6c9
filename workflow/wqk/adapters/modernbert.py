"""ModernBERT: fused [model.]layers.{i}.attn.Wqkv.weight nn.Linear, outputs viewed as
[3, H, k] (q | k | v blocks).

The weight is [out, in]: Q must be the transpose of the q rows (the form lives in the
input/embedding space, d x d), which is what linear_heads does.
"""

from __future__ import annotations

from . import BI, register
from .common import config_get, qk_stack


@register("modernbert", encoder=BI)
def modernbert_blocks(ckpt):
    heads = int(config_get(ckpt, "num_attention_heads"))
    yield from qk_stack(ckpt, "encoder", "layers.{i}.attn.Wqkv.weight", heads, fused="blocks", prefixes=("model.", ""))
