"""Column matching: which column of which recorded tensor a column of another one is a copy of.

Tensors are seen as [N, m]: N rows (batch x tokens), m columns. A target column matches a
source column when one is a multiple of the other to float64 precision (a copy, up to a constant
factor such as a pre-scaling of the queries). Exact copies of random data cannot match by
chance, so a match names where the values came from.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PROBES = 3  # random unit vectors a candidate's projections must match (_candidates)
MAX_PAIRS = 1 << 22  # candidate pairs past which the whole cosine matrix is cheaper
TOL = 1e-7  # float64 copies; 1e-7 admits the ones that went through float32 (GPT-Neo's upcast)


def as_rows(t: torch.Tensor, batch: int, tokens: int) -> torch.Tensor | None:
    """t as [B*T, m] float64 when its leading dims hold B x T tokens (batch first: [B, T, ...],
    [B*T, ...], [B, height, width, ...]; or heads first: [B, H, T, c]; or time first: [T, B, m],
    fairseq's layout in FSMT); None otherwise."""
    if not isinstance(t, torch.Tensor) or t.ndim < 2:
        return None
    if t.ndim == 3 and t.shape[:2] == (tokens, batch) and tokens != batch:
        return t.transpose(0, 1).reshape(batch * tokens, -1).double()
    if t.ndim == 4 and t.shape[0] == batch and t.shape[2] == tokens and t.shape[1] != tokens:
        return t.permute(0, 2, 1, 3).reshape(batch * tokens, -1).double()
    lead = 1
    for k in range(t.ndim - 1):
        lead *= t.shape[k]
        if lead == batch * tokens and (k > 0 or t.ndim == 2 or t.shape[0] == batch * tokens):
            return t.reshape(batch * tokens, -1).double()
        if lead > batch * tokens:
            break
    return None


@dataclass(frozen=True)
class Match:
    source: int  # index of the source tensor
    column: int
    factor: float  # target = factor * source + offset
    offset: float  # a constant added after the projection (DeBERTa's separate query bias)


def match_columns(target: torch.Tensor, sources: list[torch.Tensor]) -> list[Match | None]:
    """For each column of target [N, m], the first source [N, n] column (sources in order) of
    which it is a multiple plus a constant."""
    if not sources:
        return [None] * target.shape[1]
    t = target.double()
    tc = t - t.mean(0)
    tnorm = tc.norm(dim=0)
    s = torch.cat([x.double() for x in sources], dim=1)
    owner = torch.cat([torch.full((x.shape[1],), i) for i, x in enumerate(sources)])
    column = torch.cat([torch.arange(x.shape[1]) for x in sources])
    sc = s - s.mean(0)
    norms = sc.norm(dim=0)
    tu, su = tc / tnorm.clamp_min(1e-300), sc / norms.clamp_min(1e-300)
    varies = tnorm > 1e-12 * t.norm(dim=0)  # a constant column names no source
    found: list[Match | None] = [None] * t.shape[1]
    pairs = list(_candidates(tu, su, varies, norms > 0))
    if not pairs:
        return found
    # every target's first candidate at once; the few it fails go on to their next ones
    js = torch.tensor([j for j, _ in pairs])
    cs = torch.stack([cands[0] for _, cands in pairs])
    factor, offset, holds = _fit(t[:, js], tc[:, js], s[:, cs], sc[:, cs], norms[cs])
    for (j, candidates), f, o, ok, c in zip(pairs, factor.tolist(), offset.tolist(), holds.tolist(), cs.tolist()):
        if ok:
            found[j] = Match(int(owner[c]), int(column[c]), f, o)
            continue
        for c in candidates[1:].tolist():  # the first source that holds it
            f, o, ok = _fit(t[:, [j]], tc[:, [j]], s[:, [c]], sc[:, [c]], norms[[c]])
            if bool(ok):
                found[j] = Match(int(owner[c]), int(column[c]), float(f), float(o))
                break
    return found


def _fit(t, tc, s, sc, norms):
    """Per column pair: the factor and offset of t = factor * s + offset, and whether it holds."""
    factor = (tc * sc).sum(0) / norms**2
    offset = t.mean(0) - factor * s.mean(0)
    return factor, offset, (t - factor * s - offset).norm(dim=0) <= TOL * t.norm(dim=0)


def _candidates(tu: torch.Tensor, su: torch.Tensor, varies: torch.Tensor, live: torch.Tensor):
    """(target column, the source columns in order whose |cos| with it is >= 1 - TOL, a tensor),
    for the target columns that have one, from the centred unit columns tu [N, m] and su [N, S].

    Centred unit columns that are copies up to sign have the same absolute projection on any unit
    vector, near-copies one within sqrt(2 TOL): only the pairs whose projections on PROBES fixed
    random unit vectors all fall that near get a cosine, not the whole [m, S] matrix. Where
    that leaves too many pairs (few rows: every centred column of two rows is a copy of every
    other), the whole matrix is cheaper, and is computed."""
    probes = torch.randn(tu.shape[0], PROBES, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    probes /= probes.norm(dim=0)
    tp, sp = (tu.T @ probes).abs(), (su.T @ probes).abs()  # [m, PROBES], [S, PROBES]
    order = sp[:, 0].argsort()
    first = sp[order, 0]
    near = (2 * TOL) ** 0.5 + 1e-9
    lo = torch.searchsorted(first, tp[:, 0] - near)
    counts = torch.where(varies, torch.searchsorted(first, tp[:, 0] + near, right=True) - lo, 0)
    if int(counts.sum()) > MAX_PAIRS:
        hit = ((tu.T @ su).abs() >= 1 - TOL) & live & varies[:, None]
        for j in hit.any(1).nonzero().flatten().tolist():
            yield j, hit[j].nonzero().flatten()
        return
    js = torch.repeat_interleave(torch.arange(len(counts)), counts)  # every (target, candidate) pair
    cs = order[lo[js] + torch.arange(len(js)) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)]
    keep = ((sp[cs] - tp[js]).abs() <= near).all(-1) & live[cs]
    js, cs = js[keep], cs[keep]
    keep = (su[:, cs] * tu[:, js]).sum(0).abs() >= 1 - TOL
    key = (js[keep] * su.shape[1] + cs[keep]).sort().values  # by target, then source
    targets, counts = torch.unique_consecutive(key // su.shape[1], return_counts=True)
    yield from zip(targets.tolist(), (key % su.shape[1]).split(counts.tolist()))
