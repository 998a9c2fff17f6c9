"""BERT-style encoders (bert, roberta, xlm-roberta): separate query/key nn.Linear per layer.

Names: [prefix]encoder.layer.{l}.attention.self.{query,key}.weight, with prefix "bert.",
"roberta.", ... when saved from a task head, none for a bare BertModel (e.g. the packaged
MiniLM). A BERT trained as a causal decoder (config is_decoder) reports stack "decoder";
cross-attention layers (add_cross_attention) are read from ...crossattention.self... as "cross".
"""

from __future__ import annotations

from typing import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import config_get, find_prefix, linear_qk_blocks, register

PREFIXES = ["bert.", "roberta.", "model.", ""]
_PROBE = r"encoder\.layer\.\d+\.attention\.self\.(query|key)\.weight"


def bert_like_blocks(ckpt: Checkpoint, prefixes: list[str] = PREFIXES) -> Iterator[AttentionBlock]:
    """Shared by every family that kept BERT's module names (other adapters may reuse it)."""
    prefix = find_prefix(ckpt, prefixes, _PROBE)
    heads = int(config_get(ckpt, "num_attention_heads"))
    stack = "decoder" if ckpt.config.get("is_decoder") else "encoder"
    yield from linear_qk_blocks(
        ckpt, stack, prefix + "encoder.layer.{l}.attention.self.{p}.weight", "query", "key", heads
    )
    yield from linear_qk_blocks(
        ckpt, "cross", prefix + "encoder.layer.{l}.crossattention.self.{p}.weight", "query", "key", heads,
        required=False,
    )


@register("bert", "roberta", "xlm-roberta")
def bert_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    yield from bert_like_blocks(ckpt)
