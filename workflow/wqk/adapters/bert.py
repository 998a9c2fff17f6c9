"""BERT-style encoders (bert, roberta, xlm-roberta): separate query/key nn.Linear per layer.

Names: [prefix]encoder.layer.{i}.attention.self.{query,key}.weight, with prefix "bert.",
"roberta.", ... when saved from a task head, none for a bare BertModel (e.g. the packaged
MiniLM). A BERT trained as a causal decoder (config is_decoder) reports stack "decoder";
cross-attention layers (add_cross_attention) are read from ...crossattention.self... as "cross".
Post-norm: no gain feeds the attention.
"""

from __future__ import annotations

from . import AR, BI, Attention, Record, Tiny, register
from .sizes import BERT_64

PREFIXES = ("bert.", "roberta.", "model.", "")
SELF = Attention(
    "encoder",
    "encoder.layer.{i}.attention.self.{p}.weight",
    qk=("query", "key"),
    prefixes=PREFIXES,
    pre_norm=False,
    as_decoder="is_decoder",
)
CROSS = Attention(
    "cross",
    "encoder.layer.{i}.crossattention.self.{p}.weight",
    qk=("query", "key"),
    prefixes=PREFIXES,
    pre_norm=False,
    required=False,
)
_ROBERTA = dict(BERT_64, max_position_embeddings=72, pad_token_id=1, bos_token_id=0, eos_token_id=2)

for _mt, _tiny in (
    ("bert", Tiny("BertForMaskedLM", dict(BERT_64))),
    ("roberta", Tiny("RobertaForMaskedLM", dict(_ROBERTA))),
    ("xlm-roberta", Tiny("XLMRobertaForMaskedLM", dict(_ROBERTA))),
):
    register(Record(_mt, (SELF, CROSS), dict(encoder=BI, decoder=AR), tiny=_tiny))
