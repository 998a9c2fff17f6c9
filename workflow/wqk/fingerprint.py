"""The head metrics of "Fingerprint, Not Blueprint" (HengyuLi-Ozaki-lab/qk-spectral-fingerprint),
wqk.metric_registry entry "fingerprint", from the k x k forms of wqk.head_forms.

Their input is the form the model applies to its normalised states: the pre-norm gain folded
on both sides, diag(g) M diag(g), and for a LayerNorm the centring too, C diag(g) M diag(g) C
with C = I - 11^T/d (their TransformerLens pipeline centres W_Q and W_K when it folds a LayerNorm;
from raw weights the centring must be done: here). A block without a pre-norm gain (post-norm
models: BERT) is analysed raw. With
lambda the eigenvalues of M (eig(C), the nonzero part of its spectrum), per head:

    dir_frac = ||M_A||_F / ||M||_F = sqrt(max(0, (1 - tr M^2 / ||M||^2) / 2))
    D_head = sum |Im lambda| / sum |lambda|,   imag_mass = sum |Im lambda| / ||M||_F
    henrici = sqrt(max(0, ||M||^2 - sum |lambda|^2)) / ||M||_F
    cond_eig = the 2-norm condition number of M's unit right eigenvectors (of lambda)
    spectral_radius_raw = max |lambda|, in the weights' own scale
    content_pos_frac = sum of the positive eigenvalues of (M + M^T)/2 over the sum of their |.|
    prin_angle_mean, prin_angle_max: principal angles (degrees) between span W_q and span W_k

and, on rotary models, with the model's own pairs (rotate-half or interleaved) and frequencies
theta_t: per pair t the query columns a, c and key columns b, d of the pair give
||Re M_t||^2 = |a|^2|b|^2 + |c|^2|d|^2 + 2(a.c)(b.d) and ||Im M_t||^2 = |c|^2|b|^2 + |a|^2|d|^2 - 2(a.c)(b.d);
rope_imag_frac = sum ||Im|| / sum (||Re|| + ||Im||) (norms, not squares, as theirs),
freq_centroid = sum theta ||Im|| / sum ||Im|| (rad/token), hi_freq_dir = the share of sum ||Im||
on the highest-frequency half of the pairs.
"""

from __future__ import annotations

import numpy as np
import torch

from .blocks import AttentionBlock
from .head_forms import EIGVALSH, HeadForms, memo
from .metric_catalogue import FINGERPRINT_COLUMNS, Context, register
from .metrics import Factors, finite, head_cross, repeated, sym_gram
from .rotary import pair_rows

COLUMNS = FINGERPRINT_COLUMNS
SYM_CUT = 1e-9  # |eigenvalue| of the symmetric part below this times the largest: left out (theirs)
# A singular value below RANK_CUT times the largest is outside M's rank (theirs: cond_eig). From the
# Grams, sigma^2 is resolved to about k eps of the largest, so the cut is the larger of the two.
RANK_CUT = 1e-9


def folded_forms(ctx: Context) -> HeadForms:
    """The forms of the fingerprint's input, in float64 (their rank cut, 1e-9 of the largest
    singular value, needs it: float32 Grams resolve singular values to about 3e-4), built once per block."""
    return memo(ctx.factors, "fingerprint", lambda: folded(ctx.block, ctx.factors))


def folded(block: AttentionBlock, f: Factors) -> HeadForms:
    """The HeadForms of C diag(g) Q, C diag(g) K (C only for a LayerNorm; raw Q, K without a gain) from
    the scorer's float32 factors Q 2^-e: in float64, times the gain, they are exact (24-bit by 24-bit
    products), so the forms keep the exponents e; a gain's non-finite entries count as 0."""
    qt, kt = f.qt.double(), f.kt.double()
    if block.q_gain is not None and block.k_gain is not None:
        qt, kt = qt.mul_(finite(block.q_gain.to(qt))), kt.mul_(finite(block.k_gain.to(kt)))
        if block.norm_centred:
            qt, kt = qt.sub_(qt.mean(-1, keepdim=True)), kt.sub_(kt.mean(-1, keepdim=True))
    gram_k = repeated(sym_gram(kt), f.group)
    return HeadForms(sym_gram(qt), gram_k, head_cross(qt, kt), f.head_exponents().astype(np.int64), group=f.group)


def basic(fro2: torch.Tensor, trace_sq: torch.Tensor, lam: torch.Tensor) -> dict[str, torch.Tensor]:
    """dir_frac, D_head, imag_mass, henrici from ||M||^2, tr M^2 and M's eigenvalues (also of its null)."""
    fro = fro2.sqrt()
    mod, imag = lam.abs(), lam.imag.abs()
    return {
        "dir_frac": (0.5 * (1 - trace_sq / torch.where(fro2 > 0, fro2, 1.0))).clamp_min(0).sqrt(),
        "D_head": imag.sum(-1) / (mod.sum(-1) + 1e-300),
        "imag_mass": imag.sum(-1) / (fro + 1e-300),
        "henrici": (fro2 - (mod * mod).sum(-1)).clamp_min(0).sqrt() / (fro + 1e-300),
    }


def fingerprint_columns(forms: HeadForms, rope=None) -> dict[str, np.ndarray]:
    fro2 = forms.fro2
    lam, _ = forms.eig
    out = basic(fro2, forms.trace_sq, lam)
    out["cond_eig"] = cond_eig(forms)
    scale = torch.from_numpy(np.ldexp(1.0, forms.scale)).to(fro2)
    out["spectral_radius_raw"] = lam.abs().amax(-1) * scale
    mu = forms.sym_eigenvalues
    mu = torch.where(mu.abs() > SYM_CUT * mu.abs().amax(-1, keepdim=True), mu, 0.0)
    out["content_pos_frac"] = mu.clamp_min(0).sum(-1) / (mu.abs().sum(-1) + 1e-300)
    angles = [np.degrees(np.arccos(c)) for c in forms.cosines()]
    out["prin_angle_mean"] = torch.tensor([a.mean() if a.size else np.nan for a in angles], dtype=torch.float64)
    out["prin_angle_max"] = torch.tensor([a.max() if a.size else np.nan for a in angles], dtype=torch.float64)
    if rope is not None:
        out |= _rotary(forms, rope)
    defined = (fro2 > 0) & ~forms.failed
    return {c: torch.where(defined.to(v.device), v, torch.nan).cpu().numpy().astype(np.float64) for c, v in out.items()}


def in_rank(sv2: torch.Tensor) -> torch.Tensor:
    """[B, k] whether each sigma^2 (descending) is within M's rank: the larger of their cut and the
    Gram route's resolution (k eps of the largest sigma^2)."""
    resolved = sv2.shape[-1] * torch.finfo(sv2.dtype).eps
    return sv2 > max(RANK_CUT**2, resolved) * sv2[..., :1]


def cond_eig(forms: HeadForms) -> torch.Tensor:
    """[B] the 2-norm condition number of M's unit right eigenvectors for the r eigenvalues of
    largest modulus, r its rank (singular values above the cut of the largest): as theirs, the
    eigenvectors of its rank-r core; the other k - r eigenvalues of C are the rank deficit's zeros."""
    lam, y = forms.eig
    rank = in_rank(forms.sv2).sum(-1)
    order = lam.abs().argsort(-1, descending=True)
    y = torch.take_along_dim(y, order[..., None, :], -1)
    out = torch.full((len(lam),), torch.nan, dtype=torch.float64, device=lam.device)
    for r in rank.unique().tolist():
        heads = rank == r
        if r == 0:
            continue
        yr = y[heads][..., :r]
        g = yr.mH @ forms.gram_q[heads].to(yr.dtype) @ yr
        norm = g.diagonal(dim1=-2, dim2=-1).real.clamp_min(0).sqrt()
        g = g / (norm[..., :, None] * norm[..., None, :]).clamp_min(torch.finfo(torch.float64).tiny)
        w = EIGVALSH(g).clamp_min(0)
        out[heads] = torch.where(w[..., 0] > 0, w[..., -1].sqrt() / w[..., 0].sqrt(), torch.inf)
    return out


def _rotary(forms: HeadForms, rope) -> dict[str, torch.Tensor]:
    a, b = pair_rows(rope)
    gq, gk = forms.gram_q, forms.gram_k
    aa, cc, ac = gq[:, a, a], gq[:, b, b], gq[:, a, b]  # query columns of each pair: |a|^2, |c|^2, a.c
    bb, dd, bd = gk[:, a, a], gk[:, b, b], gk[:, a, b]
    re = (aa * bb + cc * dd + 2 * ac * bd).clamp_min(0).sqrt()
    im = (cc * bb + aa * dd - 2 * ac * bd).clamp_min(0).sqrt()
    theta = torch.tensor(rope.inv_freq, dtype=im.dtype, device=im.device)
    high = torch.argsort(theta, descending=True)[: max(1, len(theta) // 2)]
    total = im.sum(-1)
    return {
        "rope_imag_frac": total / (re.sum(-1) + total + 1e-30),
        "freq_centroid": (im * theta).sum(-1) / (total + 1e-30),
        "hi_freq_dir": im[:, high].sum(-1) / (total + 1e-30),
    }


@register(
    "fingerprint",
    COLUMNS,
    "per head, of diag(g) M diag(g) (centred for a LayerNorm: C M C), as qk-spectral-fingerprint: dir_frac "
    "||M_A||/||M||; D_head sum|Im lambda| / sum|lambda|; imag_mass sum|Im lambda| / ||M||; henrici; cond_eig; "
    "spectral_radius_raw max|lambda|; content_pos_frac; prin_angle_mean/max (degrees); on rotary models "
    "rope_imag_frac, freq_centroid, hi_freq_dir.",
    cheap=False,
)
def head_fingerprint(ctx: Context):
    if ctx.factors.cross is None:  # non-square M (cross-attention of unequal widths): no eigenvalues
        return {}, {}
    forms = folded_forms(ctx)
    return fingerprint_columns(forms, ctx.block.rope), {}
