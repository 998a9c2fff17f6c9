"""What one attention call of a traced forward reads: its q and k columns traced back to the
projections (and QK-norms) they came from, its scale, mask and extra logits.

`attention_calls(trace, model)` gives one `AttentionCall` per softmax over a product of two
activations. Failures raise `Underivable` with a category (CATEGORIES) and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .build import B
from .columns import as_rows, match_columns
from .trace import ModuleCall, Product, Projection, Softmax, Trace

CATEGORIES = {
    "no attention": "its forward computes no softmax over a product of queries and keys",
    "not bilinear": "its attention logits are not a bilinear form of the token vectors",
    "layout": "its q/k layout is one the records cannot express",
    "forward": "its tiny model could not be built or run",
    "config": "the config does not name what the forward shows",
}


class Underivable(Exception):
    def __init__(self, category: str, reason: str):
        super().__init__(f"{category}: {reason}")
        self.category, self.reason = category, reason


@dataclass
class Side:
    """One side (queries or keys) of an attention call."""

    projection: Projection
    rows: list[list[int]]  # per head (as the product sees them), the projection's output rows
    factor: float  # the product's operand = factor x the projection's output (pre-scaling)
    norm: ModuleCall | None = None  # the QK-norm call between projection and product
    norm_heads: list[ModuleCall] | None = None  # per-head QK-norm calls (one module per head)


@dataclass
class AttentionCall:
    call: ModuleCall  # the innermost module call holding the product and the softmax
    product: Product
    softmax: Softmax
    q: Side
    k: Side
    heads: int
    head_dim: int
    scale: float  # softmax input = scale * product (+ terms that do not depend on content)
    extra_logits: int  # columns the softmax sees beyond the keys (attention sinks)
    position_terms: bool  # an additive term of position alone (ALiBi, relative biases)
    mask: str  # "causal", "prefix" (causal after a prefix every token sees), "full", "band" or "mixed"
    cross: bool  # keys read another input than queries


def _heads_view(t: torch.Tensor, batch: int) -> torch.Tensor:
    """[..., T, c] with leading dims batch-major (B, H...) -> [B, H, T, c]."""
    n = t[..., 0, 0].numel()
    if n % batch:
        raise Underivable("layout", f"an attention product of shape {tuple(t.shape)} has no batch of {batch} in front")
    return t.reshape(batch, n // batch, *t.shape[-2:])


def _open_positions(scores: torch.Tensor) -> torch.Tensor:
    return torch.isfinite(scores) & (scores > -1e3)


def _mask_kind(open_: torch.Tensor) -> str:
    tq, tk = open_.shape[-2:]
    if bool(open_.all()):
        return "full"
    future = torch.ones(tq, tk, dtype=torch.bool).triu(tk - tq + 1)
    diagonal = torch.zeros(tq, tk, dtype=torch.bool)
    diagonal[torch.arange(tq), torch.arange(tq) + tk - tq] = True
    if not bool(open_[..., diagonal].all()):
        return "mixed"
    if not bool((open_ & future).any()):
        return "causal"
    if tq == tk and torch.equal(open_, open_.T):
        return "band"  # bidirectional attention over a window (ModernBERT's local layers)
    full_columns = open_.all(0)
    prefix = int(full_columns.long().cumprod(0).sum())
    j = torch.arange(tk)
    if 0 < prefix < tk and torch.equal(open_, (j[None, :] < prefix) | ~future):
        return "prefix"  # a prefix seen by all (GIT's image tokens), causal after it
    return "mixed"


def _fit_scale(scores: torch.Tensor, out: torch.Tensor, open_: torch.Tensor, tol: float = 1e-6) -> tuple[float, bool]:
    """scale s with scores = s * out + c(b, h, i) + p(h, i, j) on the open positions; whether p
    is nonzero. Raises when no such s exists (a non-linear map of the product)."""
    both = open_[0] & open_[1]
    ds = torch.where(both, scores[0] - scores[1], 0.0)
    do = torch.where(both, out[0] - out[1], 0.0)
    count = both.sum(-1, keepdim=True).clamp_min(1)
    ds = torch.where(both, ds - ds.sum(-1, keepdim=True) / count, 0.0)
    do = torch.where(both, do - do.sum(-1, keepdim=True) / count, 0.0)
    per_head = (ds * do).sum((-1, -2)) / (do * do).sum((-1, -2)).clamp_min(1e-300)
    s = float(per_head.mean())
    resid = (ds - s * do).norm() / ds.norm().clamp_min(1e-300)
    if resid > tol:
        spread = float(per_head.max() - per_head.min()) / max(abs(s), 1e-300)
        why = "a scale of its own per head" if spread > tol else "a non-linear map of q.k (soft-capping, cosine)"
        raise Underivable("not bilinear", f"the softmax input is {why} (relative residual {float(resid):.1e})")
    rest = torch.where(open_, scores - s * out, 0.0)
    rest = rest - torch.where(open_, rest, 0.0).sum(-1, keepdim=True) / open_.sum(-1, keepdim=True).clamp_min(1)
    position = bool((torch.where(open_, rest, 0.0).abs() > 1e-9 * out.abs().max()).any())
    return s, position


def _side(operand: torch.Tensor, trace: Trace, before: int, what: str, calls: list[ModuleCall]) -> Side:
    """Trace the columns of one operand [B, H, T, c] back to one projection (through a QK-norm)."""
    _, h, t, c = operand.shape
    target = operand.permute(0, 2, 1, 3).reshape(B * t, h * c)
    projections = [p for p in trace.projections if p.seq < before and as_rows(p.out, B, t) is not None]
    projections.reverse()  # the latest first
    matches = match_columns(target, [as_rows(p.out, B, t) for p in projections])
    norm = None
    if any(m is None for m in matches):
        norm, matches = _through_norm(target, trace, before, t, projections, calls)
    if any(m is None for m in matches):
        raise Underivable(
            "not bilinear",
            f"the {what} of the attention product are not copies of any projection's outputs "
            "(latent attention, normalised or position-mixed q/k)",
        )
    sources = {m.source for m in matches}
    if len(sources) != 1:
        names = sorted({projections[s].weight for s in sources})
        raise Underivable("layout", f"the {what} come from several projections: {names}")
    projection = projections[sources.pop()]
    rows = [[matches[head * c + j].column for j in range(c)] for head in range(h)]
    factors = [m.factor for m in matches]
    if max(factors) - min(factors) > 1e-6 * max(abs(f) for f in factors) and norm is None:
        raise Underivable("not bilinear", f"the {what} are scaled differently per column ({min(factors)} to {max(factors)})")
    return Side(projection, rows, matches[0].factor, norm)


def _norm_calls(calls: list[ModuleCall], before: int) -> list[ModuleCall]:
    out = []
    for call in calls:
        params = [p for p in call.module.parameters(recurse=False) if p.ndim == 1]
        if params and call.seq_end <= before and isinstance(call.output, torch.Tensor):
            out.append(call)
    return out


def _through_norm(target, trace: Trace, before: int, t: int, projections: list[Projection], calls):
    """Columns matched through one norm module (QK-norm): the norm's output holds them, its
    input is a projection's output. Returns (the norm call, matches to the projections)."""
    candidates = [c for c in _norm_calls(calls, before) if as_rows(c.output, B, t) is not None]
    candidates.reverse()
    for norm in candidates:
        found = match_columns(target, [as_rows(norm.output, B, t)])
        if any(m is None for m in found):
            continue
        x = norm.args[0] if norm.args else next(iter(norm.kwargs.values()))
        x_rows = as_rows(x, B, t)
        if x_rows is None:
            continue
        # the norm keeps each column in place: its input column = its output column
        inner = match_columns(x_rows, [as_rows(p.out, B, t) for p in projections])
        matches = [inner[m.column] for m in found]
        if all(m is not None for m in matches):
            return norm, matches
    return None, [None]


def _innermost(trace: Trace, softmax: Softmax) -> ModuleCall:
    if not softmax.calls:
        raise Underivable("layout", "a softmax ran outside every module")
    return trace.calls[softmax.calls[-1]]


def _product_of(trace: Trace, softmax: Softmax) -> Product | None:
    if softmax.product is not None:
        return softmax.product
    tq, tk = softmax.scores.shape[-2:]
    for product in reversed(trace.products):
        if product.seq < softmax.seq and product.calls == softmax.calls and product.out.shape[-2] == tq:
            if product.out.shape[-1] <= tk:
                return product
    return None


def _subtree(trace: Trace, root: ModuleCall) -> list[ModuleCall]:
    return [c for c in trace.calls if c.seq_start >= root.seq_start and c.seq_end <= root.seq_end]


def attention_call(trace: Trace, softmax: Softmax) -> AttentionCall | None:
    """The attention call of one softmax; None when the softmax is over no product of two activations."""
    product = _product_of(trace, softmax)
    if product is None:
        return None
    call = _innermost(trace, softmax)
    out = _heads_view(product.out, B)
    scores = _heads_view(softmax.scores, B)
    a, k = _heads_view(product.a, B), _heads_view(product.k, B)
    tk = out.shape[-1]
    extra = scores.shape[-1] - tk
    scores = scores[..., :tk]
    open_ = _open_positions(scores)
    if open_.double().mean() < 0.3:
        raise Underivable("layout", f"only {int(open_.sum())} of {open_.numel()} attention logits are unmasked")
    scale, position = _fit_scale(scores, out, open_)
    calls = _subtree(trace, call)
    q_side = _side(a, trace, product.seq, "queries", calls)
    k_side = _side(k, trace, product.seq, "keys", calls)
    xq, xk = q_side.projection.x, k_side.projection.x
    cross = not (xq.shape == xk.shape and torch.equal(xq, xk))
    return AttentionCall(
        call, product, softmax, q_side, k_side, a.shape[1], a.shape[-1], scale, extra, position,
        _mask_kind(open_[0, 0]) if not cross else "full", cross,
    )  # fmt: skip


def attention_calls(trace: Trace) -> list[AttentionCall]:
    found = [c for s in trace.softmaxes if (c := attention_call(trace, s)) is not None]
    if not found:
        why = "products without a softmax (linear attention?)" if trace.products else "no product of two activations"
        raise Underivable("no attention", f"the forward ran no softmax over a q.k product ({why})")
    return found
