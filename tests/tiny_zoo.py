"""Tiny config kwargs per model_type, read from the records (wqk.adapters, `Tiny`): the
adapter tests and the stand-in hub (tests/standin_hub) build their random models from
these. `AutoConfig.for_model(model_type, **tiny_config(model_type))` gives the config;
nested configs are plain dicts."""

from __future__ import annotations

from wqk.adapters import get_record


def tiny_config(model_type: str) -> dict:
    """A copy of the tiny config kwargs of model_type's record."""
    tiny = get_record(model_type).tiny
    if tiny is None:
        raise KeyError(f"record {model_type!r} has no tiny config")
    return dict(tiny.config)
