"""Which forwards to run: the model's own, and each tower of a composite model it did not reach.

A tower is a sub-model with a config of its own inside the root config (a VLM's vision model and
language model, CLIP's text and vision models). The root forward gets every input its signature
and config allow; a composite whose forward needs more (image tokens placed in the text) fails or
skips a tower, and that tower then runs on its own inputs. `plan` decides once; `run` replays the
same forwards (the derivation's pass with rotation off, then with it on).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .build import input_variants
from .heads import config_path
from .trace import Trace, default_dtype, tracing

MODALITY_BY_INPUT = {"pixel_values": "vision", "input_features": "audio", "input_values": "audio", "input_ids": "text"}


@dataclass(frozen=True)
class Tower:
    name: str  # module path
    module: torch.nn.Module
    config: str  # dotted path of its config in the root config
    modality: str


def towers(model) -> list[Tower]:
    """The outermost sub-models whose config is a sub-config of the root's."""
    from transformers import PreTrainedModel

    found: list[Tower] = []
    for name, module in model.named_modules():
        if not name or not isinstance(module, PreTrainedModel) or any(name.startswith(t.name + ".") for t in found):
            continue
        path = config_path(model.config, module.config)
        if path:
            found.append(Tower(name, module, path.rstrip("."), _modality(module, path)))
    return found


def _modality(module, path: str) -> str:
    for word, kind in (("vision", "vision"), ("image", "vision"), ("audio", "audio"), ("speech", "audio"),
                       ("text", "text"), ("language", "text")):  # fmt: skip
        if word in path:
            return kind
    return MODALITY_BY_INPUT.get(getattr(module, "main_input_name", ""), "text")


@dataclass
class Step:
    module: str  # "" for the root
    inputs: dict
    other: dict  # the same shapes, other tokens (or pixels, or sound)
    # torch's default dtype for the forward: float64 for code that makes float tensors without a dtype
    # and overflows them with float64 values (XGLM clamps its logits at torch.full((), finfo(float64).min))
    default: torch.dtype | None = None


def _covered(trace: Trace, tower: Tower) -> bool:
    return any(any(trace.calls[i].name == tower.name for i in s.calls) for s in trace.softmaxes)


def _first_that_runs(model, module, name: str) -> tuple[Step, Trace] | Exception:
    """The first of the module's input variants its forward runs on (with the other tokens' of
    the same variant) and its trace, or the first variant's error."""
    error = None
    variants, others = input_variants(module), input_variants(module, seed=1)
    for inputs, other in zip(variants, others):
        for default in (None, torch.float64):
            try:
                with tracing(model) as trace, default_dtype(default):
                    module(**inputs)
                return Step(name, inputs, other, default), trace
            except Exception as e:
                error = error or e
                if "without overflow" not in str(e):
                    break
    return error


def _has_attention(tower: Tower) -> bool:
    from .build import has_attention_source

    return has_attention_source(tower.module.config.model_type)


def plan(model) -> list[Step]:
    """The forwards that reach every attention of the model; raises the root's error when none runs."""
    steps: list[Step] = []
    trace = error = None
    found = _first_that_runs(model, model, "")
    if isinstance(found, tuple):
        steps.append(found[0])
        trace = found[1]
    else:
        error = found
    for tower in towers(model):
        if trace is not None and _covered(trace, tower):
            continue
        found = _first_that_runs(model, tower.module, tower.name)
        if isinstance(found, tuple):
            steps.append(found[0])
        elif _has_attention(tower):  # a record without this tower's stack would leave it out unsaid
            raise RuntimeError(f"its tower {tower.name} ({tower.module.config.model_type}) could not run: {found}")
    if not steps:
        raise error
    return steps


def run(model, steps: list[Step], other: bool = False) -> Trace:
    """The steps' forwards (on their other inputs), traced as one."""
    modules = dict(model.named_modules())
    with tracing(model) as trace:
        for step in steps:
            with default_dtype(step.default):
                modules[step.module](**(step.other if other else step.inputs))
    return trace


def runs(model, steps: list[Step]) -> tuple[Trace, Trace]:
    """The steps traced on their inputs and on their other inputs."""
    return run(model, steps), run(model, steps, other=True)
