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
    """t [B, T, ...] (or [B*T, ...], or heads first: [B, H, T, c]) as [B*T, m] float64; None when
    its leading dims are not B, T."""
    if not isinstance(t, torch.Tensor):
        return None
    if t.ndim == 4 and t.shape[0] == batch and t.shape[2] == tokens and t.shape[1] != tokens:
        return t.permute(0, 2, 1, 3).reshape(batch * tokens, -1).double()
    if t.ndim >= 3 and t.shape[0] == batch and t.shape[1] == tokens:
        return t.reshape(batch * tokens, -1).double()
    if t.ndim >= 2 and t.shape[0] == batch * tokens:
        return t.reshape(batch * tokens, -1).double()
    return None


@dataclass(frozen=True)
class Match:
    source: int  # index of the source tensor
    column: int
    factor: float  # target = factor * source


def match_columns(target: torch.Tensor, sources: list[torch.Tensor]) -> list[Match | None]:
    """For each column of target [N, m], the first source [N, n] column it is a multiple of."""
    t = target.double()
    tn = t / t.norm(dim=0).clamp_min(1e-300)
    found: list[Match | None] = [None] * t.shape[1]
    for s_index, s in enumerate(sources):
        s = s.double()
        norms = s.norm(dim=0)
        sn = s / norms.clamp_min(1e-300)
        cos = tn.T @ sn  # [m, n]
        best = cos.abs().argmax(dim=1)
        for j in range(t.shape[1]):
            if found[j] is not None or t[:, j].norm() == 0:
                continue
            c = int(best[j])
            if abs(float(cos[j, c])) < 1 - TOL or norms[c] == 0:
                continue
            factor = float(t[:, j] @ s[:, c] / norms[c] ** 2)
            if (t[:, j] - factor * s[:, c]).norm() <= TOL * t[:, j].norm():
                found[j] = Match(s_index, c, factor)
    return found
