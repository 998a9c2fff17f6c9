"""ALBERT: cross-layer parameter sharing.

The encoder applies num_hidden_layers layers, but they reuse the weights of
num_hidden_groups groups (1 in every released ALBERT) of inner_group_num layers each.
We report the distinct weight sets found in the checkpoint, not the applied depth:
albert-base-v2 yields ONE encoder block (layer 0), not 12. Layer numbers enumerate the
(group, inner layer) pairs in order: layer = rank of (g, j) among those present.
"""

from __future__ import annotations

from . import BI, Attention, Record, Tiny, register
from .sizes import BERT_64

register(
    Record(
        "albert",
        (
            Attention(
                "encoder",
                "encoder.albert_layer_groups.{g}.albert_layers.{j}.attention.{p}.weight",
                qk=("query", "key"),
                prefixes=("albert.", "model.", ""),
                pre_norm=False,
            ),
        ),
        dict(encoder=BI),
        tiny=Tiny("AlbertForMaskedLM", dict(BERT_64, embedding_size=32, num_hidden_groups=1, inner_group_num=1)),
    )
)
