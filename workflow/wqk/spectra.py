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

from .metric_catalogue import Context, register

COLUMNS = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")
# An eigenvalue is real when |Im| <= REAL_TOL |lambda| (turns by < 0.06 degrees): numerically
# real eigenvalues of a float32 form split into complex pairs of about that size.
REAL_TOL = 1e-3
FAILED = "a spectral decomposition (LAPACK) did not converge: spectra NaN"
# The factors come normalised (wqk.metrics: Q 2^-a, K 2^-b). LAPACK's decompositions are not
# scale-equivariant to the last bit, so where |a| and |b| are at most this (the weights' scale
# within 2^20 of 1), they run on Q's and K's own Grams (the bits of unnormalised arithmetic,
# safe in float32 there), beyond it on the normalised ones.
OWN_SCALE = 20


def _guarded(fn, x: torch.Tensor, failed: torch.Tensor):
    """fn(x) for a batch x [B, ...]; where LAPACK fails on the batch, item by item, with NaN
    for (and failed[b] set on) the items it fails on: a failed decomposition is no crash."""
    try:
        return fn(x)
    except torch.linalg.LinAlgError:
        pass
    results = []
    for b in range(len(x)):
        try:
            results.append(fn(x[b : b + 1]))
        except torch.linalg.LinAlgError:
            failed[b] = True
            eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device).expand_as(x[:1])
            results.append(_nan_like(fn(eye)))
    if isinstance(results[0], tuple):
        return tuple(torch.cat(parts) for parts in zip(*results, strict=True))
    return torch.cat(results)


def _nan_like(result):
    if isinstance(result, tuple):
        return tuple(torch.full_like(t, torch.nan) for t in result)
    return torch.full_like(result, torch.nan)


def sqrt_factor(
    g: torch.Tensor, failed: torch.Tensor, cholesky=torch.linalg.cholesky_ex, eigh=torch.linalg.eigh
) -> torch.Tensor:
    """L with L L^T = g for symmetric positive semi-definite g [B, n, n]; failed [B] is set
    where no decomposition converged (L NaN there). cholesky, eigh: torch's, or as wqk.head_forms
    splits them over the CPU's threads."""
    low, info = cholesky(g)
    singular = info != 0
    if singular.any():
        sub = failed[singular]
        w, v = _guarded(eigh, g[singular], sub)
        failed[singular] = sub
        low = low.clone()
        low[singular] = v * w.clamp_min(0).sqrt()[..., None, :]
    return low


def _powers(exponent: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """[B, 1, 1]: 2^exponent, exact."""
    return torch.from_numpy(np.ldexp(1.0, exponent)).to(device=like.device, dtype=like.dtype)[:, None, None]


def _own(*exponents: np.ndarray) -> list[np.ndarray]:
    """The exponents that undo the normalisation: each item's, where all are within OWN_SCALE, else 0."""
    keep = np.all([np.abs(e) <= OWN_SCALE for e in exponents], axis=0)
    return [np.where(keep, e, 0) for e in exponents]


def spectra(gram_q, gram_k, cross, q_exp: np.ndarray, k_exp: np.ndarray) -> tuple[dict, torch.Tensor]:
    """(the five columns, failed [B]: a decomposition did not converge, NaN columns) for a
    batch of forms M = Q K^T from G_q, G_k [B, k, k] and C [B, k, k] (None: non-square M, whose
    eigenvalues and symmetric part are undefined) of Q 2^-q_exp, K 2^-k_exp [B]."""
    a, b = _own(q_exp, k_exp)
    up_q, up_k = _powers(a, gram_q), _powers(b, gram_q)
    gram_q, gram_k = gram_q * up_q * up_q, gram_k * up_k * up_k  # exact: powers of two
    cross = cross * (up_q * up_k) if cross is not None else None
    gq, gk = gram_q.double(), gram_k.double()
    failed = torch.zeros(len(gq), dtype=torch.bool, device=gq.device)
    low = sqrt_factor(gq, failed)
    s2 = _guarded(torch.linalg.eigvalsh, low.mT @ gk @ low, failed)
    if cross is None:
        return _columns(s2, None, None, failed), failed
    c = cross.double()
    k = gq.shape[-1]
    low_f = sqrt_factor(torch.cat([torch.cat([gq, c.mT], -1), torch.cat([c, gk], -1)], -2), failed)
    swapped = torch.cat([low_f[..., k:, :], low_f[..., :k, :]], -2)  # J L_F
    half = low_f.mT @ swapped
    mu = _guarded(torch.linalg.eigvalsh, ((half + half.mT) / 4).to(gram_q.dtype), failed)
    return _columns(s2, _guarded(torch.linalg.eigvals, cross, failed), mu, failed), failed


def dense_spectra(m: torch.Tensor, q_exp: np.ndarray, k_exp: np.ndarray) -> tuple[dict, torch.Tensor]:
    """`spectra` of explicit square forms m = Q K^T [B, d, d] of Q 2^-q_exp, K 2^-k_exp: cheaper
    than the factored route when d is at most the factors' width (multi-head attention: W = d)."""
    m = m * _powers(sum(_own(q_exp, k_exp)), m)
    failed = torch.zeros(len(m), dtype=torch.bool, device=m.device)
    s2 = _guarded(torch.linalg.svdvals, m.double(), failed) ** 2
    lam = _guarded(torch.linalg.eigvals, m, failed)
    return _columns(s2, lam, _guarded(torch.linalg.eigvalsh, (m + m.mT) / 2, failed), failed), failed


def _columns(s2, lam, mu, failed: torch.Tensor) -> dict[str, np.ndarray]:
    """The columns from the squared singular values [B, n], the eigenvalues of M and those of
    its symmetric part (None: non-square M); NaN for M = 0 and where a decomposition failed."""
    s2 = s2.double().clamp_min(0)
    top = s2.amax(-1)
    defined = (top > 0) & ~failed
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
    gram_k = f.gram_k_per_head()
    heads, failed = spectra(f.gram_q, gram_k, f.cross, f.q_exp, np.repeat(f.k_exp, f.group))
    for h in torch.nonzero(failed).flatten().tolist():
        f.note(h, FAILED)
    return heads, {}


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
        layer, failed = dense_spectra((lf.qs.T @ lf.ks)[None], *lf.exponents)
    else:
        cross = lf.cross[None] if lf.cross is not None else None
        layer, failed = spectra(lf.gram_q[None], lf.gram_k[None], cross, *lf.exponents)
    if failed.any():
        ctx.factors.note(None, FAILED)
    return {}, layer
