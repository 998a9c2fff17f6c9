"""The tensor names a model_type's record reads, as a predicate on names: what a hub fetch takes.

`tensor_filter(config)` matches every name that a template of the record's Attentions can
give (q/k or fused weights, biases, query biases, the norm gains feeding the attention,
QK-norm gains, and the biases beside those gains), in every source format of the record, under any of each Attention's name
prefixes ("^"-templates from the root), numbered fields as digits and {p} as either
projection. The hub code (checkpoints.hub, a lower layer) is handed this function by its
callers and calls it on the repo's config.json. No torch: the records are data.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..checkpoints.checkpoint import model_type_of
from ..errors import UnsupportedModelType
from . import get_record
from .record import Attention, Record, template_regex


@dataclass(frozen=True)
class TensorFilter:
    """Whether a tensor name is one the record reads. key names the selection (model_type and
    a hash of the patterns): a hub cache folder records it, so that one fetched with another
    selection (the name heuristic, an older record) is fetched again rather than reused."""

    key: str
    pattern: re.Pattern

    def __call__(self, name: str) -> bool:
        return self.pattern.fullmatch(name) is not None


def _templates(a: Attention) -> list[str]:
    names = [a.weight, a.bias_template, a.q_bias, a.q_scale, a.norm, a.first_norm, a.k_norm, a.k_norm_unless]
    gains = [t for t in (a.norm, a.first_norm, a.k_norm, *(a.qk_norm or ())) if t and t.endswith("weight")]
    # the biases beside the gains: a LayerNorm's says the norm is centred (norm_centred None), a QK
    # LayerNorm's shift is read beside its gain (Persimmon's)
    biases = [t.removesuffix("weight") + "bias" for t in gains]
    return [t for t in (*names, *(a.qk_norm or ()), *biases) if t]


def record_patterns(record: Record) -> list[str]:
    """The full-name regexes of every tensor the record's Attentions name, sorted, unique."""
    patterns = set()
    for attentions in (record.attention, *record.formats.values()):
        for a in attentions:
            for t in _templates(a):
                if t.startswith("^"):
                    patterns.add(template_regex(t[1:], a.qk))
                else:
                    patterns.update(re.escape(prefix) + template_regex(t, a.qk) for prefix in a.prefixes)
    return sorted(patterns)


def tensor_filter(config: dict) -> TensorFilter | None:
    """The predicate on tensor names of the record of config["model_type"]; None when no
    record is registered for it (or it is refused): the caller then picks by its own rule."""
    model_type = model_type_of(config) if isinstance(config, dict) else None
    if not model_type:
        return None
    try:
        record = get_record(model_type, config=config)
    except UnsupportedModelType:
        return None
    patterns = record_patterns(record)
    digest = hashlib.sha256("\n".join(patterns).encode()).hexdigest()[:16]
    return TensorFilter(f"record:{model_type}:{digest}", re.compile("|".join(f"(?:{p})" for p in patterns)))
