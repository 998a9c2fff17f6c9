"""Check an adapter's AttentionBlock against the attention logits the model itself computes.

The claim checked: for every call of an attention module during a forward pass, with the
module's own query-side input x [B, Tq, d_q] and key-side input y [B, Tk, d_k], the
pre-softmax scores the module computes are

    S[b, h, i, j] = scale * x[b, i] @ Q_h @ K_{kv(h)}^T @ y[b, j]      kv(h) = h // group

for every head h at every position the mask leaves open, to float tolerance. Q_h, K_h are
the block's factors read from the saved checkpoint; the model is an instance loaded from
the same checkpoint. A wrong split of a fused projection, a missing transpose, tiled
instead of repeated GQA key heads or swapped query/key sides all fail this check.

How the scores are captured (no model-specific code): `capture(module)` puts a forward
pre-hook on the attention module (recording its args/kwargs, hence x and y, which already
include absolute position embeddings) and, while that module runs, wraps
torch.nn.functional.softmax / torch.softmax / Tensor.softmax to record their input: in
eager attention that is exactly the [B, H, Tq, Tk] score tensor, scale and mask included.

Usage (see tests/test_adapters_core.py for complete recipes):

    check_all(folder, inputs, modules)             # every stack and layer of a saved model

or step by step:

    block = next(adapter_blocks(open_checkpoint(str(folder))))
    model = load_for_check(folder)                 # eager, eval, float64, biases zeroed
    module = model.bert.encoder.layer[0].attention.self
    with capture(module) as calls:
        model(input_ids=ids)                       # rotary models: position_ids=zeros
    check(block, calls)                            # raises AssertionError on mismatch

or `check_module(block, module, lambda: model(input_ids=ids))` for the two steps at once,
or `check_modules([(block, module), ...], run)` for every layer and stack in one forward.
`compare(block, x, y, scores, scale)` is the comparison itself, for scores captured some
other way (tests/test_adapters_paper.py captures x, y and the scores around the q/k
projections instead).

What the model must allow (and what to do otherwise):
- eager attention: load with attn_implementation="eager" (sdpa/flash never call softmax;
  `check` then fails with "no softmax captured").
- biases: q/k biases add terms the bilinear form leaves out; `prepare` zeroes every
  parameter whose name ends in ".bias" (harmless elsewhere: x is captured at the module).
- position effects between q and k must vanish: rotary -> pass position_ids of zeros
  (cos 1, sin 0: identity; RoPE variants whose cos/sin carry an attention_scaling factor f
  give scale * f**2: pass scale=); T5-style learned relative biases -> `prepare` zeroes
  every parameter named "*relative_attention_bias*"; other additive biases (ALiBi):
  pass `offset=` a callable returning the tensor the model adds.
- the scale: `scale=None` uses the module's `scaling` attribute (transformers 5 modules
  carry the overall factor there: 1/sqrt(k), 1.0 for T5, GPT-2's inverse-layer factor,
  Whisper's pre-scaled queries), else 1/sqrt(k).
- query/key inputs: by default x is kwargs["hidden_states"] or the first positional
  argument, y is kwargs["key_value_states"] or kwargs["encoder_hidden_states"] (cross-
  attention) or else x. Pass query_input= / key_input= callables taking a Call for other
  signatures (e.g. separate query/key/value arguments).
- a module called several times (ALBERT's shared layer) is checked on every call.
- architectures whose logits are not bilinear in x (QK-norm: Qwen3, OLMo2, Gemma 3) fail
  by design: the factors cannot represent them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from wqk.adapters import get_adapter
from wqk.blocks import AttentionBlock
from wqk.checkpoints import open_checkpoint


def adapter_blocks(ckpt):
    """The blocks the registered adapter of ckpt's model_type yields (weights only)."""
    return get_adapter(ckpt.model_type, ckpt.model_id)(ckpt)


@dataclass
class Call:
    """One call of the attention module: its inputs and the softmax inputs seen inside it."""

    module: torch.nn.Module
    args: tuple
    kwargs: dict
    softmax_inputs: list[torch.Tensor] = field(default_factory=list)


# learned relative-position tables added to the scores (T5, DeBERTa, WavLM, SpeechT5, BEiT/Swin, SAM)
POSITION_TABLES = re.compile(
    r"relative_attention_bias|relative_position_bias_table|rel_embeddings\.weight|rel_attn_embed\.weight"
    r"|rel_pos_[hw]$|pe_k\.weight"
)


def prepare(model: torch.nn.Module, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """Eval mode, dtype (float64: tolerance near machine precision), biases and learned
    relative position tables (POSITION_TABLES) zeroed. Returns the model (changed in place)."""
    model.eval().to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias") or POSITION_TABLES.search(name):
                p.zero_()
    return model


def load_for_check(folder, architecture: str | None = None, dtype: torch.dtype = torch.float64):
    """The transformers model saved in folder (class from config.json's architectures
    unless given), with eager attention, prepared by `prepare`."""
    import json
    from pathlib import Path

    import transformers

    cfg = json.loads((Path(folder) / "config.json").read_text())
    cls = getattr(transformers, architecture or cfg["architectures"][0])
    model = cls.from_pretrained(folder, attn_implementation="eager", experts_implementation="eager")
    return prepare(model, dtype)


@contextlib.contextmanager
def capture(module: torch.nn.Module):
    """Record every call of `module` (inputs and softmax inputs) while the block runs."""
    with capture_many([module]) as calls:
        yield calls[0]


@contextlib.contextmanager
def capture_many(modules: list[torch.nn.Module]):
    """capture() for several modules during one forward pass: yields one list of Calls per
    module, in order. A softmax is credited to the innermost attention call running."""
    calls: list[list[Call]] = [[] for _ in modules]
    active: list[Call] = []
    state = {"in_softmax": False}

    def hooks(i):
        def pre_hook(mod, args, kwargs):
            call = Call(mod, args, dict(kwargs))
            calls[i].append(call)
            active.append(call)

        def post_hook(mod, args, kwargs, output):
            active.pop()

        return pre_hook, post_hook

    def wrap(fn):
        def wrapper(*args, **kwargs):
            # functional.softmax calls Tensor.softmax: record the outermost call only
            if active and not state["in_softmax"]:
                active[-1].softmax_inputs.append(args[0].detach().clone())
            outer = state["in_softmax"]
            state["in_softmax"] = True
            try:
                return fn(*args, **kwargs)
            finally:
                state["in_softmax"] = outer

        return wrapper

    f = torch.nn.functional
    saved = (f.softmax, torch.softmax, torch.Tensor.__dict__.get("softmax"), torch.Tensor.softmax)
    handles = []
    for i, module in enumerate(modules):
        pre, post = hooks(i)
        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(module.register_forward_hook(post, with_kwargs=True, always_call=True))
    f.softmax, torch.softmax, torch.Tensor.softmax = wrap(saved[0]), wrap(saved[1]), wrap(saved[3])
    try:
        with torch.no_grad():
            yield calls
    finally:
        for h in handles:
            h.remove()
        f.softmax, torch.softmax = saved[0], saved[1]
        if saved[2] is None:
            del torch.Tensor.softmax
        else:
            torch.Tensor.softmax = saved[2]


def default_query_input(call: Call) -> torch.Tensor:
    if "hidden_states" in call.kwargs:
        return call.kwargs["hidden_states"]
    return call.args[0]


def default_key_input(call: Call) -> torch.Tensor:
    for key in ("key_value_states", "encoder_hidden_states"):
        if call.kwargs.get(key) is not None:
            return call.kwargs[key]
    return default_query_input(call)


def expected_scores(block: AttentionBlock, x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
    """scale * (x Q_h)(y K_kv(h))^T for all heads: [B, H, Tq, Tk] in float64."""
    q = torch.einsum("bid,hdk->bhik", x.double(), block.q.double())
    k = torch.einsum("bjd,hdk->bhjk", y.double(), block.k_per_query_head().double())
    return scale * q @ k.transpose(-1, -2)


def rotated_scores(q: torch.Tensor, k: torch.Tensor, rope) -> torch.Tensor:
    """sum over dims of q_i R(j - i) k_j for q, k [B, H, T, k] (float64): R rotates each rotary
    pair (a_p, b_p) of a Rope by the angle (j - i) * inv_freq[p], (v_a, v_b) -> (c v_a - s v_b,
    s v_a + c v_b); pairs (p, p + r/2) for layout "half", (2p, 2p + 1) for "interleaved"; the
    dims past the rotary dim r are not rotated."""
    n = len(rope.inv_freq)
    a = torch.arange(n) if rope.layout == "half" else 2 * torch.arange(n)
    b = a + n if rope.layout == "half" else a + 1
    rest = torch.arange(2 * n, q.shape[-1])
    tq, tk = q.shape[2], k.shape[2]
    offset = (torch.arange(tk)[None, :] - torch.arange(tq)[:, None]).to(torch.float64)  # [i, j] -> j - i
    angle = offset[..., None] * torch.tensor(rope.inv_freq, dtype=torch.float64)  # [Tq, Tk, n]
    c, s = angle.cos(), angle.sin()
    qa, qb = q[..., a][:, :, :, None], q[..., b][:, :, :, None]  # [B, H, Tq, 1, n]
    ka, kb = k[..., a][:, :, None], k[..., b][:, :, None]  # [B, H, 1, Tk, n]
    rotary = (qa * (c * ka - s * kb) + qb * (s * ka + c * kb)).sum(-1)
    return rotary + q[..., rest] @ k[..., rest].transpose(-1, -2)


def _scores_of(call: Call, shape: tuple) -> torch.Tensor:
    B, H, Tq, Tk = shape
    found = []
    for s in call.softmax_inputs:
        if tuple(s.shape) == shape:
            found.append(s)
        elif s.ndim == 3 and tuple(s.shape) == (B * H, Tq, Tk):  # implementations that fold heads into batch
            found.append(s.reshape(shape))
    if len(found) != 1:
        raise AssertionError(
            f"{type(call.module).__name__}: expected one softmax input of shape {shape}, captured "
            f"{[tuple(s.shape) for s in call.softmax_inputs]}; load the model with attn_implementation='eager'"
        )
    return found[0].double()


def compare(
    block: AttentionBlock,
    x: torch.Tensor,
    y: torch.Tensor,
    got: torch.Tensor,
    scale: float,
    *,
    offset: torch.Tensor | None = None,
    rtol: float | None = None,
    masked_below: float = -1e4,
    where: str = "",
) -> float:
    """Assert that the model's pre-softmax scores got [B, H, Tq, Tk] equal
    scale * x Q_h K_kv(h)^T y (+ offset) for x [B, Tq, d_q] and y [B, Tk, d_k]; returns the
    worst relative error (max |diff| / max |expected| over open positions, per head).

    rtol defaults to 1e-9 for float64 inputs and 1e-4 otherwise. Positions whose captured
    score is below masked_below (or not finite) count as masked and are skipped; at least a
    third of the positions must be open, so a mask cannot hide a mismatch.
    """
    want = expected_scores(block, x, y, float(scale))
    if offset is not None:
        want = want + offset.double()
    got = got.double()
    what = f"{block.stack} layer {block.layer}" + (f", {where}" if where else "")
    tol = rtol if rtol is not None else (1e-9 if x.dtype == torch.float64 else 1e-4)
    open_ = torch.isfinite(got) & (got > masked_below)
    if open_.double().mean() < 1 / 3:
        raise AssertionError(f"{what}: only {int(open_.sum())} of {open_.numel()} scores unmasked")
    diff = torch.where(open_, (got - want).abs(), torch.zeros_like(got)).amax(dim=(0, 2, 3))
    size = torch.where(open_, want.abs(), torch.zeros_like(want)).amax(dim=(0, 2, 3))
    if (size == 0).any():
        zero = (size == 0).nonzero().flatten().tolist()
        raise AssertionError(f"{what}: expected scores are all zero for heads {zero}")
    rel = diff / size
    bad = (rel > tol).nonzero().flatten().tolist()
    if bad:
        raise AssertionError(
            f"{what}: the model's scores differ from x Q_h K_kv(h)^T y for heads {bad} "
            f"(relative error {[f'{rel[h]:.2e}' for h in bad]}, tolerance {tol:.0e})"
        )
    return float(rel.max())


def check(
    block: AttentionBlock,
    calls: list[Call],
    *,
    scale: float | None = None,
    rtol: float | None = None,
    query_input: Callable[[Call], torch.Tensor] = default_query_input,
    key_input: Callable[[Call], torch.Tensor] = default_key_input,
    offset: Callable[[Call], torch.Tensor] | None = None,
    masked_below: float = -1e4,
) -> float:
    """compare() every captured call's scores with the block's factors; returns the worst
    relative error."""
    if not calls:
        raise AssertionError("the attention module was never called: wrong module, or forward not run?")
    worst = 0.0
    for n, call in enumerate(calls):
        x, y = query_input(call), key_input(call)
        s = scale if scale is not None else getattr(call.module, "scaling", block.q.shape[2] ** -0.5)
        got = _scores_of(call, (x.shape[0], block.n_heads, x.shape[1], y.shape[1]))
        extra = offset(call) if offset is not None else None
        where = f"call {n} of {type(call.module).__name__}"
        err = compare(block, x, y, got, s, offset=extra, rtol=rtol, masked_below=masked_below, where=where)
        worst = max(worst, err)
    return worst


def check_module(block: AttentionBlock, module: torch.nn.Module, run: Callable[[], object], **kwargs) -> float:
    """capture(module) around run(), then check(block, calls, **kwargs)."""
    with capture(module) as calls:
        run()
    return check(block, calls, **kwargs)


def check_modules(pairs: list[tuple[AttentionBlock, torch.nn.Module]], run: Callable[[], object], **kwargs) -> float:
    """Several (block, module) pairs checked on ONE forward pass run(); returns the worst error."""
    with capture_many([m for _, m in pairs]) as calls:
        run()
    return max(check(b, c, **kwargs) for (b, _), c in zip(pairs, calls))


def check_all(folder, inputs, modules, architecture: str | None = None) -> dict[str, int]:
    """Adapter blocks of the checkpoint in folder vs the model loaded from it, every stack
    and layer in one forward pass; returns layers per stack. inputs(model) gives the forward
    kwargs, modules(model) {stack: [attention module per layer]}."""
    found = list(adapter_blocks(open_checkpoint(str(folder))))
    model = load_for_check(folder, architecture)
    mods = modules(model)
    by_stack: dict[str, list[AttentionBlock]] = {}
    for b in found:
        by_stack.setdefault(b.stack, []).append(b)
    assert set(by_stack) == set(mods), f"adapter stacks {sorted(by_stack)} vs model stacks {sorted(mods)}"
    kwargs = inputs(model)
    pairs = []
    for stack, bl in by_stack.items():
        assert [b.layer for b in bl] == list(range(len(mods[stack])))
        pairs += zip(bl, mods[stack])
    check_modules(pairs, lambda: model(**kwargs))
    return {s: len(bl) for s, bl in by_stack.items()}
