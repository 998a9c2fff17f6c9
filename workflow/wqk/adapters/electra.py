"""ELECTRA: BERT's layout (separate query/key nn.Linear with biases, post-norm) under the
prefix "electra." (google/electra-* discriminators and generators alike). Its embeddings
may be narrower than the hidden size (embedding_size: a projection before the encoder,
which x already includes).
"""

from __future__ import annotations

import dataclasses

from . import AR, BI, Record, Tiny, register
from .bert import CROSS, SELF
from .sizes import BERT_64

_PREFIXES = ("electra.", "")

register(
    Record(
        "electra",
        tuple(dataclasses.replace(a, prefixes=_PREFIXES) for a in (SELF, CROSS)),
        dict(encoder=BI, decoder=AR),
        tiny=Tiny("ElectraForPreTraining", dict(BERT_64, embedding_size=32)),
    )
)
