"""GPT-NeoX / Pythia: fused [gpt_neox.]layers.{i}.attention.query_key_value.weight nn.Linear,
weight [3d, d] (out, in).

The output rows are interleaved PER HEAD: for head h, rows [h*3k, h*3k+k) are q_h, the
next k rows k_h, the next k rows v_h (the model views the output as [..., H, 3k] and
chunks the last dim). Slicing the first d rows as W_q (the authors' code) mixes q, k and v
rows of different heads; tests/test_adapters_core.py guards against that layout.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import AR, register
from .common import config_get, qk_stack

QKV = "layers.{i}.attention.query_key_value.weight"


@register("gpt_neox", decoder=AR)
def gpt_neox_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    heads = int(config_get(ckpt, "num_attention_heads"))
    yield from qk_stack(ckpt, "decoder", QKV, heads, fused="per_head", prefixes=("gpt_neox.", "model.", ""))
