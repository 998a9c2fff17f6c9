"""Gemma 3n's audio encoder (a conformer): known, and not scored.

Its attention caps its logits with a tanh (conf_attention_logit_cap: cap x tanh(logits / cap)),
scales its queries per dimension by a learned softplus, adds relative-position terms, and runs on
blocks of frames. A capped logit is no linear function of q.k, so the logits are not a bilinear
form of the frame vectors. Its forward computes them in a way the derivation does not follow to a
q.k product (it would file the type as having no attention)."""

from __future__ import annotations

from . import refuse

refuse(
    "gemma3n_audio",
    "soft-capped logits (cap x tanh(logits / cap)) with per-dimension query scales and relative-position "
    "terms: the logits are not a bilinear form of the frame vectors",
)
