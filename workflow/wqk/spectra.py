"""Spectra of M = Q K^T from k x k quantities (wqk.metric_registry entries "spectra", per
head, and "layer_spectra", the layer form).

With G_q = Q^T Q, G_k = K^T K and C = K^T Q (k x k):
- singular values: sigma^2 = eig(G_q G_k) = eigvalsh(L^T G_k L), G_q = L L^T;
- nonzero eigenvalues of M (d x d) = eig(C) (k x k), as eig(AB) = eig(BA) but for zeros;
- the symmetric part S = (M + M^T) / 2 = F J F^T / 2 with F = [Q K], J = [[0, I], [I, 0]]:
  its nonzero eigenvalues are those of L_F^T J L_F / 2, F^T F = [[G_q, C^T], [C, G_k]] = L_F L_F^T.
Square roots by Cholesky; where a Gram is singular (rank-deficient factors), by eigh.
The singular values are computed in float64; the two costlier decompositions (eig of C,
the 2k x 2k eigvalsh) in the scoring dtype, float32 by default: they are most of the cost
and float32 keeps the shares and ratios well within 1e-4 (tests/test_metric_registry.py).
"""

from __future__ import annotations

import numpy as np
import torch

from .metric_registry import Context, register

COLUMNS = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")
# An eigenvalue is real when |Im| <= REAL_TOL |lambda| (turns by < 0.06 degrees): numerically
# real eigenvalues of a float32 form split into complex pairs of about that size.
REAL_TOL = 1e-3


def sqrt_factor(g: torch.Tensor) -> torch.Tensor:
    """L with L L^T = g for symmetric positive semi-definite g [B, n, n]."""
    low, info = torch.linalg.cholesky_ex(g)
    singular = info != 0
    if singular.any():
        w, v = torch.linalg.eigh(g[singular])
        low = low.clone()
        low[singular] = v * w.clamp_min(0).sqrt()[..., None, :]
    return low


def spectra(gram_q: torch.Tensor, gram_k: torch.Tensor, cross: torch.Tensor | None) -> dict[str, np.ndarray]:
    """The five columns for a batch of forms from G_q, G_k [B, k, k] and C [B, k, k] (None:
    non-square M, whose eigenvalues and symmetric part are undefined)."""
    gq, gk = gram_q.double(), gram_k.double()
    low = sqrt_factor(gq)
    s2 = torch.linalg.eigvalsh(low.mT @ gk @ low)
    if cross is None:
        return _columns(s2, None, None)
    c = cross.double()
    k = gq.shape[-1]
    low_f = sqrt_factor(torch.cat([torch.cat([gq, c.mT], -1), torch.cat([c, gk], -1)], -2))
    swapped = torch.cat([low_f[..., k:, :], low_f[..., :k, :]], -2)  # J L_F
    half = low_f.mT @ swapped
    mu = torch.linalg.eigvalsh(((half + half.mT) / 4).to(gram_q.dtype))
    return _columns(s2, torch.linalg.eigvals(cross), mu)


def dense_spectra(m: torch.Tensor) -> dict[str, np.ndarray]:
    """The five columns of explicit square forms M [B, d, d]: cheaper than the factored route
    when d is at most the factors' width (a layer of multi-head attention: W = d)."""
    s2 = torch.linalg.svdvals(m.double()) ** 2
    return _columns(s2, torch.linalg.eigvals(m), torch.linalg.eigvalsh((m + m.mT) / 2))


def _columns(s2: torch.Tensor, lam: torch.Tensor | None, mu: torch.Tensor | None) -> dict[str, np.ndarray]:
    """The columns from the squared singular values [B, n], the eigenvalues of M and those of
    its symmetric part (None: non-square M); NaN for M = 0."""
    s2 = s2.double().clamp_min(0)
    top = s2.amax(-1)
    defined = top > 0
    safe_top = torch.where(defined, top, 1.0)
    sigma = s2.sqrt()
    p = sigma / torch.where(defined, sigma.sum(-1), 1.0)[..., None]
    entropy = -torch.where(p > 0, p * p.log(), 0.0).sum(-1)
    out = {"stable_rank": s2.sum(-1) / safe_top, "effective_rank": entropy.exp()}
    if lam is None:
        nan = torch.full_like(top, torch.nan)
        out |= {"spectral_radius": nan, "real_eig_share": nan, "sym_positive_share": nan}
    else:
        lam, mu = lam.to(torch.complex128), mu.double()
        mod = lam.abs()
        real = lam.imag.abs() <= REAL_TOL * mod
        out["spectral_radius"] = mod.amax(-1) / safe_top.sqrt()
        out["real_eig_share"] = (mod * real).sum(-1) / torch.where(defined, mod.sum(-1), 1.0)
        out["sym_positive_share"] = mu.clamp_min(0).sum(-1) / torch.where(defined, mu.abs().sum(-1), 1.0)
    return {name: torch.where(defined, v, torch.nan).cpu().numpy().astype(np.float64) for name, v in out.items()}


@register(
    "spectra",
    COLUMNS,
    "per head: stable rank ||M||_F^2 / ||M||_2^2; effective rank exp(H(sigma / sum sigma)); spectral radius "
    "max|lambda(M)| / ||M||_2 (1 for a normal M); real_eig_share, the share of sum|lambda| on real eigenvalues; "
    "sym_positive_share, the share of the symmetric part's sum|mu| on positive eigenvalues.",
)
def head_spectra(ctx: Context):
    f = ctx.factors
    gram_k = f.gram_k.repeat_interleave(f.group, 0) if f.group > 1 else f.gram_k
    return spectra(f.gram_q, gram_k, f.cross), {}


@register(
    "layer_spectra",
    COLUMNS,
    "the spectra columns of the layer form (sum over heads): W x W decompositions, W = n_kv_heads x head_dim "
    "(up to d): costly for wide layers, so not in the default set.",
    cheap=False,
)
def layer_spectra(ctx: Context):
    lf = ctx.factors.layer()
    (width, d_q), d_k = lf.qs.shape, lf.ks.shape[1]
    if d_q == d_k <= width:  # multi-head attention: M itself is no wider than its factors
        return {}, dense_spectra((lf.qs.T @ lf.ks)[None])
    cross = lf.cross[None] if lf.cross is not None else None
    return {}, spectra(lf.gram_q[None], lf.gram_k[None], cross)
