"""ViT (bidirectional encoder).

Checkpoints (hub, and save_pretrained, which reverts transformers 5's renaming on save):
  [vit.]encoder.layer.{l}.attention.attention.{query,key}.weight
transformers >= 5 names the modules in memory [vit.]layers.{l}.attention.{q,k}_proj; a
state_dict saved directly (safetensors save_file) has those names, so both are read.
"""

from __future__ import annotations

from typing import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from ..errors import MissingTensor
from . import config_get, find_prefix, linear_qk_blocks, register

_PREFIXES = ["vit.", "model.", ""]
_LAYOUTS = [  # (probe, template, q, k)
    (r"encoder\.layer\.\d+\.attention\.attention\.(query|key)\.weight",
     "encoder.layer.{l}.attention.attention.{p}.weight", "query", "key"),
    (r"layers\.\d+\.attention\.(q|k)_proj\.weight", "layers.{l}.attention.{p}.weight", "q_proj", "k_proj"),
]


@register("vit")
def vit_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    heads = int(config_get(ckpt, "num_attention_heads"))
    for i, (probe, template, q, k) in enumerate(_LAYOUTS):
        try:
            prefix = find_prefix(ckpt, _PREFIXES, probe)
        except MissingTensor:
            if i == len(_LAYOUTS) - 1:
                raise
            continue
        yield from linear_qk_blocks(ckpt, "encoder", prefix + template, q, k, heads)
        return
