"""Each head's form M = Q K^T (d x d, rank <= k), decomposed from k x k and 2k x 2k matrices in
float64, once per block and input, for the follow-up papers' metric families (wqk.fingerprint,
wqk.bilinear_forms, wqk.qk_spectra): never a d x d decomposition.

With G_q = Q^T Q, G_k = K^T K and C = K^T Q (k x k; grouped-query key heads repeated):
- ||M||_F^2 = <G_q, G_k>, tr M = tr C, tr M^2 = <C, C^T>;
- sigma^2(M): eigvalsh(L^T G_k L), G_q = L L^T (k values: M's singular values, zeros for its rank deficit);
- eigenvalues of M: eig(C) (k values; M's other d - k are structural zeros); its right eigenvectors are
  Q y for C y = lambda y, so their Gram is Y^H G_q Y (wqk.fingerprint.cond_eig);
- the symmetric part S = (M + M^T) / 2 = F J F^T / 2, F = [Q K], J = [[0, I], [I, 0]]: its nonzero
  eigenvalues are those of L_F^T J L_F / 2 (2k values), F^T F = L_F L_F^T;
- principal angles between span Q and span K: arccos of the singular values of B_q^T B_k for
  orthonormal bases B = F L^-T (G = L L^T), i.e. of L_q^-1 C^T L_k^-T; where G is near singular,
  B = F V W^-1/2 (G = V W V^T) over the eigenvalues above a cut.
The decompositions run split over the CPU's threads (wqk.per_thread).
The factors arrive normalised (wqk.metrics.Factors: M_h 2^-e); `scale` gives 2^e per head, for the
quantities that carry the weights' scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from .metrics import repeated
from .per_thread import per_thread
from .spectra import _guarded, sqrt_factor

EIG, EIGVALSH, EIGH, SVDVALS, CHOLESKY = (
    per_thread(f)
    for f in (
        torch.linalg.eig,
        torch.linalg.eigvalsh,
        torch.linalg.eigh,
        torch.linalg.svdvals,
        torch.linalg.cholesky_ex,
    )
)

RANK_TOL = 1e-10  # a Gram eigenvalue below this times the largest is outside the span (principal angles)


@dataclass
class HeadForms:
    """The decompositions of a batch of heads' forms [B]; each computed on first use."""

    gram_q: torch.Tensor  # [B, k, k] float64
    gram_k: torch.Tensor
    cross: torch.Tensor | None  # C = K^T Q; None: a non-square M (no eigenvalues, no symmetric part)
    scale: np.ndarray  # [B] int: M = 2^scale times the form these matrices hold
    failed: torch.Tensor = field(default=None)  # [B] a decomposition did not converge
    group: int = 1  # query heads per key head, in a row: gram_k repeats each key head's Gram this often

    def __post_init__(self):
        if self.failed is None:
            self.failed = torch.zeros(len(self.gram_q), dtype=torch.bool, device=self.gram_q.device)

    @classmethod
    def of(cls, factors) -> HeadForms:
        """The forms of a block's query heads (wqk.metrics.Factors; square forms only)."""
        f = factors
        gram_k = f.gram_k_per_head()
        cross = f.cross.double() if f.cross is not None else None
        return cls(f.gram_q.double(), gram_k.double(), cross, f.head_exponents().astype(np.int64), group=f.group)

    @cached_property
    def fro2(self) -> torch.Tensor:
        return (self.gram_q * self.gram_k).sum((-2, -1))

    @cached_property
    def trace(self) -> torch.Tensor:
        return self.cross.diagonal(dim1=-2, dim2=-1).sum(-1)

    @cached_property
    def trace_sq(self) -> torch.Tensor:
        """tr M^2."""
        return (self.cross * self.cross.mT).sum((-2, -1))

    @cached_property
    def low_q(self) -> torch.Tensor:
        return sqrt_factor(self.gram_q, self.failed, CHOLESKY, EIGH)

    @cached_property
    def sv2(self) -> torch.Tensor:
        """sigma^2(M) [B, k], descending, >= 0."""
        s2 = _guarded(EIGVALSH, self.low_q.mT @ self.gram_k @ self.low_q, self.failed)
        return s2.clamp_min(0).flip(-1)

    @cached_property
    def eig(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(eigenvalues [B, k], eigenvectors Y [B, k, k], unit columns) of C."""
        return _guarded(EIG, self.cross, self.failed)

    @cached_property
    def sym_eigenvalues(self) -> torch.Tensor:
        """The 2k eigenvalues of S = (M + M^T)/2 that are not structural zeros, ascending."""
        k = self.gram_q.shape[-1]
        g = torch.cat([torch.cat([self.gram_q, self.cross.mT], -1), torch.cat([self.cross, self.gram_k], -1)], -2)
        low = sqrt_factor(g, self.failed, CHOLESKY, EIGH)
        x = low[..., :k, :].mT @ low[..., k:, :]  # L_F^T J L_F = X + X^T, L_F's row blocks [L_1; L_2], X = L_1^T L_2
        return _guarded(EIGVALSH, (x + x.mT) / 2, self.failed)

    def cosines(self) -> list[np.ndarray]:
        """Per head, the cosines of the principal angles between span Q and span K (min of the
        two ranks values, descending): the singular values of W_q^T C^T W_k for whiteners W
        (F W has orthonormal columns, F = Q or K)."""
        (wq, keep_q), (wk, keep_k) = self._whitener(self.gram_q, 1), self._whitener(self.gram_k, self.group)
        cos = SVDVALS(wq.mT @ self.cross.mT @ wk).clamp(0, 1).cpu().numpy()
        n = torch.minimum(keep_q.sum(-1), keep_k.sum(-1)).cpu().numpy()
        return [c[:m] for c, m in zip(cos, n)]

    def _whitener(self, gram: torch.Tensor, repeat: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(W [B, k, k], kept [B, k]) of each Gram (each key head's once: `repeat` copies in a row):
        L^-T (G = L L^T) where every eigenvalue of G is certainly above RANK_TOL of the largest
        (tr G ||L^-1||_F^2 bounds their ratio), else V W^-1/2 of its eigenvalues above that cut."""
        g = gram[::repeat]
        low, info = CHOLESKY(g)
        inv = torch.linalg.solve_triangular(low, torch.eye(g.shape[-1], dtype=g.dtype, device=g.device), upper=False)
        bound = g.diagonal(dim1=-2, dim2=-1).sum(-1) * (inv * inv).sum((-2, -1))
        whitener, kept = inv.mT, torch.ones(g.shape[:-1], dtype=torch.bool, device=g.device)
        uncertain = (info != 0) | ~(bound * RANK_TOL < 1)
        if uncertain.any():
            failed = self.failed[::repeat][uncertain]
            w, v = _guarded(EIGH, g[uncertain], failed)
            keep = w > RANK_TOL * w.amax(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
            whitener[uncertain] = (
                v * torch.where(keep, w.clamp_min(torch.finfo(w.dtype).tiny).rsqrt(), 0.0)[..., None, :]
            )
            kept[uncertain] = keep
            lost = torch.zeros_like(uncertain)
            lost[uncertain] = failed
            self.failed |= repeated(lost, repeat)
        return repeated(whitener, repeat), repeated(kept, repeat)


def memo(factors, key: str, build) -> HeadForms:
    """The HeadForms of `factors` under `key` (an input: "raw", "gain_folded"), built once per
    block: the families that read the same input share its decompositions."""
    if key not in factors.forms:
        factors.forms[key] = build()
    return factors.forms[key]
