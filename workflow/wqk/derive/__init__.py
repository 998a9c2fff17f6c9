"""Records derived from the library's own forward, for model types without a hand-written one.

`derive(model_type, fields)` builds the tiny random model of a config (shrink: the checkpoint's
structure kept, sizes shrunk), runs its forward with eager attention under a tracer (trace), reads
each attention call's q and k back to the projections they came from (calls), turns the calls into
a `Record` (infer, assemble), finds the rotary embedding's layout, and runs the logits test that
hand records get (verify) on the tiny model saved and read back through the generic reader. A
record is only returned verified; otherwise `Derivation.category` and `reason` say why not
(calls.CATEGORIES).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..adapters.record import Record, Rotary, Tiny
from .calls import CATEGORIES, AttentionCall, Underivable, attention_calls

__all__ = ["CATEGORIES", "Derivation", "derive"]


@dataclass
class Derivation:
    """A derived record, or why there is none."""

    model_type: str
    record: Record | None = None
    category: str | None = None
    reason: str | None = None
    facts: dict = field(default_factory=dict)  # what the forward showed besides the record (scale, sinks, ...)

    @property
    def ok(self) -> bool:
        return self.record is not None


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


def _rotary_modules(model) -> list[tuple[str, torch.nn.Module]]:
    return [
        (n, m)
        for n, m in model.named_modules()
        if any(b.endswith("inv_freq") for b, _ in m.named_buffers(recurse=False))
    ]


@contextlib.contextmanager
def _no_rotation(model):
    """Every rotary frequency buffer zeroed (cos 1, sin 0: no rotation), restored afterwards."""
    saved = []
    for _, module in _rotary_modules(model):
        for name, buf in module.named_buffers(recurse=False):
            if name.endswith("inv_freq"):
                saved.append((buf, buf.clone()))
                buf.zero_()
    try:
        yield
    finally:
        for buf, value in saved:
            buf.copy_(value)


def _trace(model, inputs):
    from .trace import tracing

    with tracing(model) as trace:
        model(**inputs)
    return trace


def _read_blocks(folder: Path, record: Record):
    from ..adapters.reader import read_blocks, with_extras
    from ..checkpoints import open_checkpoint

    ckpt = open_checkpoint(str(folder))
    return {(b.stack, b.layer): b for b in with_extras(ckpt, read_blocks(ckpt, record), record)}


def _prefixes(cls) -> tuple[str, ...]:
    prefix = getattr(cls, "base_model_prefix", "") or ""
    return (f"{prefix}.", "") if prefix else ("",)


def derive(model_type: str, fields: dict | None = None) -> Derivation:
    """The verified record of model_type (of the structure of config.json fields, when given)."""
    with _quiet():
        try:
            return _derive(model_type, fields)
        except Underivable as e:
            return Derivation(model_type, category=e.category, reason=e.reason)


def _derive(model_type: str, fields: dict | None) -> Derivation:
    from .build import build, forward_inputs, model_class
    from .heads import head_keys
    from .infer import site_facts
    from .shrink import tiny_config

    try:
        config = tiny_config(model_type, fields)
        cls = model_class(config)
        model = build(config, cls)
        inputs = forward_inputs(model)
        with _no_rotation(model):
            trace = _trace(model, inputs)
    except Underivable:
        raise
    except Exception as e:  # whatever transformers raises building or running the tiny model
        raise Underivable("forward", f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}") from e
    calls = attention_calls(trace)
    keys = head_keys(trace, model.config)
    facts = [site_facts(trace, c, keys) for c in calls]
    tiny = Tiny(cls.__name__, _tiny_fields(config))
    from .assemble import record as assemble

    record = assemble(model_type, facts, _prefixes(cls), None, tiny)
    with tempfile.TemporaryDirectory(prefix="wqk-derive-") as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        blocks = _read_blocks(Path(tmp), record)
        from .assemble import layer_numbers

        layers = layer_numbers(facts)
        by_call = _blocks_of(calls, facts, blocks, layers)
        from .verify import check, seen

        scales = [check(b, seen(c)) for c, b in by_call]
        record, rope_facts = _with_rope(model, inputs, record, Path(tmp), trace, calls, facts, layers)
    return Derivation(
        model_type,
        record=record,
        facts=dict(
            scale=sorted({round(s, 9) for s in scales if s == s}),
            prescale=sorted({round(f.factor, 9) for f in facts}),
            position_terms=any(f.position_terms for f in facts),
            extra_logits=max(f.extra_logits for f in facts),
            **rope_facts,
        ),
    )


def _blocks_of(calls: list[AttentionCall], facts, blocks, layers):
    pairs = []
    for c, f in zip(calls, facts):
        key = layers[id(f)]
        block = blocks.get(key)
        if block is None:
            raise Underivable("verify", f"the reader found no {key[0]} layer {key[1]} ({c.call.name})")
        pairs.append((c, block))
    return pairs


def _tiny_fields(config) -> dict:
    d = config.to_diff_dict()
    for k in ("transformers_version", "_attn_implementation", "architectures", "torch_dtype", "dtype"):
        d.pop(k, None)
    return d


def _with_rope(model, inputs, record: Record, folder: Path, trace, calls, facts, layers) -> tuple[Record, dict]:
    """The record with the Rotary under which the forward's own scores (real positions) are the
    rotated form of its blocks; unchanged when the scores need no rotation."""
    from .verify import replayed

    rotary = _rotary_modules(model)
    if not rotary:
        return record, {}
    again = replayed(calls, trace, _trace(model, inputs))
    pairs = [(s, b) for s, (_, b) in zip(again, _blocks_of(calls, facts, _read_blocks(folder, record), layers))]
    needs = [(s, b) for s, b in pairs if not _passes(s, b, False)]
    if not needs:
        return record, {"rope": "none (rotary modules present, scores unrotated)"}
    stacks = {b.stack for _, b in needs}
    if len(stacks) != 1:
        return record, {"rope": f"rotary in several stacks {sorted(stacks)}: left out"}
    stack = stacks.pop()
    for _, module in rotary:
        for layout in ("half", "interleaved"):
            candidate = dataclasses.replace(record, rope=_rotary(model, module, layout, stack))
            try:
                blocks = _read_blocks(folder, candidate)
            except Exception:
                continue
            if all(_passes(s, blocks[(b.stack, b.layer)], True) for s, b in needs):
                return candidate, {"rope": f"{type(module).__name__} ({layout})"}
    return record, {"rope": "rotary, but no layout of 1-d positions fits (left out)"}


def _passes(s, block, with_rope: bool) -> bool:
    from .verify import check

    try:
        check(block, s, with_rope)
        return True
    except Underivable:
        return False


def _rotary(model, module, layout: str, stack: str) -> Rotary:
    from .heads import config_path

    config = getattr(module, "config", None)
    sub = config_path(model.config, config) if config is not None else ""
    package = type(module).__module__.split(".")[-2]
    types = getattr(config, "layer_types", None) if config is not None else None
    per_type = bool(types) and any(hasattr(module, f"{t}_inv_freq") for t in set(types))
    return Rotary(
        model.config.model_type,
        type(module).__name__,
        layout=layout,
        stack=stack,
        sub=(sub or "").rstrip(".") or None,
        per_layer_type=per_type,
        module=package if package != model.config.model_type else None,
    )
