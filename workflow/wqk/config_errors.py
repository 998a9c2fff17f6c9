"""The errors a config.json value causes while a model's blocks are read (a head count that
does not fit the weights, a value of the wrong type), as one line naming the model, the
field(s) and the way out. Wraps the block stream from above the adapters (they call
config_get, which checks head counts as they are read: wqk.checkpoints.config_checks)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .checkpoints.config_checks import FIX, SHAPE_FIELD
from .errors import CorruptCheckpoint, HeadsDoNotFit, WqkError

_CONFIG_CAUSED = (ValueError, TypeError, AttributeError, KeyError, ZeroDivisionError)  # what a bad value raises


def explain_bad_config(ckpt, blocks: Iterable) -> Iterator:
    """The blocks of `ckpt`; an error that a config.json value causes while they are read
    (a head count that does not fit the weights, a value of the wrong type) as one
    CorruptCheckpoint naming the model, the field(s) and the way out. Other errors pass."""
    try:
        yield from blocks
    except Exception as e:
        if not isinstance(e, _CONFIG_CAUSED) or isinstance(e, WqkError) and not isinstance(e, HeadsDoNotFit):
            raise  # not a value's doing, or said already
        caused = " ".join(str(e).split())
        where = f"{ckpt.model_id} (model_type {ckpt.model_type!r})"
        problem = _transformers_problem(ckpt) or _rope_problem(ckpt.config)
        if problem is not None:
            raise CorruptCheckpoint(f"{where}: config.json {problem} ({type(e).__name__}: {caused}); {FIX}") from e
        if isinstance(e, HeadsDoNotFit) or "incompatible q" in caused:
            fields = ", ".join(f"{k}={v!r}" for k, v in _shape_fields(ckpt.config))
            raise CorruptCheckpoint(
                f"{where}: the weights do not fit config.json's {fields or 'head counts'}: {caused} "
                "(per-head shapes are [heads, d, head_dim]); set the head counts to the model's real ones "
                "(its original config.json, e.g. on its hub page)"
            ) from e
        raise


def _shape_fields(config: dict, prefix: str = "") -> list[tuple[str, object]]:
    found = []
    for k, v in config.items():
        if isinstance(v, dict) and not prefix:
            found += _shape_fields(v, f"{k}.")
        elif SHAPE_FIELD.fullmatch(k) and not isinstance(v, dict):
            found.append((prefix + k, v))
    return found


def _transformers_problem(ckpt) -> str | None:
    """What transformers' config class of the model_type finds wrong in config.json (its
    strict type and architecture checks), None when it finds nothing or cannot tell."""
    try:
        from huggingface_hub.errors import StrictDataclassError
        from transformers import CONFIG_MAPPING

        config_class = CONFIG_MAPPING[ckpt.model_type]
    except Exception:  # no transformers, or a model_type it does not know (remote code)
        return None
    try:
        config_class.from_dict(dict(ckpt.config))
    except StrictDataclassError as e:
        return " ".join(str(e).split()).replace("Validation error for field", "field")
    except Exception:
        return None
    return None


def _rope_problem(config: dict) -> str | None:
    """A rotary setting that is text where a number goes (transformers' checks do not look
    inside rope_parameters), None when there is none."""
    for key in ("rope_parameters", "rope_scaling"):
        node = config.get(key)
        for name, value in node.items() if isinstance(node, dict) else ():
            if name not in ("rope_type", "type") and isinstance(value, str):
                return f"field {key}.{name} is {value!r}: a number goes there"
    return None
