"""The logits test of a derived record: the record's blocks, read from the tiny model's saved
checkpoint by the generic reader, against the scores the model itself computed.

For every attention call of a traced forward, with x and y the inputs of its q and k projections
and Q_h, K_h, b_q, b_k the block's factors and biases, the model's softmax input must be

    s * (x Q_h + b_q)(y K_kv(h) + b_k)^T  + c(b, h, i) + p(h, i, j)

for one scale s on every open position: c is constant along each row (softmax does not see it),
p does not depend on the tokens (ALiBi, relative position tables). QK-norm blocks (the gains
folded): the same up to a positive factor per query token and one per key token (the norm's
scalings). With real positions and the block's rope, x_i Q_h R(j - i) K_h^T y_j in place of the
plain form.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..blocks import AttentionBlock
from .calls import AttentionCall, Side, Underivable, _heads_view, _product_of, fit_runs
from .columns import as_rows
from .trace import ModuleCall, Trace

# the reader's factors are float32 (the tiny model's float64 weights rounded): a wrong row, head
# or transpose is off by O(1), rounding by ~1e-7
TOL = 1e-5


def expected_form(block: AttentionBlock, x: torch.Tensor, y: torch.Tensor, tq: int, tk: int):
    """(x Q_h + b_q) and (y K_kv(h) + b_k) per query head: [N, H, T, c] each, float64 (x [N, Tq, d]
    or, from an addmm, [N*Tq, d])."""
    x, y = x.reshape(-1, tq, x.shape[-1]).double(), y.reshape(-1, tk, y.shape[-1]).double()
    q = torch.einsum("btd,hdc->bhtc", x, block.q.double())
    k = torch.einsum("btd,hdc->bhtc", y, block.k_per_query_head().double())
    if block.q_bias is not None:
        q = q + block.q_bias.double()[None, :, None, :]
    if block.k_bias is not None:
        kb = block.k_bias.double()
        group = block.n_heads // block.n_kv_heads
        k = k + kb.repeat_interleave(group, dim=0)[None, :, None, :]
    return q, k


def rotated(q: torch.Tensor, k: torch.Tensor, rope) -> torch.Tensor:
    """sum over dims of q_i R(j - i) k_j (the rotary pairs of rope's layout rotated by (j - i)
    inv_freq; dims past the rotary dim as they are)."""
    n = len(rope.inv_freq)
    a = torch.arange(n) if rope.layout == "half" else 2 * torch.arange(n)
    b = a + n if rope.layout == "half" else a + 1
    rest = torch.arange(2 * n, q.shape[-1])
    tq, tk = q.shape[2], k.shape[2]
    offset = (torch.arange(tk)[None, :] - torch.arange(tq)[:, None] - (tk - tq)).double()
    angle = offset[..., None] * torch.tensor(rope.inv_freq, dtype=torch.float64)
    c, s = angle.cos(), angle.sin()
    qa, qb = q[..., a][:, :, :, None], q[..., b][:, :, :, None]
    ka, kb = k[..., a][:, :, None], k[..., b][:, :, None]
    out = (qa * (c * ka - s * kb) + qb * (s * ka + c * kb)).sum(-1)
    return out + q[..., rest] @ k[..., rest].transpose(-1, -2)


@dataclass
class Seen:
    """What one attention call of a forward saw: its q and k projections' inputs, its scores, and
    for a QK-norm the norm's scaling of each query and key token [B, H, T] (None: no QK-norm)."""

    name: str
    x: torch.Tensor
    y: torch.Tensor
    scores: torch.Tensor
    q_scaling: torch.Tensor | None = None
    k_scaling: torch.Tensor | None = None
    key_offset: int = 0  # the scores' columns before the keys' (AttentionCall.key_offset)


def _scaling(call: ModuleCall, tokens: int) -> torch.Tensor:
    """1 / the norm's divisor per token and head: rms (or std, for a LayerNorm) plus eps."""
    from .infer import _EPS, norm_kind

    x = (call.args[0] if call.args else next(iter(call.kwargs.values()))).double()
    _, centred = norm_kind(call)
    eps = next((getattr(call.module, a) for a in _EPS if isinstance(getattr(call.module, a, None), float)), 0.0)
    z = x - x.mean(-1, keepdim=True) if centred else x
    scale = 1 / (z.pow(2).mean(-1) + eps).sqrt()  # [B, T, H] or [B, H, T]
    if scale.ndim == 2 and scale.shape[0] % tokens == 0 and scale.shape[1] != tokens:
        # packed [N*T, H]: vision towers' [T, H], Chameleon's [B*T, H]
        return scale.reshape(-1, tokens, scale.shape[1]).transpose(1, 2)
    if scale.ndim == 2:  # one norm over all heads' dims together: [B, T]
        return scale[:, None, :]
    return scale.transpose(1, 2) if scale.shape[1] == tokens and scale.shape[2] != tokens else scale


def _norm_input_call(side: Side, trace: Trace | None, first: Trace | None) -> ModuleCall | None:
    if side.norm is None:
        return None
    if trace is None:
        return side.norm
    same = [c for c in first.calls if c.name == side.norm.name]
    again = [c for c in trace.calls if c.name == side.norm.name]
    return again[same.index(side.norm)]


def seen(call: AttentionCall, first: Trace, again: Trace) -> Seen:
    """The call (of the forward first) as the forward again saw it (again may be first): each
    projection and norm found by its name and how many calls of it ran before, the softmax by
    its place among the softmaxes."""
    scalings = [
        _scaling(n, t) if (n := _norm_input_call(side, again, first)) is not None else None
        for side, t in ((call.q, call.product.a.shape[-2]), (call.k, call.product.k.shape[-2]))
    ]
    projections = []
    for side in (call.q, call.k):
        before = [p for p in first.projections if p.weight == side.projection.weight]
        after = [p for p in again.projections if p.weight == side.projection.weight]
        projections.append(after[next(i for i, p in enumerate(before) if p is side.projection)])
    softmax = again.softmaxes[first.softmaxes.index(call.softmax)]
    if call.q.unit_norm is not None:
        product = _product_of(again, softmax)
        scalings = [
            _unit_scaling(side, operand, projection)
            for side, operand, projection in zip((call.q, call.k), (product.a, product.k), projections)
        ]
    if call.q.temperature is not None:  # each query's factor of its position (Beam's), as the norm's
        scalings[0] = scalings[0] * call.q.temperature.to(scalings[0].dtype)
    xs = [_batch_first(p.x, operand) for p, operand in zip(projections, (call.product.a, call.product.k))]
    return Seen(call.call.name, xs[0], xs[1], softmax.scores, *scalings, key_offset=call.key_offset)


def _batch_first(x: torch.Tensor, operand: torch.Tensor) -> torch.Tensor:
    """A projection's input as [N*T, d] rows batch-major, where it came time-first [T, N, d]
    (FSMT's fairseq layout); as it is otherwise."""
    t = operand.shape[-2]
    n = x.numel() // (x.shape[-1] * t)
    if x.ndim == 3 and x.shape[:2] == (t, n) and t != n:
        return x.transpose(0, 1).reshape(n * t, -1)
    return x


def _unit_scaling(side: Side, operand: torch.Tensor, projection) -> torch.Tensor:
    """A QK-norm without a gain: its scaling of each token's head [N, H, T], as the operand's
    norm over its projection's (centred for a LayerNorm's) rows of that head."""
    h, t, c = len(side.rows), operand.shape[-2], operand.shape[-1]
    a = operand.double().reshape(-1, h, t, c)
    rows = as_rows(projection.out, a.shape[0], t)
    heads = torch.stack([rows[:, r] for r in side.rows], 1).reshape(a.shape[0], t, h, c).transpose(1, 2)
    if side.unit_norm == "centred":
        heads = heads - heads.mean(-1, keepdim=True)
    return a.norm(dim=-1) / heads.norm(dim=-1).clamp_min(1e-300)


def _normed(block: AttentionBlock, s: Seen, q: torch.Tensor, k: torch.Tensor):
    """q and k [N, H, T, c] scaled by the QK-norm's per-token scalings, its shifts added."""
    if s.q_scaling is None or s.k_scaling is None:
        raise Underivable("verify", f"{s.name}: a QK-norm block, but the forward ran no QK-norm")
    qs, ks = (
        t.expand(t.shape[0], q.shape[1], t.shape[2]) if t.shape[1] == 1 else t for t in (s.q_scaling, s.k_scaling)
    )
    group = q.shape[1] // ks.shape[1]
    q, k = q * qs[..., None], k * ks.repeat_interleave(group, dim=1)[..., None]
    if block.q_norm_bias is not None:
        q = q + block.q_norm_bias.double()[None, :, None, :]
    if block.k_norm_bias is not None:
        k = k + block.k_norm_bias.double().repeat_interleave(block.n_heads // block.n_kv_heads, dim=0)[None, :, None, :]
    return q, k


def _form(block: AttentionBlock, s: Seen, with_rope: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(the block's form, the scores) as [N, H, Tq, Tk] for one forward."""
    tq = s.scores.shape[-2]
    n = s.x.reshape(-1, s.x.shape[-1]).shape[0] // tq  # batch (x windows)
    q, k = expected_form(block, s.x, s.y, tq, s.y.reshape(-1, s.y.shape[-1]).shape[0] // n)
    if block.form == "qk_norm_gain_folded":
        q, k = _normed(block, s, q, k)
    form = rotated(q, k, block.rope) if with_rope and block.rope is not None else q @ k.transpose(-1, -2)
    scores = _heads_view(s.scores, form.shape[0])[..., s.key_offset : s.key_offset + form.shape[-1]].double()
    if scores.shape[1] != form.shape[1]:
        raise Underivable("verify", f"{s.name}: the block has {form.shape[1]} heads, the forward {scores.shape[1]}")
    return form, scores


def check(block: AttentionBlock, one: Seen, other: Seen, with_rope: bool = False, per_head: bool = False) -> float:
    """Raise Underivable("verify", ...) unless the call's scores in two forwards of other tokens
    are the block's form (module docstring); returns the fitted scale."""
    form, scores = _form(block, one, with_rope)
    other_form, other_scores = _form(block, other, with_rope)
    try:
        scale, _ = fit_runs(scores, other_scores, form, other_form, TOL, per_head)
    except Underivable as e:
        raise Underivable("verify", f"{one.name} ({block.stack} layer {block.layer}): {e.reason}") from None
    return scale
