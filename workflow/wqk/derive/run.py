"""Which forwards to run: the model's own, and each tower of a composite model it did not reach.

A tower is a sub-model with a config of its own inside the root config (a VLM's vision model and
language model, CLIP's text and vision models). The root forward gets every input its signature
and config allow; a composite whose forward needs more (image tokens placed in the text) fails or
skips a tower, and that tower then runs on its own inputs. `plan` decides once; `run` replays the
same forwards (the derivation's pass with rotation off, then with it on).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import torch

from .build import ATTENDS, has_forward
from .heads import config_path
from .inputs import input_variants
from .trace import Trace, default_dtype, tracing

# float32 tensors the forward makes itself that meet float64 weights (or float64's minimum filled into
# one: FSMT's mask, CANINE's, whose open positions then score 0 x -inf): the derivation retries in float32
DTYPE_CLASH = re.compile(
    r"same dtype|should be the same|float != double|Float and Double|Float but found Double|float without overflow"
    r"|scores NaN in float64"
)


def nan_scores(trace: Trace) -> None:
    """Raise where a float64 forward's softmax input is NaN at every position (a float32 mask
    times float64's minimum: CANINE's), which the derivation retries in float32."""
    for softmax in trace.softmaxes:
        scores = softmax.scores
        if scores.dtype == torch.float64 and scores.numel() and bool(scores.isnan().all()):
            raise FloatingPointError("attention scores NaN in float64 (a float32 mask of float64's minimum)")


MODALITY_BY_INPUT = {
    "pixel_values": "vision",
    "pixel_values_videos": "vision",  # V-JEPA 2, VideoPrism
    "input_features": "audio",
    "input_values": "audio",
    "audio_mel": "audio",  # Gemma 3n's audio tower
    "input_ids": "text",
    "past_values": "time series",
}


# transformers' declared input modalities, in the paper's words
DECLARED_MODALITY = {"image": "vision", "video": "vision", "audio": "audio", "text": "text"}


def declared_modality(model) -> str:
    """The modality of a model's main input; where that name is "input_ids", inherited from a class
    above the one that declares a single modality (input_modalities: Granite Speech's encoder,
    Llama 4's and Qwen2-VL's vision towers), the declared one. A text model that names its input
    itself (AIMv2's, below a family base that declares images) stays text."""
    main = main_input(model)
    mro = type(model).__mro__ if not isinstance(model, type) else model.__mro__

    def setter(attribute):
        return next((i for i, c in enumerate(mro) if attribute in vars(c)), len(mro))

    declared = getattr(model, "input_modalities", ())
    kinds = {DECLARED_MODALITY.get(d, "text") for d in ((declared,) if isinstance(declared, str) else declared or ())}
    if main == "input_ids" and len(kinds) == 1 and setter("input_modalities") <= setter("main_input_name"):
        return kinds.pop()
    return input_modality(main)


def main_input(model) -> str:
    """A model's main input name ("" where it has none; of a list of names, OneFormer's, the first)."""
    main = getattr(model, "main_input_name", "")
    if isinstance(main, (list, tuple)):
        return main[0] if main else ""
    return main


def input_modality(main: str) -> str:
    """The modality of a main input name; text where the name says none."""
    return MODALITY_BY_INPUT.get(main, "text")


# a composite's methods that run a modality's tower and projector alone, without the placeholder tokens
# its forward needs in the text (Fun-ASR Nano's projector of self-attention layers)
FEATURE_METHODS = ("get_audio_features", "get_image_features", "get_video_features")


@dataclass(frozen=True)
class Tower:
    name: str  # module path
    module: torch.nn.Module
    config: str  # dotted path of its config in the root config
    modality: str


def towers(model) -> list[Tower]:
    """The outermost sub-models whose config is a sub-config of the root's."""
    every = nested_towers(model)
    return [t for t in every if not any(t.name.startswith(o.name + ".") for o in every)]


def nested_towers(model) -> list[Tower]:
    """Every sub-model whose config is a sub-config of the root's, outer ones first (ColPali's
    PaliGemma, then the SigLIP vision model inside it)."""
    from transformers import PreTrainedModel

    found: list[Tower] = []
    for name, module in model.named_modules():
        if name and isinstance(module, PreTrainedModel) and (path := config_path(model.config, module.config)):
            found.append(Tower(name, module, path.rstrip("."), _modality(module, path)))
    return found


def attention_modules(model) -> list[tuple[str, torch.nn.Module, bool]]:
    """(name, module, whether it is cross-attention) of every module named an attention with
    projections of its own."""
    out = []
    for name, module in model.named_modules():
        projections = any(isinstance(c, torch.nn.Linear) for c in module.children())
        if name and "Attention" in type(module).__name__ and projections:
            cross = "Cross" in type(module).__name__ or bool(re.search(r"cross|encoder_attn", name))
            out.append((name, module, cross))
    return out


def _modality(module, path: str) -> str:
    for word, kind in (("vision", "vision"), ("image", "vision"), ("audio", "audio"), ("speech", "audio"),
                       ("text", "text"), ("language", "text")):  # fmt: skip
        if word in path:
            return kind
    return declared_modality(module)


@dataclass
class Step:
    module: str  # "" for the root
    inputs: dict
    other: dict  # the same shapes, other tokens (or pixels, or sound)
    # torch's default dtype for the forward: float64 for code that makes float tensors without a dtype
    # and overflows them with float64 values (XGLM clamps its logits at torch.full((), finfo(float64).min))
    default: torch.dtype | None = None
    method: str = "__call__"  # the module's method the step calls (a composite's get_audio_features)


def _reached(trace: Trace) -> tuple[set[str], set[str]]:
    """(the modules that ran, those a softmax ran inside) in a trace."""
    return {c.name for c in trace.calls}, {trace.calls[i].name for s in trace.softmaxes for i in s.calls}


def _first_that_runs(model, module, name: str, method: str = "__call__") -> tuple[Step, Trace] | Exception:
    """The first of the module's input variants its forward (or method) runs on (with the other
    tokens' of the same variant) and its trace, or the first variant's error (a dtype clash before
    it: that variant's inputs fit, and float32 may run them)."""
    error = None
    variants, others = _for_method(module, method, 0), _for_method(module, method, 1)
    for inputs, other in zip(variants, others):
        for default in (None, torch.float64):
            try:
                return Step(name, inputs, other, default, method), _traced(model, module, method, inputs, default)
            except Exception as e:
                error = e if DTYPE_CLASH.search(str(e)) and not DTYPE_CLASH.search(str(error)) else error or e
                if not FLOAT32_MADE.search(str(e)):
                    break
    return error


def _traced(model, module, method: str, inputs: dict, default) -> Trace:
    """The trace of one call of the module's method; under SDPA where its attention has no eager
    path (Qwen2.5-Omni's DiT looks its attention function up with no fallback: KeyError 'eager')."""

    def run() -> Trace:
        with tracing(model) as trace, default_dtype(default):
            getattr(module, method)(**inputs)
        return trace

    try:
        return run()
    except KeyError as e:
        if e.args != ("eager",) or not callable(getattr(module, "set_attn_implementation", None)):
            raise
    module.set_attn_implementation("sdpa")
    return run()


def _for_method(module, method: str, seed: int) -> list[dict]:
    """The input variants of the module's forward, or of another method of it (made from that
    method's signature)."""
    return input_variants(module if method == "__call__" else _MethodView(module, method), seed=seed)


class _MethodView:
    """A module whose forward is one of its other methods, for input_variants to read."""

    def __init__(self, module, method: str):
        self._module = module
        self.forward = getattr(module, method)

    def __getattr__(self, name):
        return getattr(self._module, name)


# errors of tensors a forward makes without a dtype (float32) beside float64 ones: XGLM's overflow,
# DAB-DETR's decoder queries of torch.zeros fed to float64 layers
FLOAT32_MADE = re.compile(r"without overflow|must have the same dtype|Float and Double|expected scalar type Double")


# what a model with no forward of its own runs on an image: a VQ-VAE's encoder (Chameleon's, Janus's),
# which its composite runs to turn an image into tokens
ENCODE_METHODS = ("encode",)


def _root_method(model) -> str | None:
    """The method a step calls on a model (the root, a tower): its forward, else the encoder of a
    model without one (Apertus 1.5's vision tokenizer); None for a model with neither."""
    if has_forward(type(model)):
        return "__call__"
    return next((m for m in ENCODE_METHODS if callable(getattr(model, m, None))), None)


def _has_attention(tower: Tower) -> bool:
    """Whether the tower's type's code computes a softmax over logits, and one of the classes of
    its own modules does (GLM-Image's VQ-VAE, a quantizer of states its vision model made, holds
    none: its type's module does, for the composite's other towers)."""
    from .build import has_attention_source

    return has_attention_source(tower.module.config.model_type) and module_attends(tower.module)


def module_attends(module) -> bool:
    """Whether the code of some class among the module's own modules computes attention (an
    unreadable class's source counts as one that does)."""
    import inspect

    for cls in {type(m) for m in module.modules()}:
        try:
            if ATTENDS.search(inspect.getsource(cls)):
                return True
        except (OSError, TypeError):
            return True
    return False


def plan(model) -> list[Step]:
    """The forwards that reach every attention of the model; raises the root's error when none runs,
    or when its towers leave a self-attention out.
    A tower runs on its own where the forwards so far ran no softmax inside it, or left one of its
    self-attention modules out: the outer tower first, then one inside it that still needs it
    (ColPali's vision model, which PaliGemma's text-only forward does not reach)."""
    steps: list[Step] = []
    ran: set[str] = set()  # the modules the steps so far ran
    softmax: set[str] = set()  # those a softmax ran inside
    error = None

    def step(found) -> None:
        steps.append(found[0])
        modules, around = _reached(found[1])
        ran.update(modules)
        softmax.update(around)

    found = _first_that_runs(model, model, "", _root_method(model) or "__call__")
    if isinstance(found, tuple):
        step(found)
    else:
        error = found
    attentions = [name for name, _, cross in attention_modules(model) if not cross]
    failed = []  # (tower, its error): raised unless towers inside it reach its attention
    for tower in nested_towers(model):
        left_out = [a for a in attentions if a.startswith(tower.name + ".") and a not in ran]
        if steps and tower.name in softmax and not left_out:
            continue
        method = _root_method(tower.module)
        if method is None:
            continue  # a tower with neither forward nor encode: reached through the root's methods, or
            # refused as an attention that never ran
        found = _first_that_runs(model, tower.module, tower.name, method)
        if isinstance(found, tuple):
            step(found)
        elif _has_attention(tower) and not any(tower.name.startswith(s.module + ".") for s in steps if s.module):
            failed.append((tower, found))
    every = [name for name, _, _ in attention_modules(model)]
    for tower, found in failed:  # Qwen2.5-Omni's token2wav, whose DiT inside it runs on its own
        if any(a.startswith(tower.name + ".") and a not in ran for a in every):
            own = f"; its own forward: {type(error).__name__}: {error}" if error is not None else ""
            raise RuntimeError(f"its tower {tower.name} ({tower.module.config.model_type}) could not run: {found}{own}")
    for name, module in _shared_config_models(model):
        if any(a.startswith(name + ".") and a not in ran for a in attentions):
            found = _first_that_runs(model, module, name)
            if isinstance(found, tuple):
                step(found)
    for method in FEATURE_METHODS:
        if any(a not in ran for a in attentions) and callable(getattr(model, method, None)):
            found = _first_that_runs(model, model, "", method)
            if isinstance(found, tuple) and _reached(found[1])[0] - ran:
                step(found)
    for name, module in [("", model)] + [(t.name, t.module) for t in nested_towers(model)]:
        prefix = name + "." if name else ""
        if any(a.startswith(prefix) and a not in ran for a in attentions) and (found := _decoded(model, module, name)):
            step(found)
    if error is not None and (not steps or any(a not in ran for a in attentions)):
        raise error  # the root's, where it left attention the towers do not reach: the derivation retries
    return steps


def _decoded(model, module, name: str) -> tuple[Step, Trace] | None:
    """A VQ-VAE's decoder run on codes (Emu3's, whose forward only encodes; its middle block
    attends over the latent grid): decode on the codes encode gives the module's first input
    variant that it encodes, and on other codes of the same grid; None where the module has no
    encode and decode, or they do not run."""
    if not all(callable(getattr(module, m, None)) for m in ("encode", "decode")):
        return None
    for inputs in _for_method(module, "encode", 0):
        try:
            with torch.no_grad():
                codes = _codes(module.encode(**inputs))
            parameter = next(iter(inspect.signature(module.decode).parameters))
            g = torch.Generator().manual_seed(1)
            other = torch.randint(0, _codebook(module.config, codes), codes.shape, generator=g)
            step = Step(name, {parameter: codes}, {parameter: other}, method="decode")
            with tracing(model) as trace:
                module.decode(**step.inputs)
            return step, trace
        except Exception:  # whatever the module raises on inputs it does not take: the next variant
            continue
    return None


def _codebook(config, codes: torch.Tensor) -> int:
    """How many codes the VQ-VAE's codebook holds (its config's count; past the largest code seen)."""
    counts = (getattr(config, k, None) for k in ("codebook_size", "num_embeddings", "n_embed"))
    return next((n for n in counts if isinstance(n, int) and n > 0), int(codes.max()) + 1)


def _codes(encoded) -> torch.Tensor:
    """The integer codes an encode returned: its first integer tensor, or list of them stacked."""
    values = (
        encoded.values() if hasattr(encoded, "values") else encoded if isinstance(encoded, (tuple, list)) else [encoded]
    )
    for v in values:
        if isinstance(v, (list, tuple)) and v and all(isinstance(t, torch.Tensor) for t in v):
            v = torch.stack(list(v))
        if isinstance(v, torch.Tensor) and not v.is_floating_point():
            return v
    raise ValueError("encode returned no integer codes")


def _shared_config_models(model) -> list[tuple[str, torch.nn.Module]]:
    """The sub-models built on the root's own config or a copy of it, no tower of a sub-config
    (SeamlessM4T's speech encoder, which its forward runs only instead of its text encoder; its
    text-to-unit model, on a copy that reads the t2u_ fields), outer ones first."""
    from transformers import PreTrainedModel

    return [
        (name, module)
        for name, module in model.named_modules()
        if name and isinstance(module, PreTrainedModel) and not config_path(model.config, module.config)
    ]


def run(model, steps: list[Step], other: bool = False) -> Trace:
    """The steps' forwards (on their other inputs), traced as one."""
    modules = dict(model.named_modules())
    with tracing(model) as trace:
        for step in steps:
            with default_dtype(step.default):
                getattr(modules[step.module], step.method)(**(step.other if other else step.inputs))
    return trace


def runs(model, steps: list[Step]) -> tuple[Trace, Trace]:
    """The steps traced on their inputs and on their other inputs."""
    return run(model, steps), run(model, steps, other=True)


def _masked_everywhere(trace: Trace) -> bool:
    """Whether a mask took every logit of one of the forward's softmaxes (-inf, or below -1e30;
    the softmaxes after it read its NaN)."""
    return any(s.scores.numel() and bool((s.scores < -1e30).all()) for s in trace.softmaxes)


def packs_samples(trace: Trace) -> bool:
    """Whether a module of the forward took its samples' bounds in one packed sequence
    (cu_seqlens: Qwen3-ASR's audio encoder, which then attends within each sample's part)."""
    return any(isinstance(c.kwargs, dict) and "cu_seqlens" in c.kwargs for c in trace.calls)


def unmasked_runs(model, steps: list[Step]) -> tuple[Trace, Trace]:
    """runs, again under SDPA where eager attention masked every logit: a forward that reads its
    mask as booleans (Nemotron ASR streaming's encoder: mask.logical_not()) inverts eager's
    additive mask, 0 at the open positions, and SDPA's mask is boolean. As under eager where
    the model has no SDPA or its forward fails under it."""
    traces = runs(model, steps)
    if not _masked_everywhere(traces[0]):
        return traces
    try:
        model.set_attn_implementation("sdpa")
        return runs(model, steps)
    except Exception:  # whatever transformers raises switching or running it
        model.set_attn_implementation("eager")
        return traces
