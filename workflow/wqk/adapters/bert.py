"""BERT-style encoders (bert, roberta, xlm-roberta): separate query/key nn.Linear per layer.

Names: [prefix]encoder.layer.{i}.attention.self.{query,key}.weight, with prefix "bert.",
"roberta.", ... when saved from a task head, none for a bare BertModel (e.g. the packaged
MiniLM). A BERT trained as a causal decoder (config is_decoder) reports stack "decoder";
cross-attention layers (add_cross_attention) are read from ...crossattention.self... as "cross".
"""

from __future__ import annotations

from collections.abc import Iterator

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from . import AR, BI, register
from .common import config_get, find_prefix, qk_stack, template_regex

PREFIXES = ["bert.", "roberta.", "model.", ""]
QK = ("query", "key")
SELF = "encoder.layer.{i}.attention.self.{p}.weight"
CROSS = "encoder.layer.{i}.crossattention.self.{p}.weight"


@register("bert", "roberta", "xlm-roberta", encoder=BI, decoder=AR)
def bert_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    prefix = find_prefix(ckpt, PREFIXES, template_regex(SELF, QK))
    heads = int(config_get(ckpt, "num_attention_heads"))
    stack = "decoder" if ckpt.config.get("is_decoder") else "encoder"
    yield from qk_stack(ckpt, stack, SELF, heads, qk=QK, prefixes=[prefix])
    yield from qk_stack(ckpt, "cross", CROSS, heads, qk=QK, prefixes=[prefix], required=False)
