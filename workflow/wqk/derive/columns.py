"""Column matching: which column of which recorded tensor a column of another one is a copy of.

Tensors are seen as [N, m]: N rows (batch x tokens), m columns. A target column matches a
source column when one is a multiple of the other to float64 precision (a copy, up to a constant
factor such as a pre-scaling of the queries). Exact copies of random data cannot match by
chance, so a match names where the values came from.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TOL = 1e-7  # float64 copies; 1e-7 admits the ones that went through float32 (GPT-Neo's upcast)


def as_rows(t: torch.Tensor, batch: int, tokens: int) -> torch.Tensor | None:
    """t as [B*T, m] float64 when its leading dims hold B x T tokens (batch first: [B, T, ...],
    [B*T, ...], [B, height, width, ...]; or heads first: [B, H, T, c]); None otherwise."""
    if not isinstance(t, torch.Tensor) or t.ndim < 2:
        return None
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
    cos = (tc / tnorm.clamp_min(1e-300)).T @ (sc / norms.clamp_min(1e-300))  # [m, all source columns]
    hit = (cos.abs() >= 1 - TOL) & (norms > 0)
    found: list[Match | None] = [None] * t.shape[1]
    for j in range(t.shape[1]):
        if tnorm[j] <= 1e-12 * t[:, j].norm():
            continue
        for c in hit[j].nonzero().flatten().tolist():  # the first source that holds it
            factor = float(tc[:, j] @ sc[:, c] / norms[c] ** 2)
            offset = float(t[:, j].mean() - factor * s[:, c].mean())
            if (t[:, j] - factor * s[:, c] - offset).norm() <= TOL * t[:, j].norm():
                found[j] = Match(int(owner[c]), int(column[c]), factor, offset)
                break
    return found
