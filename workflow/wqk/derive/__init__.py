"""Records derived from the library's own forward, for model types without a hand-written one.

`derive(model_type, fields)` builds the tiny random model of a config (shrink: the checkpoint's
structure kept, sizes shrunk), runs its forward with eager attention under a tracer (trace; SDPA
where eager's mask comes out inverted: run.unmasked_runs), and hands the traces to
verified.record_of: the calls read back to their projections (calls), turned into a `Record`
(infer, assemble), the rotary embedding's layout found, and the logits test that hand records get
(verify) run on the tiny model saved and read back through the generic reader.
A timm architecture ("timm:" model types) is built by timm instead (timm.py). A record is only
returned verified; otherwise `Derivation.category` and `reason` say why not (calls.CATEGORIES).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import traceback
import warnings
from pathlib import Path

import torch

from ..adapters.record import Tiny
from ..checkpoints.checkpoint import TIMM
from ..errors import UnsupportedModelType
from .calls import CATEGORIES, Underivable
from .run import DTYPE_CLASH, nan_scores
from .verified import Derivation, no_rotation, record_of

__all__ = ["CATEGORIES", "Derivation", "derive"]


@contextlib.contextmanager
def _quiet():
    log = logging.getLogger("transformers")
    level = log.level
    log.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            log.setLevel(level)


def _task_class(config, fields: dict | None):
    """The class config.json's architectures names (a task head: its checkpoint's names and
    prefix), where transformers has it for this config; else None."""
    import transformers

    for name in (fields or {}).get("architectures") or ():
        cls = getattr(transformers, str(name), None)
        if (
            isinstance(cls, type)
            and issubclass(cls, transformers.PreTrainedModel)
            and isinstance(config, cls.config_class)
        ):
            return cls
    return None


def derive(model_type: str, fields: dict | None = None) -> Derivation:
    """The verified record of model_type (of the structure of config.json fields, when given)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model's ops: threads cost more than they bring
    try:
        return _derive_quietly(model_type, fields)
    finally:
        torch.set_num_threads(threads)


def _derive_quietly(model_type: str, fields: dict | None) -> Derivation:
    with _quiet():
        first = _outcome(model_type, fields)
        if not first.ok and first.reason.startswith(CANNOT_SAVE):
            # a save-time conversion that reads the key heads as query heads (Gradium Phonon's
            # PermuteForRope): a tiny model with as many of each, as its checkpoints have
            second = _outcome(model_type, fields, kv_equal=True)
            if second.ok:
                return second
        return first


def _outcome(model_type: str, fields: dict | None, kv_equal: bool = False) -> Derivation:
    try:
        return _derive(model_type, fields, kv_equal)
    except Underivable as e:
        return Derivation(model_type, category=e.category, reason=e.reason)
    except (TimeoutError, MemoryError, UnsupportedModelType):  # the worker's time limit, the machine's
        raise  # memory, a library not installed (timm): not the layout's
    except Exception as e:  # past the forward: a layout the derivation's own steps cannot follow
        where = traceback.extract_tb(e.__traceback__)[-1]
        reason = f"{type(e).__name__} at {Path(where.filename).name}:{where.lineno}: {str(e)[:200]}"
        return Derivation(model_type, category="layout", reason=reason)


FILLS = 4  # missing config fields filled in, at most
CANNOT_SAVE = "transformers cannot save its tiny model"


def _derive(model_type: str, fields: dict | None, kv_equal: bool = False) -> Derivation:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    from .build import NoModelClass, build, model_class
    from .heads import head_keys
    from .inputs import one_sample
    from .run import packs_samples, plan, unmasked_runs
    from .shrink import filled, tiny_config

    if model_type.startswith(TIMM):
        from .timm import derive_timm

        return derive_timm(model_type, fields)
    if model_type not in CONFIG_MAPPING_NAMES:
        import transformers

        raise Underivable(
            "unknown type",
            f"transformers {transformers.__version__} has no config class for it (remote code, or a newer release)",
        )
    error, built = None, None
    # the second try: as many key heads as query heads; the third, in float32, where the forward
    # makes float32 tensors of its own that meet float64 weights (Inkling 2, FastSpeech 2's conformer)
    # or that overflow with float64 values (FSMT, CANINE)
    # (kv_equal: every try with as many key heads as query heads)
    for equal, dtype in dict.fromkeys(((kv_equal, torch.float64), (True, torch.float64), (kv_equal, torch.float32))):
        if dtype == torch.float32 and not DTYPE_CLASH.search(str(error)):
            continue
        try:
            config = tiny_config(model_type, fields, equal)
            cls = _task_class(config, fields) or model_class(config)
            for repair in range(FILLS + 1):  # fields transformers reads that the config class lacks
                try:
                    model = built = build(config, cls, dtype)
                    with no_rotation(model):
                        steps = plan(model)
                        trace, again = unmasked_runs(model, steps)
                    nan_scores(trace)
                    break
                except AttributeError as e:
                    if repair == FILLS or not filled(config, e):
                        raise
            break
        except Exception as e:  # whatever transformers raises building or running the tiny model
            error = error or e
    else:
        if isinstance(error, NoModelClass):  # no model class to build (a part of a composite)
            raise Underivable("no model", str(error)) from error
        message = " ".join(line.strip() for line in str(error).splitlines())[:300]  # a validator's cause: line 2
        from .build import has_attention_source

        if not has_attention_source(model_type):
            raise Underivable(
                "no attention",
                f"its modeling code computes no softmax over logits (its source; its tiny model: {message})",
            )
        from .run import module_attends

        if built is not None and not module_attends(built):  # GLM-Image's VQ-VAE: a quantizer alone
            raise Underivable(
                "no attention",
                f"no class of its model's modules computes a softmax over logits (their code; its tiny model: {message})",
            )
        raise Underivable("forward", f"{type(error).__name__}: {message}") from error
    base = getattr(cls, "base_model_prefix", "") or ""
    tiny = Tiny(cls.__name__, _tiny_fields(config))
    keys = functools.partial(head_keys, root=model.config)
    try:
        return record_of(model_type, model, steps, (trace, again), keys, _save_pretrained, base, tiny)
    except Underivable:
        if not packs_samples(trace):
            raise
    with one_sample():  # its samples packed into one sequence: one sample, one product an attention
        with no_rotation(model):
            steps = plan(model)
            trace, again = unmasked_runs(model, steps)
        return record_of(model_type, model, steps, (trace, again), keys, _save_pretrained, base, tiny)


def _save_pretrained(model, folder: Path) -> None:
    from ..progress import hub_bars

    try:
        with hub_bars():  # no "Writing model shards" frames
            model.save_pretrained(folder, safe_serialization=True)
    except Exception as e:  # a save-time weight conversion that does not fit the tiny model
        raise Underivable("layout", f"{CANNOT_SAVE}: {type(e).__name__}: {e}") from e


def _tiny_fields(config) -> dict:
    """The tiny config's fields that differ from its class's defaults (what Tiny(...) needs)."""
    try:
        defaults = type(config)().to_dict()
    except Exception:  # a config class that needs arguments
        defaults = {}
    d = {k: v for k, v in config.to_dict().items() if defaults.get(k, object()) != v}
    for k in ("transformers_version", "_attn_implementation", "architectures", "torch_dtype", "dtype", "model_type"):
        d.pop(k, None)
    return d
