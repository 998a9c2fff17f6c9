"""The null of "Fingerprint, Not Blueprint" with z-scores (wqk.metric_registry entry
"fingerprint_null", opt-in): per head, forms with the head's own singular values in random
orthonormal frames, M_null = U diag(s) V^T (their paper calls it Ginibre; it is not), scored
with dir_frac, D_head, imag_mass and henrici (wqk.fingerprint); {m}_null_mean, {m}_null_std
(n - 1) over DRAWS draws and {m}_z = (m - mean) / std.

Nothing d-dimensional is drawn. With Q = U diag(s), K = V: G_q = diag(s^2), G_k = I and
C = B diag(s), B = V^T U (r x r, r the head's rank). For independent Haar frames B is
distributed as the first r rows of one Haar d x r frame, the Q of Z = Q R (R with a positive
diagonal) for Gaussian Z, so B = A R^-1 with A an r x r Gaussian, R^T R = A^T A + W (Cholesky)
and W ~ Wishart_r(d - r, I) (Bartlett's decomposition): O(r^3) per draw. For a LayerNorm model the frames lie in 1^perp (theirs:
centred Gaussians): d - 1 dimensions. Exact Haar frames, where theirs (numpy QR without a
sign correction) are slightly biased; their std has ddof 0 (z larger by sqrt(R/(R - 1))).
Draws are seeded by the model, stack, layer and head (`Context.seed_key`): reruns are
byte-identical, and two heads never share draws.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from .fingerprint import basic, folded_forms, in_rank
from .metric_catalogue import FINGERPRINT_NULL_COLUMNS, Context, register

DRAWS = 100  # per head (theirs: 300); the z-scores' Monte-Carlo error is about 1/sqrt(2 DRAWS) of z
NULLED = ("dir_frac", "D_head", "imag_mass", "henrici")


def seed_of(*key) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, key)).encode()).digest()[:8], "little")


def haar_blocks(rng: np.random.Generator, draws: int, r: int, d: int) -> torch.Tensor:
    """[draws, r, r] float64: V^T U for independent Haar d x r frames U, V (d >= r)."""
    a = rng.standard_normal((draws, r, r))
    n = d - r
    if n >= r:  # Bartlett: W = L L^T, L lower triangular, L_ii^2 ~ chi^2(n - i), L_ij ~ N(0, 1) below
        low = np.tril(rng.standard_normal((draws, r, r)), -1)
        idx = np.arange(r)
        low[:, idx, idx] = np.sqrt(rng.chisquare(n - idx, size=(draws, r)))
        w = low @ low.transpose(0, 2, 1)
    else:  # too few dimensions left for Bartlett's: the rest of Z itself
        rest = rng.standard_normal((draws, n, r))
        w = rest.transpose(0, 2, 1) @ rest
    a = torch.from_numpy(a)
    upper = torch.linalg.cholesky(a.mT @ a + torch.from_numpy(w), upper=True)
    return torch.linalg.solve_triangular(upper, a, upper=True, left=False)  # A R^-1


def null_of_head(s: np.ndarray, d: int, rng: np.random.Generator, draws: int = DRAWS) -> dict[str, np.ndarray]:
    """[draws] of each NULLED metric for singular values s (descending, the head's rank) in
    random frames of R^d."""
    b = haar_blocks(rng, draws, len(s), d)
    sd = torch.from_numpy(s)
    c = b * sd[None, None, :]  # B diag(s)
    fro2 = (sd * sd).sum().expand(draws)
    trace_sq = (c * c.mT).sum((-2, -1))
    return {m: v.numpy() for m, v in basic(fro2, trace_sq, torch.linalg.eigvals(c)).items()}


@register(
    "fingerprint_null",
    FINGERPRINT_NULL_COLUMNS,
    "per head, qk-spectral-fingerprint's null: the head's singular values in random Haar frames (of 1^perp for "
    "a LayerNorm), DRAWS draws seeded by model, layer and head: {m}_null_mean, {m}_null_std and {m}_z for "
    "dir_frac, D_head, imag_mass, henrici.",
    cheap=False,
)
def head_fingerprint_null(ctx: Context):
    if ctx.factors.cross is None:
        return {}, {}
    forms = folded_forms(ctx)
    real = basic(forms.fro2, forms.trace_sq, forms.eig[0])
    sv2, kept = forms.sv2.cpu().numpy(), in_rank(forms.sv2).cpu().numpy()
    d = ctx.block.q.shape[1] - (1 if ctx.block.norm_centred and ctx.block.q_gain is not None else 0)
    out = {f"{m}_{x}": np.full(len(sv2), np.nan) for m in NULLED for x in ("null_mean", "null_std", "z")}
    for h, row in enumerate(sv2):
        if forms.failed[h] or not row[0] > 0:
            continue
        s = np.sqrt(row[kept[h]])  # the head's rank; the scale is irrelevant: ratios
        rng = np.random.default_rng(seed_of(ctx.seed_key, ctx.block.stack, ctx.block.layer, h))
        draws = null_of_head(s / s[0], d, rng)
        for m in NULLED:
            mean, std = draws[m].mean(), draws[m].std(ddof=1)
            out[f"{m}_null_mean"][h], out[f"{m}_null_std"][h] = mean, std
            out[f"{m}_z"][h] = (float(real[m][h]) - mean) / std if std > 0 else np.nan
    return out, {}
