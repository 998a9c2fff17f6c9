"""A derived record as the source of a record module (wqk records derive TYPE): the fields that
differ from their defaults, so that it reads like the hand-written ones."""

from __future__ import annotations

import dataclasses
import pprint

from ..adapters.record import AR, Attention, Rotary


def _call(obj, positional: tuple[str, ...], indent: str) -> str:
    args = [repr(getattr(obj, f)) for f in positional]
    for f in dataclasses.fields(obj):
        if f.name in positional or f.name == "only_if":
            continue
        value = getattr(obj, f.name)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if value != default:
            args.append(f"{f.name}={value!r}")
    inner = f",\n{indent}    ".join(args)
    return f"{type(obj).__name__}(\n{indent}    {inner},\n{indent})"


def _library(model_type: str) -> str:
    """The library whose forward the record was derived from, with its version."""
    from ..checkpoints.checkpoint import TIMM

    if model_type.startswith(TIMM):
        from .timm import version

        return f"timm {version()}"
    import transformers

    return f"transformers {transformers.__version__}"


def record_source(derivation) -> str:
    r = derivation.record
    facts = "; ".join(f"{k}: {v}" for k, v in sorted(derivation.facts.items()))
    attentions = "".join(f"            {_call(a, ('stack', 'weight'), ' ' * 12)},\n" for a in r.attention)
    objectives = ", ".join(f"{s}={'AR' if o == AR else 'BI'}" for s, o in r.objectives.items())
    rope = f"        rope={_call(r.rope, ('family', 'rotary_class'), ' ' * 8)},\n" if isinstance(r.rope, Rotary) else ""
    tiny_config = pprint.pformat(r.tiny.config, indent=1, width=100, sort_dicts=True).replace("\n", "\n" + " " * 12)
    names = sorted({"Attention", "Record", "Tiny", "register", *(["Rotary"] if rope else []),
                    *(["AR"] if "AR" in objectives else []), *(["BI"] if "BI" in objectives else [])})  # fmt: skip
    assert all(isinstance(a, Attention) for a in r.attention)
    family = f"\n            family={r.tiny.family!r}," if r.tiny.family else ""
    return f'''"""{r.model_type}: derived by `wqk records derive {r.model_type}` from {_library(r.model_type)}'s own
forward on a tiny model, and verified by the logits test there. What the forward showed: {facts or "-"}.
"""

from __future__ import annotations

from . import {", ".join(names)}

register(
    Record(
        {r.model_type!r},
        (
{attentions}        ),
        dict({objectives}),
{rope}        tiny=Tiny(
            {r.tiny.architecture!r},
            {tiny_config},{family}
        ),
    )
)
'''
