"""What one attention call of a traced forward reads: its q and k columns traced back to the
projections (and QK-norms) they came from, its scale, mask and extra logits.

`attention_calls(trace, model)` gives one `AttentionCall` per softmax over a product of two
activations. Failures raise `Underivable` with a category (CATEGORIES) and the reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from ..adapters.common import SCALE_MAPS
from . import inputs
from .columns import as_rows, match_columns
from .trace import ModuleCall, Product, Projection, Softmax, Trace

CATEGORIES = {
    "no attention": "its forward computes no softmax over a product of queries and keys",
    "no model": "no model class is built from its config alone: a part of a composite's config",
    "not bilinear": "its attention logits are not a bilinear form of the token vectors",
    "layout": "its q/k layout is one the records cannot express",
    "forward": "its tiny model could not be built or run",
    "config": "the config does not name what the forward shows",
    "verify": "the derived record failed the logits test on its tiny model",
    "unknown type": "the installed transformers does not know the model type",
}


TOO_FEW = "too few to tell which projection's columns they are"


class Underivable(Exception):
    def __init__(self, category: str, reason: str):
        super().__init__(f"{category}: {reason}")
        self.category, self.reason = category, reason


class ChannelAttention(Underivable):
    """A softmax over channels (DaViT's channel attention): no attention between tokens, left out
    where the forward has attention between tokens too."""


@dataclass
class Side:
    """One side (queries or keys) of an attention call."""

    projection: Projection
    rows: list[list[int]]  # per head (as the product sees them), the projection's output rows
    factor: float  # the product's operand = factor x the projection's output (pre-scaling)
    norm: ModuleCall | None = None  # the QK-norm call between projection and product
    offset: torch.Tensor | None = None  # [H, c]: a bias added after the projection (None: none)
    norm_heads: list[ModuleCall] | None = None  # per-head QK-norm calls (one module per head)
    unit_norm: str | None = None  # a QK-norm without a gain between projection and product: "rms" or "centred"
    shared: bool = False  # another attention's projection and norm (Gemma 3n's layers that reuse an earlier one's keys)
    column_scale: tuple[str, str] | None = None  # (parameter, map) scaling each column after the projection
    temperature: torch.Tensor | None = None  # [T]: each query's positive factor after its QK-norm, by position


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
    per_head_scale: bool = False  # a positive scale of each head's own (Swin v2's logit_scale), left out of the form
    key_offset: int = 0  # the softmax's columns before the keys' (another input's keys first: DiffusionGemma's)


def _heads_view(t: torch.Tensor, batch: int) -> torch.Tensor:
    """[..., T, c] with leading dims batch-major (N, H...) -> [N, H, T, c]."""
    n = t[..., 0, 0].numel()
    if n % batch:
        raise Underivable("layout", f"an attention product of shape {tuple(t.shape)} has no batch of {batch} in front")
    return t.reshape(batch, n // batch, *t.shape[-2:])


def open_positions(scores: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """Positions the mask leaves open in both forwards: finite, and not a large negative value
    that the other tokens left (almost) as it was (masks add -inf, the dtype's minimum or -1e4 to
    logits of a tiny model's size; smaller ones, Swin's -100, cancel between the forwards), nor
    one that either forward's content masked (EoMT's queries kept off the patches outside the
    masks they predict: -1e9 in one forward, open in the other)."""
    finite = torch.isfinite(scores) & torch.isfinite(other)
    fixed = (scores < -1e3) & ((scores - other).abs() <= 1e-3 * scores.abs())
    content = ((scores < -1e6) | (other < -1e6)) & ~fixed
    return finite & ~fixed & ~content & (scores > -1e30)


def _is_window(open_: torch.Tensor) -> bool:
    """Whether each query sees the keys from a tokens before it to b after it, a and b > 0, not
    necessarily equal (T5Gemma 2's encoder window: (w + 1) // 2 back, w // 2 + 1 ahead)."""
    t = open_.shape[-1]
    offset = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    lo, hi = int(offset[open_].min()), int(offset[open_].max())
    return lo < 0 < hi and torch.equal(open_, (offset >= lo) & (offset <= hi))


def _mask_kind(open_: torch.Tensor) -> str:
    seen = open_.any(0)
    if open_.shape[0] == open_.shape[1] and 1 < int(seen.sum()) < len(seen):
        open_ = open_[seen][:, seen]  # keys no query sees: padding (Longformer's, to whole windows), as queries too
    tq, tk = open_.shape[-2:]
    if bool(open_.all()):
        return "full"
    future = torch.ones(tq, tk, dtype=torch.bool).triu(tk - tq + 1)
    diagonal = torch.zeros(tq, tk, dtype=torch.bool)
    diagonal[torch.arange(tq), torch.arange(tq) + tk - tq] = True
    if not bool(open_[..., diagonal].all()):
        full_rows = open_.all(-1).double().mean() >= 0.5
        return "full" if tq == tk and full_rows else "mixed"  # padding masked (Mllama's padded tiles)
    if not bool((open_ & future).any()):
        return "causal"
    if tq == tk and (torch.equal(open_, open_.T) or _is_window(open_)):
        return "band"  # bidirectional attention over a window (ModernBERT's local layers, T5Gemma 2's encoder)
    full_columns = open_.all(0)
    prefix = int(full_columns.long().cumprod(0).sum())
    j = torch.arange(tk)
    if 0 < prefix < tk and torch.equal(open_, (j[None, :] < prefix) | ~future):
        return "prefix"  # a prefix seen by all (GIT's image tokens), causal after it
    if tq == tk and open_.all(-1).double().mean() >= 0.5:
        return "full"  # most tokens see every token, the rest are padding (Mllama's padded tiles)
    return "mixed"


def fit_scale(
    scores, other_scores, out, other_out, open_, tol: float = 1e-6, per_head: bool = False
) -> tuple[float, bool]:
    """The scale s with scores = s * out + c(n, h, i) + p(n, h, i, j) on the open positions, where
    p does not change with the tokens: two forwards of other tokens at the same positions differ
    by s times the difference of their products, up to a constant per row (which softmax does not
    see). Returns (s, whether p is nonzero: ALiBi, relative position biases); raises when no such s
    exists (a non-linear map of q.k, or a term of content and position: DeBERTa). s is nan when
    the tokens do not change the product (DETR's first object queries). The tolerance follows the
    softmax input's precision: Funnel's, rounded to float32 in a float64 model. per_head: a positive
    scale of each head's own is taken (Swin v2's cosine attention, exp(logit_scale) a head): the
    returned s is their mean."""
    tol = max(tol, 64 * torch.finfo(scores.dtype).eps)
    ds = torch.where(open_, scores - other_scores, 0.0)
    do = torch.where(open_, out - other_out, 0.0)
    count = open_.sum(-1, keepdim=True).clamp_min(1)
    ds = torch.where(open_, ds - ds.sum(-1, keepdim=True) / count, 0.0)
    do = torch.where(open_, do - do.sum(-1, keepdim=True) / count, 0.0)
    if float(do.norm()) <= 1e-12 * float(out.abs().max()):
        return float("nan"), False
    heads_s = (ds * do).sum((0, -1, -2)) / (do * do).sum((0, -1, -2)).clamp_min(1e-300)
    s = float((ds * do).sum() / (do * do).sum())
    resid = (ds - s * do).norm() / ds.norm().clamp_min(1e-300)
    heads = (ds - heads_s[:, None, None] * do).norm() <= tol * ds.norm()
    if resid > tol and per_head and heads and bool((heads_s > 0).all()):
        s = heads_s[:, None, None]
    elif resid > tol:
        spread = float(heads_s.max() - heads_s.min()) / max(abs(s), 1e-300)
        why = (
            "scaled per head"
            if spread > tol and heads
            else "no linear map of q.k (soft-capping, cosine attention, content-position terms)"
        )
        raise Underivable("not bilinear", f"the softmax input is {why} (relative residual {float(resid):.1e})")
    rest = torch.where(open_, scores - s * out, 0.0)
    rest = torch.where(open_, rest - rest.sum(-1, keepdim=True) / count, 0.0)
    return float(s.mean()) if torch.is_tensor(s) else s, bool((rest.abs() > 1e-6 * out.abs().max()).any())


def fit_runs(scores, other_scores, out, other_out, tol: float = 1e-6, per_head: bool = False) -> tuple[float, bool]:
    """fit_scale over two forwards of other tokens; where their lengths differ (a decoder whose
    length follows durations predicted from the tokens: FastSpeech 2's), each forward alone, where
    a term of position cannot cancel and fails the fit, at one scale."""
    if scores.shape == other_scores.shape and out.shape == other_out.shape:
        return fit_scale(scores, other_scores, out, other_out, open_positions(scores, other_scores), tol, per_head)
    fits = [
        fit_scale(s, torch.zeros_like(s), o, torch.zeros_like(o), open_positions(s, s), tol, per_head)[0]
        for s, o in ((scores, out), (other_scores, other_out))
    ]
    if abs(fits[0] - fits[1]) > max(tol, 64 * torch.finfo(scores.dtype).eps) * abs(fits[0]):
        raise Underivable(
            "not bilinear", f"the softmax input is q.k scaled by {fits[0]:.6g} and {fits[1]:.6g} in two forwards"
        )
    return fits[0], False


def _side(
    operand: torch.Tensor, trace: Trace, before: int, what: str, calls: list[ModuleCall], whole: bool = True
) -> Side:
    """Trace the columns of one operand [N, H, T, c] back to one projection (through a QK-norm)."""
    n, h, t, c = operand.shape
    if n * t <= 2:  # any two columns of two rows are multiples of each other plus a constant
        raise Underivable(
            "forward",
            f"the {what} of the tiny model's {calls[0].name if calls else 'attention'} are {t} token(s) of {n} "
            f"sequence(s): {TOO_FEW} (a grid shrunk to one token; SAM 2's Hiera runs a softmax over its heads' "
            "product per token, unused)",
        )
    target = operand.permute(0, 2, 1, 3).reshape(n * t, h * c)
    projections = [p for p in trace.projections if p.seq < before and as_rows(p.out, n, t) is not None]
    projections.reverse()  # the latest first
    matches = match_columns(target, [as_rows(p.out, n, t) for p in projections])
    norm = unit = after_norm = temperature = None
    shared = False
    if any(m is None for m in matches):
        norm, matches, scales = _through_norm(target, trace, before, n, t, projections, calls)
        if norm is None:
            norm, matches, scales = _another_attentions(target, trace, before, n, t, projections, calls, what)
            shared = norm is not None
        if norm is None and what == "queries":
            norm, matches, scales, temperature = _by_position(target, trace, before, n, t, projections, calls)
        if norm is not None and _uneven(scales):  # a learned per-dimension scale after the norm (TimesFM 2.5's)
            after_norm = _column_scale(scales, h, c, trace, calls)
            if after_norm is None:
                raise Underivable(
                    "not bilinear",
                    f"the {what} are {norm.name}'s outputs scaled differently per column ({min(scales):.3g} to "
                    f"{max(scales):.3g}), by no parameter of the attention's",
                )
    if any(m is None for m in matches):
        unit, matches = _through_unit_norm(target, c, [as_rows(p.out, n, t) for p in projections])
    if any(m is None for m in matches):
        if whole:
            _refuse_joined(operand, trace, before, what, calls)
        raise Underivable(
            "not bilinear",
            f"the {what} of the attention product are no projection's outputs, nor through a QK-norm "
            "(latent attention through a per-token norm, q/k convolved over tokens, routed per token, "
            "or rescaled per channel after the rotary)",
        )
    sources = {m.source for m in matches}
    if len(sources) != 1:
        names = sorted({projections[s].weight for s in sources})
        raise Underivable(
            "not bilinear",
            f"the {what} are assembled from several projections {names} (latent attention's decoupled rotary "
            "part, a content part and a position part)",
        )
    projection = projections[sources.pop()]
    rows = [[matches[head * c + j].column for j in range(c)] for head in range(h)]
    factors = [m.factor for m in matches]
    column_scale = None
    if after_norm is not None:
        column_scale, factors = after_norm[:2], [f * after_norm[2] for f in factors]
    if _uneven(factors) and norm is None and unit is None:
        found = _column_scale(factors, h, c, trace, calls)
        if found is None:
            raise Underivable(
                "not bilinear", f"the {what} are scaled differently per column ({min(factors)} to {max(factors)})"
            )
        column_scale, factors = found[:2], [found[2]] * len(factors)
    offsets = torch.tensor([m.offset / m.factor for m in matches], dtype=torch.float64).reshape(h, c)
    scale = max(float(target.abs().max()), 1e-300)
    added = offsets if norm is None and unit is None and float(offsets.abs().max()) > 1e-6 * scale else None
    return Side(
        projection, rows, factors[0], norm, added, unit_norm=unit, shared=shared, column_scale=column_scale,
        temperature=temperature,
    )  # fmt: skip


def _column_scale(factors: list[float], h: int, c: int, trace: Trace, calls) -> tuple[str, str, float] | None:
    """(parameter, map, the factor left, one for all columns) where each column's factor is that
    map of a 1-d parameter of the attention's own modules, of head_dim values shared by the heads
    or one per head's column, times one constant (TimesFM's softplus(scaling) x 1.44 / sqrt(head_dim));
    None where none is."""
    f = torch.tensor(factors, dtype=torch.float64).reshape(h, c)
    modules = {call.name for call in calls}
    for name, p in trace.parameters.items():
        if p.ndim != 1 or p.numel() not in (c, h * c) or name.rpartition(".")[0] not in modules:
            continue
        for kind, fn in SCALE_MAPS.items():
            mapped = fn(p.detach().double()).reshape(-1, c).expand(h, c)
            ratio = f / mapped
            if bool(torch.isfinite(ratio).all()) and not _uneven(ratio.flatten().tolist()):
                return name, kind, float(ratio.mean())
    return None


def _self_part(keys: torch.Tensor, trace: Trace, before: int, calls, q_side: Side) -> tuple[Side, int, int] | None:
    """(the keys' side, its first key, its token count) where the keys are the queries' own tokens'
    projected, next to another input's (T5Gemma 2's merged attention: its decoder's self- and
    cross-attention under one softmax, the encoder's keys after its own; DiffusionGemma's decoder:
    the encoder's cached keys before its own): the self-attention part, which the record scores;
    None otherwise."""
    xq, t = q_side.projection.x, keys.shape[-2]
    # the other input's keys need not be a whole projection's (a sliding layer's cache: the last few)
    for start, count in sorted({(s, c) for c in _run_lengths(trace, before) if 0 < c < t for s in (0, t - c)}):
        try:
            side = _side(keys[..., start : start + count, :], trace, before, "keys", calls, whole=False)
        except Underivable:
            continue
        if xq.shape == side.projection.x.shape and torch.equal(xq, side.projection.x):
            return side, start, count
    return None


def _run_lengths(trace: Trace, before: int) -> set[int]:
    """The token counts of the projections run before seq before: the lengths a run of keys can have."""
    return {p.out.shape[-2] for p in trace.projections if p.seq < before and p.out.ndim >= 3}


def _two_runs(operand: torch.Tensor, trace: Trace, before: int, what: str, calls):
    """(tokens of the first run, its side, the rest's side) for each split of the operand's tokens
    into two runs, each a projection's outputs over an input of its own, as many tokens as some
    projection's output."""
    t = operand.shape[-2]
    counts = _run_lengths(trace, before)
    for first in sorted(c for c in counts if 0 < c < t and t - c in counts):
        try:
            a = _side(operand[..., :first, :], trace, before, what, calls, whole=False)
            b = _side(operand[..., first:, :], trace, before, what, calls, whole=False)
        except Underivable:
            continue
        yield first, a, b


def _keys_of(product: Product, start: int, keys: int) -> Product:
    """The product over its keys from start, keys of them."""
    cut = slice(start, start + keys)
    return dataclasses.replace(product, k=product.k[..., cut, :], out=product.out[..., cut])


def _uneven(factors: list[float]) -> bool:
    """Whether columns are scaled differently (a per-column scale no record folds), past rounding."""
    return max(factors) - min(factors) > 1e-6 * max(abs(f) for f in factors)


def _another_attentions(target, trace: Trace, before: int, n: int, t: int, projections, calls, what: str):
    """(norm call, matches, factors) where the keys are another attention's normalised projection
    (Gemma 3n's and Gemma 4's last layers, which reuse the keys of the last earlier layer of their
    kind and hold no k_proj of their own that runs), as _through_norm; (None, [None], []) where they
    are not. Queries so are refused (layout): no record reads them from another layer."""
    inside = {c.index for c in calls}
    outside = [c for c in trace.calls if c.index not in inside]
    norm, matches, scales = _through_norm(target, trace, before, n, t, projections, outside)
    if norm is None or any(m is None for m in matches):
        return None, [None], []
    source = projections[matches[0].source]
    if not source.calls or source.calls[-1] in inside:
        return None, [None], []
    if what != "keys":
        raise Underivable(
            "layout",
            f"the {what} are {source.weight}'s outputs through {norm.name}, another attention's "
            "(shared across layers): no record field reads them from another layer",
        )
    return norm, matches, scales


def _refuse_joined(operand: torch.Tensor, trace: Trace, before: int, what: str, calls) -> None:
    """Raise "layout" where the operand's tokens are two runs, each a projection's outputs over
    an input of its own (T5Gemma 2's decoder: its own keys and the encoder's under one softmax)."""
    for first, a, b in _two_runs(operand, trace, before, what, calls):
        raise Underivable(
            "layout",
            f"the {what} join {a.projection.weight}'s and {b.projection.weight}'s outputs over two inputs "
            f"({first} and {operand.shape[-2] - first} tokens, self- and cross-attention under one softmax): "
            "no record layout names it",
        )


def unit_chunks(rows: torch.Tensor, width: int, centred: bool) -> torch.Tensor | None:
    """rows [N, m] with each chunk of width columns (a head) scaled to unit RMS, centred first
    (a LayerNorm's); None when width does not divide m."""
    if rows.shape[1] % width:
        return None
    z = rows.reshape(rows.shape[0], -1, width)
    z = z - z.mean(-1, keepdim=True) if centred else z
    return (z / z.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-300)).reshape(rows.shape)


def _through_unit_norm(target, c: int, sources: list) -> tuple[str | None, list]:
    """Columns matched through a QK-norm without a gain (a weightless RMSNorm, F.rms_norm, an L2
    norm; centred: a LayerNorm's): each head of the operand, scaled to unit RMS, is a head of a
    projection's output scaled so. Returns ("rms" or "centred", matches) or (None, [None])."""
    for kind in ("rms", "centred"):
        centred = kind == "centred"
        units = [unit_chunks(s, c, centred) if s is not None else None for s in sources]
        if all(u is None for u in units):
            break
        units = [u if u is not None else torch.zeros(target.shape[0], 0, dtype=torch.float64) for u in units]
        found = match_columns(unit_chunks(target, c, centred), units)
        if all(m is not None for m in found):
            return kind, found
    return None, [None]


def _norm_calls(calls: list[ModuleCall], before: int) -> list[ModuleCall]:
    out = []
    for call in calls:
        # a norm's gains: one per column, or one per head's column ([heads, head_dim]: Chameleon's)
        params = list(call.module.parameters(recurse=False))
        gains = any(p.ndim == 1 for p in params) or _per_head_norm(call.module, params)
        if gains and call.seq_end <= before and isinstance(call.output, torch.Tensor):
            out.append(call)
    return out


def _per_head_norm(module, params: list) -> bool:
    return "Norm" in type(module).__name__ and bool(params) and all(p.ndim == 2 for p in params)


def _through_norm(target, trace: Trace, before: int, n: int, t: int, projections: list[Projection], calls):
    """Columns matched through one norm module (QK-norm): the norm's output holds them, its
    input is a projection's output. Returns (the norm call, matches to the projections, the
    factor of each column from the norm's output to the operand)."""
    candidates = [c for c in _norm_calls(calls, before) if as_rows(c.output, n, t) is not None]
    candidates.reverse()
    for norm in candidates:
        found = match_columns(target, [as_rows(norm.output, n, t)])
        if any(m is None for m in found):
            continue
        x = norm.args[0] if norm.args else next(iter(norm.kwargs.values()))
        x_rows = as_rows(x, n, t)
        if x_rows is None:
            continue
        # the norm keeps each column in place: its input column = its output column
        inner = match_columns(x_rows, [as_rows(p.out, n, t) for p in projections])
        matches = [inner[m.column] for m in found]
        if all(m is not None for m in matches):
            return norm, matches, [m.factor for m in found]
    return None, [None], []


def _by_position(target, trace: Trace, before: int, n: int, t: int, projections: list[Projection], calls):
    """As _through_norm, where each query is the QK-norm's output times a positive factor of its
    position alone (Beam's NoPE layers: (1 + (p + 1) / 2048) ** 0.1, a temperature): the norm's
    output holds all the operand's columns, so a row's factor is the ratio of the rows' lengths,
    the same in every sequence. Returns (the norm call, matches, scales, the factor [T]), or
    (None, [None], [], None)."""
    for norm in reversed(_norm_calls(calls, before)):
        rows = as_rows(norm.output, n, t)
        if rows is None or rows.shape[1] != target.shape[1]:
            continue
        factor = (target.double().norm(dim=1) / rows.double().norm(dim=1).clamp_min(1e-300)).reshape(n, t)
        if not bool((factor > 0).all()) or not torch.allclose(factor, factor[:1].expand(n, t), rtol=1e-6, atol=0):
            continue
        found, matches, scales = _through_norm(target / factor.reshape(-1, 1), trace, before, n, t, projections, [norm])
        if found is not None:
            return found, matches, scales, factor[0]
    return None, [None], [], None


def _scope(trace: Trace, calls: tuple[int, ...]) -> tuple[int, ...]:
    """The module calls an op ran in, less the innermost ones that are leaf wrappers (nn.Softmax,
    SqueezeBERT's MatMulWrapper): the attention module's call is the innermost one left."""
    end = len(calls)
    while end > 1 and not any(True for _ in trace.calls[calls[end - 1]].module.children()):
        end -= 1
    return calls[:end]


def _innermost(trace: Trace, softmax: Softmax) -> ModuleCall:
    if not softmax.calls:
        raise Underivable("layout", "a softmax ran outside every module")
    return trace.calls[_scope(trace, softmax.calls)[-1]]


def _product_of(trace: Trace, softmax: Softmax) -> Product | None:
    if softmax.product is not None:
        return softmax.product
    tq, tk = softmax.scores.shape[-2:]
    scope = _scope(trace, softmax.calls)
    # the product ran in the softmax's module, or in one around it (I-BERT's IntSoftmax module)
    for outer in (scope[:n] for n in range(len(scope), 0, -1)):
        for product in reversed(trace.products):
            if product.seq < softmax.seq and _scope(trace, product.calls) == outer and product.out.shape[-2] == tq:
                if product.out.shape[-1] <= tk:
                    return product
    return None


def _subtree(trace: Trace, root: ModuleCall) -> list[ModuleCall]:
    return [c for c in trace.calls if c.seq_start >= root.seq_start and c.seq_end <= root.seq_end]


def _batches(trace: Trace, product: Product, calls: list[ModuleCall]) -> list[int]:
    """Candidate batch sizes of a product's leading dims: B, then the leading dims of the
    projections run inside the attention call over as many tokens (Swin's windows: B x windows)."""
    tq = product.a.shape[-2]
    inside = {c.index for c in calls}
    found = [inputs.B]
    for p in trace.projections:
        if p.seq < product.seq and p.calls and p.calls[-1] in inside:
            if p.out.ndim >= 3 and p.out.shape[-2] == tq:
                lead = p.out[..., 0, 0].numel()
            elif p.out.ndim == 2 and p.out.shape[0] % tq == 0:  # tokens flattened (Qwen2-VL's vision tower)
                lead = p.out.shape[0] // tq
            elif p.out.ndim >= 4 and p.out.shape[-3] * p.out.shape[-2] == tq:  # a grid [.., height, width, m]
                lead = p.out[..., 0, 0, 0].numel()  # (SegGPT: its image and prompt stacked on the batch)
            elif p.out.ndim == 3 and p.out.shape[-2] % tq == 0:  # a sequence cut into blocks of tq tokens
                lead = p.out.shape[0] * (p.out.shape[-2] // tq)  # (Granite Speech's context blocks)
            else:
                continue
            if lead not in found:
                found.append(lead)
    return found


def attention_call(trace: Trace, softmax: Softmax, again: Trace, other: Softmax) -> AttentionCall | None:
    """The attention call of one softmax (other: the same softmax in again, a forward of other
    tokens); None when the softmax is over no product of two activations."""
    product = _product_of(trace, softmax)
    if product is None:
        return None
    call = _innermost(trace, softmax)
    calls = _subtree(trace, call)
    other_product = _product_of(again, other)
    if other_product is None or other_product.out.shape[:-2] != product.out.shape[:-2]:
        raise Underivable("layout", f"{call.name}: the forward of other tokens ran another attention product")
    error, offset = None, 0
    for batch in _batches(trace, product, calls):
        try:
            a, k = _heads_view(product.a, batch), _heads_view(product.k, batch)
            q_side = _side(a, trace, product.seq, "queries", calls)
            try:
                k_side = _side(k, trace, product.seq, "keys", calls)
            except Underivable as e:
                if (part := _self_part(k, trace, product.seq, calls, q_side)) is None:
                    raise e from None
                k_side, offset = part[0], part[1]
                product, other_product = (_keys_of(p, offset, part[2]) for p in (product, other_product))
            break
        except Underivable as e:
            error = error or e
    else:
        _refuse_channels(trace, product, calls)
        _refuse_pooled(trace, product, calls)
        raise error
    for side, operand, what in ((q_side, product.a, "queries"), (k_side, product.k, "keys")):
        _refuse_latent(side, trace, calls, what, batch, operand.shape[-2])
    out = _heads_view(product.out, batch)
    scores = _heads_view(softmax.scores, batch)
    tk = out.shape[-1]
    extra = scores.shape[-1] - tk
    # the product's columns: first among the softmax's (sinks after them), or after another input's
    scores = scores[..., offset : offset + tk]
    other_out = _heads_view(other_product.out, batch)
    others = _heads_view(other.scores, batch)[..., offset : offset + other_out.shape[-1]]
    open_ = open_positions(scores, others if others.shape == scores.shape else scores)
    if open_.sum() < 2 * open_.shape[-2] * open_.shape[0] * open_.shape[1]:  # under two open keys a query
        raise Underivable("layout", f"only {int(open_.sum())} of {open_.numel()} attention logits are unmasked")
    per_head = False
    try:
        scale, position = fit_runs(scores, others, out, other_out)
    except Underivable as e:
        if "scaled per head" not in e.reason:
            raise
        scale, position = fit_runs(scores, others, out, other_out, per_head=True)
        per_head = True
    xq, xk = q_side.projection.x, k_side.projection.x
    cross = not (xq.shape == xk.shape and torch.equal(xq, xk)) and not _pooled_from(xq, xk, batch)
    cross = cross and not k_side.shared  # an earlier layer's keys of the same tokens: self-attention
    return AttentionCall(
        call, product, softmax, q_side, k_side, a.shape[1], a.shape[-1], scale, extra, position,
        _mask_kind(open_[0, 0]) if not cross else "full", cross, per_head, offset,
    )  # fmt: skip


def _refuse_latent(side: Side, trace: Trace, calls, what: str, n: int, t: int) -> None:
    """Raise "not bilinear" where the side's projection reads a norm's output whose input is a
    projection's, both inside the attention (latent attention: GLM-5 Next's kv_b_proj over
    kv_a_layernorm(kv_a_proj(x)), DeepSeek's): a form of per-token normalised latents, not of the
    token vectors."""
    inside = {c.index for c in calls}
    earlier = [p for p in trace.projections if p.calls and p.calls[-1] in inside and p.seq < side.projection.seq]
    earlier = [rows for p in earlier if (rows := as_rows(p.out, n, t)) is not None]
    x = as_rows(side.projection.x, n, t)
    if x is None or not earlier:
        return
    for call in calls:
        weight = getattr(call.module, "weight", None)
        out = as_rows(call.output, n, t) if isinstance(call.output, torch.Tensor) else None
        if not isinstance(weight, torch.Tensor) or weight.ndim != 1 or out is None or not torch.equal(out, x):
            continue
        inp = as_rows(call.args[0] if call.args else next(iter(call.kwargs.values()), None), n, t)
        if inp is not None and all(m is not None for m in match_columns(inp, earlier)):
            raise Underivable(
                "not bilinear",
                f"the {what} are {side.projection.weight}'s outputs over {call.name}'s, a per-token norm of a "
                "projection of the tokens (latent attention): a form of normalised latents, not of the token vectors",
            )


def _pooled_from(xq: torch.Tensor, xk: torch.Tensor, batch: int) -> bool:
    """Whether each sample's query inputs are fewer tokens that mix its key inputs' tokens (Funnel's
    pooling layers: the queries read the pooled sequence, the keys the whole one): self-attention
    of one sequence, not cross-attention over another's states. Queries that are all copies of
    some of the keys' tokens are not pooled (IDEFICS 2's perceiver: latents read beside the context)."""
    q, k = (x.double().reshape(batch, -1, x.shape[-1]) for x in (xq, xk))
    if q.shape[-1] != k.shape[-1] or not 0 < q.shape[1] < k.shape[1] < k.shape[-1]:
        return False
    mix = torch.linalg.lstsq(k.transpose(1, 2), q.transpose(1, 2)).solution  # q^T = k^T mix
    rest = q - mix.transpose(1, 2) @ k
    copies = torch.cdist(q, k, compute_mode="donot_use_mm_for_euclid_dist").amin(-1) <= 1e-9 * q.norm(dim=-1)
    return bool(rest.norm() <= 1e-9 * q.norm()) and not bool(copies.all())


def _refuse_channels(trace: Trace, product: Product, calls: list[ModuleCall]) -> None:
    """Raise where the product contracts the tokens: its operands transposed are a projection's
    outputs (channel attention: DaViT's in Florence 2, XCiT's), logits between channels."""
    for batch in _batches(trace, product, calls):
        try:
            a = _heads_view(product.a, batch).transpose(-1, -2)
            _side(a, trace, product.seq, "queries", calls, whole=False)
        except Underivable:
            continue
        raise ChannelAttention(
            "not bilinear",
            "attention over channels: the product sums over the tokens (q and k transposed, DaViT's and "
            "XCiT's channel attention), so its logits compare channels, not tokens",
        )


def _refuse_pooled(trace: Trace, product: Product, calls: list[ModuleCall]) -> None:
    """Raise where there are fewer queries than keys, the keys a projection's outputs and the
    queries none: queries pooled over windows of tokens (Hiera's max-pooled queries)."""
    tq, tk = product.a.shape[-2], product.k.shape[-2]
    if tq >= tk or tk % tq:
        return
    for batch in _batches(trace, product, calls):
        try:
            _side(_heads_view(product.k, batch), trace, product.seq, "keys", calls, whole=False)
        except Underivable:
            continue
        raise Underivable(
            "not bilinear",
            f"the {tq} queries are pooled over windows of the {tk} tokens the keys read (no projection's outputs: "
            "Hiera's max-pooled queries), not a form of two tokens' vectors",
        )


def _learned_queries(trace: Trace, softmax: Softmax, again: Trace, other: Softmax) -> bool:
    """Whether the product's queries are the same in a forward of other tokens (learned queries)."""
    first, second = _product_of(trace, softmax), _product_of(again, other)
    return first is not None and second is not None and torch.equal(first.a, second.a)


def attention_calls(trace: Trace, again: Trace, channels: list[str] | None = None) -> list[AttentionCall]:
    """The attention calls of a forward (again: the same forwards on other tokens). channels: where
    given, the modules of attention over channels are listed in it and left out, unless the forward
    has no other attention."""
    if len(trace.softmaxes) != len(again.softmaxes):
        raise Underivable("layout", "two forwards of the same shapes ran different numbers of softmaxes")
    found, few, over_channels, unpaired = [], None, None, []
    for s, o in zip(trace.softmaxes, again.softmaxes):
        try:
            call = attention_call(trace, s, again, o)
        except Underivable as e:
            if _learned_queries(trace, s, again, o):
                continue  # a learned query's attention (SigLIP's pooling probe): not over the tokens' own queries
            if isinstance(e, ChannelAttention) and channels is not None:
                over_channels = over_channels or e
                channels.append(_innermost(trace, s).name)
                continue
            if TOO_FEW in e.reason:  # refused, unless a later call's reason says more (SAM 2's pooled queries)
                few = few or e
                continue
            raise
        if call is not None:
            found.append(call)
        else:
            unpaired.append(s)
    if few is not None:
        raise few
    if not found and over_channels is not None:
        raise over_channels
    # a softmax over no product the calls pair with their keys, in a module whose q and k are found
    # and that no call read: dot-product attention laid out otherwise, refused rather than left out
    # unsaid (a module a call read is not: Grounding DINO's fusion, text over the image's transposed logits)
    read = {c.call.index for c in found}
    unpaired = [s for s in unpaired if s.calls and _innermost(trace, s).index not in read]
    if unpaired and (qk := _projected_product(trace, unpaired)) is not None:
        raise Underivable(
            "layout",
            f"{qk.call.name}: its softmax reads the q.k product of {qk.q.projection.weight} and "
            f"{qk.k.projection.weight} rearranged (neither the product's columns nor a sliding window's "
            "bands): the derivation cannot pair its logits with their keys",
        )
    if not found:
        why = "products without a softmax (linear attention?)" if trace.products else "no product of two activations"
        raise Underivable("no attention", f"the forward ran no softmax over a q.k product ({why})")
    return found


def _projected_product(trace: Trace, softmaxes: list[Softmax]) -> SimpleNamespace | None:
    """The first product of two activations whose operands are projections' outputs (q and k), in
    a module that ran one of the softmaxes, with its module call and the two sides; None where there
    is none. Only the first product of each such module is tried (a decoder's loop runs one module
    hundreds of times: SLANet's)."""
    softmaxing = {trace.calls[_scope(trace, s.calls)[-1]].name for s in softmaxes if s.calls}
    tried = set()
    for product in trace.products:
        if product.a.ndim < 3 or not product.calls:
            continue
        call = trace.calls[_scope(trace, product.calls)[-1]]
        if call.name not in softmaxing or call.name in tried:
            continue
        tried.add(call.name)
        calls = _subtree(trace, call)
        try:
            a, k = _heads_view(product.a, inputs.B), _heads_view(product.k, inputs.B)
            q_side = _side(a, trace, product.seq, "queries", calls, whole=False)
            k_side = _side(k, trace, product.seq, "keys", calls, whole=False)
        except Underivable:
            continue
        return SimpleNamespace(call=call, q=q_side, k=k_side)
    return None
