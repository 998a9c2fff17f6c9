"""Reformer (LSH attention): known, and not scored.

Its default layers alternate local and LSH self-attention. In an LSH layer the queries and keys
share one projection, each key is scaled to unit length per token, and each query attends only to
the keys hashed into its own bucket: which keys it sees depends on the content, so the logits are
no bilinear form of the token vectors under a fixed mask. Its softmax is written as
exp(logits - logsumexp), which a derivation from the forward does not see as one (it would file
the type as having no attention)."""

from __future__ import annotations

from . import refuse

refuse(
    "reformer",
    "LSH attention: queries and keys share a projection, each key is scaled to unit length, and each "
    "query sees only the keys hashed into its bucket (a mask that depends on the content), so the "
    "logits are not a bilinear form of the token vectors under a fixed mask",
)
