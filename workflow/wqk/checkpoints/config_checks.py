"""Head counts of config.json that no weight can have, as one line naming the field and the
way out, checked as the adapters read them (`head_count_problem`, from config_get). What a
bad value causes later, while the blocks are read, is explained by wqk.config_errors."""

from __future__ import annotations

import re

# the spellings of a head count (num_attention_heads, n_head, num_heads, num_key_value_heads,
# encoder_attention_heads, ...), and the fields that decide a head's shape with them
HEAD_COUNT = re.compile(r"num_\w*heads|n_heads?|\w*attention_heads")
SHAPE_FIELD = re.compile(rf"{HEAD_COUNT.pattern}|head_dim|d_kv|hidden_size|d_model|n_embd")
FIX = "fix it in config.json (the model's real value is in its original config.json, e.g. on its hub page)"


def head_count_problem(key: str, value, node: dict) -> str | None:
    """Why `value`, read from config field `key` (its sibling fields in `node`), cannot be
    a head count; None when it can, or when `key` is no head count."""
    field = key.rsplit(".", 1)[-1]
    if not HEAD_COUNT.fullmatch(field):
        return None
    counts = value if isinstance(value, list) and value else [value]  # Swin: one count per stage
    for v in counts:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or isinstance(v, float) and not v.is_integer():
            return (
                f"config.json field {key} is {value!r}: a head count is a whole number like 8 (no quotes, no fraction)"
            )
        if v <= 0:
            return f"config.json field {key} is {value!r}: a head count is at least 1"
    heads = node.get("num_attention_heads")
    if "key_value" in field and not isinstance(value, list) and isinstance(heads, int) and heads > 0 and heads % value:
        return (
            f"config.json field {key} is {value!r}, which does not divide num_attention_heads ({heads}): "
            "each key/value head serves an equal group of query heads"
        )
    return None
