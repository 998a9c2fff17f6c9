"""Symmetry and directionality of bilinear forms M = Q K^T (DESIGN.md sections 2-3).

    symmetry(M)       = <M, M^T>_F / ||M||_F^2                      in [-1, 1]
    directionality(M) = (E_r - E_c) / (E_r + E_c)                   in [-1, 1]

E_r (E_c) is the excess of the row (column) norms of M over mean + n_std * std (Bessel),
summed over the rows (columns) above that threshold; negative directionality means a few
columns (keys) dominate; with no norm above the threshold (E_r + E_c = 0) it is 0. A zero M
has both scores NaN, with a "reason". `score_factors` never forms M: it works from w x w
Grams, batched over a leading dimension; `score_dense` is the oracle on explicit matrices.

The factored path works on the transposed factors Qt = Q^T [w, d], the layout of nn.Linear
weights, so that a checkpoint's q/k tensors are scored without a transposing copy. Two
symmetric products take half the flops of a matmul, done as block-triangular products:
the Gram X X^T (upper block triangle, then mirrored) and the quadratic forms
diag(X^T G X) = colsum((D + 2 T) X * X) for G = D + T + T^T, T strictly upper.

The scores are scale-free, their float arithmetic is not: each head's factors are scaled by
a power of two that brings their largest entry into [1/2, 1) before any product (the layer
form's, by one power for the whole layer), so that the Grams and fourth powers neither
overflow (max |w| >= 1e10 in float32) nor underflow (<= 1e-15). Scaling by 2^-e is exact
and commutes with every product and sum, so for ordinary weights every score is bit-identical
to the unscaled arithmetic; the absolute columns (fro_norm, E_r, E_c) are scaled back, exactly.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

from . import vml
from .blocks import AttentionBlock
from .contracts import SCORE_FIELDS as FIELDS
from .contracts import resolve_device

# Above this many bytes a dense per-layer M is never formed, whatever the flop count says.
DENSE_BYTES_LIMIT = 2 << 30
# Row blocks of the block-triangular products: fewer blocks waste flops above the
# diagonal, more make each matmul too thin to run at full speed (measured on CPU: blocks
# of 32 rows are slower than fewer, larger products).
TRIANGLE_BLOCKS = 8
MIN_TRIANGLE_BLOCK = 64
# Elements of one chunk of products in the quadratic forms: 2 MB of float32 stays in
# cache until it is reduced (a quarter less time than unchunked on CPU).
QUAD_CHUNK_ELEMENTS = 1 << 19
# The squared row norms of M add up to ||M||_F^2, and so do the column norms. Computed apart (the
# quadratic forms; the Grams' product), they agree to a few float32 roundings: at most 3.5e-7 of
# it on the quick start's models and tiny ones of ten architectures. A wider gap means a product
# came out wrong (as the first layer's row norms did now and then on a busy 2-core Xeon: issue
# 20), and the forms are computed in float64 (`_checked_norms`).
NORMS_SUM_TOLERANCE = 4e-6
# A fault can also stay within that gap: E_r of 13 heads of a first layer off by up to 4e-3 of
# it in one of two rehearsals, E_c and the sums unchanged (issue 29). So the forms are computed
# until two results in a row agree bit for bit, at most this many times, each with its own
# repeated key Gram (`repeated`). That fault turned out to be after the norms, in their square
# roots (MKL's VML set up from two threads at once: wqk.vml); these checks stay as a guard.
NORM_ATTEMPTS = 4

log = logging.getLogger(__name__)
vml.prime()  # before any score: MKL's vector functions set up from one thread (wqk.vml)


def _excess(norms: torch.Tensor, n_std: float) -> torch.Tensor:
    """Sum over entries above mean + n_std * std of (entry - threshold); norms: [B, n]."""
    threshold = norms.mean(-1, keepdim=True) + n_std * norms.std(-1, keepdim=True)
    return torch.relu(norms - threshold).sum(-1)


def _finish(fro2, sym_num, row2, col2, n_std, square: bool) -> dict:
    """Scores of a batch from ||M||^2, <M, M^T> [B] and squared row and column norms [B, n]."""
    fro2, sym_num = fro2.double(), sym_num.double()
    e_r = _excess(row2.clamp_min(0).sqrt(), n_std).double()
    e_c = _excess(col2.clamp_min(0).sqrt(), n_std).double()
    total = e_r + e_c
    # E_r + E_c = 0 for a non-zero M (no norm above the threshold: all equal) is a real 0;
    # for M = 0 both scores are undefined (NaN, with the reason below), never a score of 0
    directionality = torch.where(total > 0, (e_r - e_c) / torch.where(total > 0, total, 1), 0.0)
    directionality = torch.where(fro2 > 0, directionality, torch.nan)
    if square:
        symmetry = torch.where(fro2 > 0, sym_num / torch.where(fro2 > 0, fro2, 1), torch.nan)
    else:
        symmetry = torch.full_like(fro2, torch.nan)
    out = {
        "symmetry": symmetry,
        "directionality": directionality,
        "fro_norm": fro2.clamp_min(0).sqrt(),
        "E_r": e_r,
        "E_c": e_c,
    }
    out = {k: v.cpu().numpy().astype(np.float64) for k, v in out.items()}
    reasons: list[str | None] = [None] * len(fro2)
    for i in range(len(fro2)):
        if out["fro_norm"][i] == 0:
            reasons[i] = "zero matrix (||M||_F = 0): symmetry and directionality undefined"
        elif not square:
            reasons[i] = "non-square M (d_q != d_k): symmetry undefined"
    out["reason"] = reasons
    return out


def _flag(out: dict, bad: torch.Tensor) -> dict:
    for i in torch.nonzero(bad).flatten().tolist():
        for f in FIELDS:
            out[f][i] = np.nan
        out["reason"][i] = "non-finite weights (NaN or Inf) in W_q or W_k"
    return out


def _nonfinite(t: torch.Tensor) -> torch.Tensor:
    """Per matrix of a [B, m, n] batch: does it hold a NaN or an Inf?"""
    return ~torch.isfinite(t).flatten(-2).all(-1)


def finite(t: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0)


def _exponents(t: torch.Tensor) -> np.ndarray:
    """Per matrix of a [B, m, n] batch: e with max |t| = f 2^e, 1/2 <= f < 1, clamped so that
    2^-e is a float of t's dtype. A zero or non-finite matrix takes the largest e of the others
    (any e leaves it as it is), so that it sets no scale for the layer."""
    top = t.abs().amax((-2, -1))
    valid = (torch.isfinite(top) & (top > 0)).cpu().numpy()
    e = torch.frexp(top).exponent.cpu().numpy().astype(np.int64)
    e = np.where(valid, e, e[valid].max() if valid.any() else 0)
    return np.maximum(e, 1 - math.frexp(torch.finfo(t.dtype).max)[1])


def _scaled(t: torch.Tensor, e: np.ndarray, in_place: bool = False) -> torch.Tensor:
    """t 2^-e per matrix of a [B, m, n] batch: exact (powers of two), contiguous and 64-byte
    aligned: a fresh copy, or t itself (in_place, t contiguous and its own). Weights
    memory-mapped from a file are often not aligned, and MKL's float32 results for some
    shapes depend on the alignment: so the same weights score alike from a checkpoint and
    from a matrices file."""
    factor = torch.from_numpy(np.ldexp(1.0, -e)).to(device=t.device, dtype=t.dtype)[:, None, None]
    if in_place and t.is_contiguous():
        return t.mul_(factor)
    return torch.mul(t, factor, out=torch.empty(t.shape, dtype=t.dtype, device=t.device))


def _normalised(t: torch.Tensor, in_place: bool = False) -> tuple[torch.Tensor, np.ndarray]:
    """(t 2^-e, e) with each matrix's largest entry in [1/2, 1) (`_exponents`)."""
    e = _exponents(t)
    return _scaled(t, e, in_place), e


def _normalised_copy(t: torch.Tensor, source: torch.Tensor) -> tuple[torch.Tensor, np.ndarray]:
    """`_normalised` of t, a cast, move or view of the caller's weights `source`: in place
    where the cast or move made t a copy of our own, never in the caller's tensor."""
    own = t.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()
    return _normalised(t, in_place=own)


def _rescaled(t: torch.Tensor, e: np.ndarray) -> torch.Tensor:
    """t 2^-e, or t itself where every e is 0."""
    return _scaled(t, e) if e.any() else t


def _scale_back(out: dict, e) -> dict:
    """The absolute columns of scores computed from M 2^-e, in M's units (exact)."""
    for f in ("fro_norm", "E_r", "E_c"):
        out[f] = np.ldexp(out[f], e)
    return out


def _suspect(gram: torch.Tensor) -> torch.Tensor:
    """Per Gram X X^T of a batch: could X hold a NaN or an Inf? Its trace, ||X||_F^2, is
    finite whenever X is (bar overflow, which the exact test then clears): a free test."""
    return ~torch.isfinite(gram.diagonal(dim1=-2, dim2=-1).sum(-1))


def _row_blocks(w: int) -> list[tuple[int, int]]:
    step = max(MIN_TRIANGLE_BLOCK, -(-w // TRIANGLE_BLOCKS))
    return [(i, min(i + step, w)) for i in range(0, w, step)]


def sym_gram(x: torch.Tensor) -> torch.Tensor:
    """x x^T for x [..., w, n], from its upper block triangle."""
    w = x.shape[-2]
    blocks = _row_blocks(w)
    if len(blocks) == 1:
        return x @ x.mT
    g = x.new_zeros(*x.shape[:-1], w)
    for i, j in blocks:
        g[..., i:j, i:] = x[..., i:j, :] @ x[..., i:, :].mT
    return torch.triu(g) + torch.triu(g, 1).mT


def quad_diag(g: torch.Tensor, x: torch.Tensor, group: int = 1) -> torch.Tensor:
    """diag(x_b^T g_(b,j) x_b) for symmetric g [B*group, w, w] and x [B, w, n]: [B*group, n].

    Form j of group b pairs with x_b (grouped-query attention: the query heads of one key
    head). With g = D + T + T^T (T strictly upper), x^T g x and x^T (D + 2T) x share their
    diagonal, and D + 2T is upper triangular: about half the flops of g @ x. Columns of x
    go in chunks, so that each product is still in cache when it is reduced.

    Each block of rows of D + 2T goes to the batched matmul as a dense copy of its own, for
    every group: passed as a strided view into g (row stride w), as the row norms' group of 1
    used to be, MKL's batched sgemm takes another, 1.7x slower kernel, and that path is the
    one whose row norms came out wrong now and then on two threads (the column norms, always
    copies, never did). The copies cost w^2 per form.
    """
    n_batch, w, n = x.shape
    upper = (torch.triu(g) + torch.triu(g, 1)).view(n_batch, group, w, w)
    blocks = [
        (i, j, upper[:, :, i:j, i:].contiguous().view(n_batch, group * (j - i), w - i)) for i, j in _row_blocks(w)
    ]
    out = x.new_zeros(n_batch, group, n)
    chunk = max(1, QUAD_CHUNK_ELEMENTS // (n_batch * group * (blocks[0][1] - blocks[0][0])))
    for c in range(0, n, chunk):
        cols = slice(c, c + chunk)
        for i, j, rows in blocks:
            y = (rows @ x[:, i:, cols]).view(n_batch, group, j - i, -1)
            out[..., cols] += y.mul_(x[:, None, i:j, cols]).sum(-2)
    return out.view(n_batch * group, n)


def _off_sum(norms2: torch.Tensor, fro2: torch.Tensor) -> torch.Tensor:
    """Per form: do its squared norms [B, n] miss ||M||_F^2 [B] by more than float32 allows?"""
    want = fro2.double()
    return (norms2.double().sum(-1) - want).abs() > NORMS_SUM_TOLERANCE * want


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))  # NaN and -0.0 too


def repeated(g: torch.Tensor, repeat: int) -> torch.Tensor:
    """Each of g's forms repeat times in a row (a key head's Gram for each of its query heads)."""
    return g.repeat_interleave(repeat, 0) if repeat > 1 else g


def _checked_norms(
    g: torch.Tensor, x: torch.Tensor, fro2: torch.Tensor, what: str, group: int = 1, repeat: int = 1
) -> torch.Tensor:
    """quad_diag(g repeated, x, group), the squared `what` norms of M, computed until two results
    in a row agree bit for bit, and checked against fro2 = ||M||_F^2: a fault that passes leaves
    the bits a run without it has. Two that agree but miss fro2, or no two that agree within
    NORM_ATTEMPTS, are computed in float64; each with a warning. Each computation repeats g
    (g.repeat_interleave(repeat, 0): a key head's Gram for each of its query heads) itself, so
    that a fault in the copy is not carried into every computation."""

    def norms(dtype=g.dtype):
        return quad_diag(repeated(g, repeat).to(dtype), x.to(dtype), group)

    out, computed, differed = norms(), 1, 0
    while not _same_bits(out, again := norms()):
        computed += 1
        differed = differed or int((out != again).any(-1).sum())
        out = again
        if computed == NORM_ATTEMPTS:
            log.warning(
                "the squared %s norms of %d forms came out different in each of %d computations: computed in float64",
                what,
                len(out),
                NORM_ATTEMPTS,
            )
            return norms(torch.float64)
    computed += 1
    off = _off_sum(out, fro2)
    if off.any():
        gap = ((out.double().sum(-1) - fro2.double()).abs() / fro2.double()).max().item()
        log.warning(
            "the squared %s norms of %d of %d forms missed ||M||_F^2 by up to %.1e of it (float32 allows %g), "
            "the same in two computations: computed in float64",
            what,
            int(off.sum()),
            len(off),
            gap,
            NORMS_SUM_TOLERANCE,
        )
        return norms(torch.float64)
    if computed > 2:
        log.warning(
            "the squared %s norms of %d of %d forms came out different between computations: "
            "computed %d times before two in a row agreed bit for bit",
            what,
            differed,
            len(out),
            computed,
        )
    return out


def _scores_from_grams(gram_q, gram_k, cross, qt, kt, n_std) -> dict:
    """Scores of M = Q K^T from Qt = Q^T [B, w, d_q], Kt = K^T [B, w, d_k], their Grams
    Qt Qt^T and Kt Kt^T [B, w, w], and C = Kt Qt^T [B, w, w] (None when d_q != d_k)."""
    fro2 = (gram_q * gram_k).sum((-2, -1))
    square = cross is not None
    sym_num = (cross * cross.mT).sum((-2, -1)) if square else fro2
    row2, col2 = _checked_norms(gram_k, qt, fro2, "row"), _checked_norms(gram_q, kt, fro2, "column")
    return _finish(fro2, sym_num, row2, col2, n_std, square)


def score_factors(Q: torch.Tensor, K: torch.Tensor, n_std: float = 2.0) -> dict:
    """Scores of M_b = Q_b K_b^T without forming M. Q: [B, d_q, w], K: [B, d_k, w]."""
    if Q.ndim == 2:
        Q, K = Q[None], K[None]
    qt, kt = Q.mT, K.mT
    bad = _nonfinite(qt) | _nonfinite(kt)
    if bad.any():
        qt, kt = finite(qt), finite(kt)
    (qt, e_q), (kt, e_k) = _normalised(qt), _normalised(kt)
    cross = kt @ qt.mT if qt.shape[-1] == kt.shape[-1] else None
    out = _scores_from_grams(sym_gram(qt), sym_gram(kt), cross, qt, kt, n_std)
    return _flag(_scale_back(out, e_q + e_k), bad)


def score_dense(M: torch.Tensor, n_std: float = 2.0) -> dict:
    """Scores of explicit matrices M: [B, d_q, d_k] (or one [d_q, d_k])."""
    if M.ndim == 2:
        M = M[None]
    bad = _nonfinite(M)
    if bad.any():
        M = finite(M)
    M, e = _normalised(M)
    square = M.shape[-1] == M.shape[-2]
    squares = M * M
    fro2 = squares.sum((-2, -1))
    sym_num = (M * M.mT).sum((-2, -1)) if square else fro2
    return _flag(_scale_back(_finish(fro2, sym_num, squares.sum(-1), squares.sum(-2), n_std, square), e), bad)


def _dense_is_cheaper(d_q: int, d_k: int, width: int, itemsize: int) -> bool:
    # dense: 2 d_q d_k w flops to form M, then passes over M (its transpose, norms) worth
    # about 60% more on CPU; factored: about 9 d w^2 (half-cost Grams and quadratic forms,
    # a full cross term). Measured on CPU at d = 4096: factored faster up to w = 0.35 d
    # (w = 1024: 0.25 s against 0.33 s; w = 2048: 0.73 s against 0.47 s).
    if d_q * d_k * itemsize > DENSE_BYTES_LIMIT:
        return False
    return 3.2 * d_q * d_k * width < 4.5 * (d_q + d_k) * width * width


def _layer_transposed(qt: torch.Tensor, kt: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Qt, Kt of the layer form M = sum_h Q_h K_kv(h)^T as one product of width n_kv * k:
    query heads sharing a key head are summed first (GQA keeps the form narrow)."""
    (h_kv, k, d_q), d_k = kt.shape[:2] + qt.shape[-1:], kt.shape[-1]
    q_sum = qt.reshape(h_kv, group, k, d_q).sum(1) if group > 1 else qt
    return q_sum.reshape(h_kv * k, d_q), kt.reshape(h_kv * k, d_k)


@dataclass
class LayerFactors:
    """The layer form M = Qs Ks^T of one block (query heads summed per key head), its factors
    normalised (one power of two each): Qs^T [W, d_q], Ks^T [W, d_k], their Grams [W, W] and
    C = Ks^T Qs [W, W] (None when d_q != d_k). W = n_kv * k, in blocks of k rows, one per key head."""

    qs: torch.Tensor
    ks: torch.Tensor
    q_exp: int  # Qs^T and Ks^T are those of the layer times 2^-q_exp and 2^-k_exp
    k_exp: int
    _grams: tuple | None = None

    @property
    def exponent(self) -> int:
        """M's quantities here are those of the layer form times 2^-exponent."""
        return self.q_exp + self.k_exp

    @property
    def exponents(self) -> tuple[np.ndarray, np.ndarray]:
        """(q_exp, k_exp) as a batch of one."""
        return np.array([self.q_exp]), np.array([self.k_exp])

    def grams(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(Gram of Qs^T, Gram of Ks^T, C), computed once."""
        if self._grams is None:
            cross = self.ks @ self.qs.T if self.qs.shape[1] == self.ks.shape[1] else None
            self._grams = (sym_gram(self.qs), sym_gram(self.ks), cross)
        return self._grams

    @property
    def gram_q(self) -> torch.Tensor:
        return self.grams()[0]

    @property
    def gram_k(self) -> torch.Tensor:
        return self.grams()[1]

    @property
    def cross(self) -> torch.Tensor | None:
        return self.grams()[2]


@dataclass
class Factors:
    """One block's per-head quantities on the computing device, shared by every metric:
    Qt [H, k, d_q] and Kt [H_kv, k, d_k], each head scaled by 2^-q_exp[h] (2^-k_exp[j]) to
    a largest entry in [1/2, 1); their Grams Q_h^T Q_h [H, k, k] and K^T K [H_kv, k, k],
    C_h = K_kv(h)^T Q_h [H, k, k] (None when d_q != d_k), bad [H]: non-finite weights
    (zeroed in the factors). Every head quantity is that of M_h 2^-(q_exp + k_exp): ratios
    are M_h's own. `layer()` gives the layer form's, computed once. `note()` adds to the
    "reason" of a head's or the layer's row (why a metric is NaN)."""

    qt: torch.Tensor
    kt: torch.Tensor
    gram_q: torch.Tensor
    gram_k: torch.Tensor
    cross: torch.Tensor | None
    group: int
    bad: torch.Tensor
    q_exp: np.ndarray
    k_exp: np.ndarray
    _layer: LayerFactors | None = None
    _reasons: tuple[list, list] | None = None  # the rows' reasons, set by paper_scores
    forms: dict = dataclasses.field(default_factory=dict)  # input -> wqk.head_forms.HeadForms, built once

    def gram_k_per_head(self) -> torch.Tensor:
        """K^T K of each query head's key head [H, k, k] (a copy for grouped-query attention)."""
        return repeated(self.gram_k, self.group)

    def head_exponents(self) -> np.ndarray:
        """Per query head: M_h's quantities here are those of M_h 2^-exponent."""
        return self.q_exp + np.repeat(self.k_exp, self.group)

    def layer(self) -> LayerFactors:
        if self._layer is None:
            # one power of two per layer (the largest head's): sums of heads stay exact
            q_top, k_top = int(self.q_exp.max()), int(self.k_exp.max())
            qt, kt = _rescaled(self.qt, q_top - self.q_exp), _rescaled(self.kt, k_top - self.k_exp)
            qs, ks = _layer_transposed(qt, kt, self.group)
            self._layer = LayerFactors(qs, ks, q_top, k_top)
        return self._layer

    def note(self, head: int | None, text: str) -> None:
        """Add text to the reason of query head `head` (None: the layer's row)."""
        if self._reasons is None:
            return
        rows, index = (self._reasons[1], 0) if head is None else (self._reasons[0], head)
        rows[index] = f"{rows[index]}; {text}" if rows[index] else text


def _score_layer(f: Factors, n_std) -> dict:
    lf = f.layer()
    (width, d_q), d_k = lf.qs.shape, lf.ks.shape[1]
    if _dense_is_cheaper(d_q, d_k, width, lf.qs.element_size()):
        out = score_dense(lf.qs.T @ lf.ks, n_std)
    else:
        cross = lf.cross[None] if lf.cross is not None else None
        out = _scores_from_grams(lf.gram_q[None], lf.gram_k[None], cross, lf.qs[None], lf.ks[None], n_std)
    return _scale_back(out, lf.exponent)


def head_cross(qt: torch.Tensor, kt: torch.Tensor) -> torch.Tensor | None:
    """C_h = K_kv(h)^T Q_h [H, k, k], all query heads of a key head in one product."""
    (n_heads, k, d_q), (h_kv, _, d_k) = qt.shape, kt.shape
    if d_q != d_k:
        return None
    group = n_heads // h_kv
    return (kt @ qt.view(h_kv, group * k, d_q).mT).view(h_kv, k, group, k).transpose(1, 2).reshape(n_heads, k, k)


def _score_heads(f: Factors, n_std) -> dict:
    """Per query head from the block's factors."""
    (n_heads, k, _), h_kv = f.qt.shape, f.kt.shape[0]
    fro2 = (f.gram_q.view(h_kv, f.group, k, k) * f.gram_k[:, None]).sum((-2, -1)).view(n_heads)
    square = f.cross is not None
    sym_num = (f.cross * f.cross.mT).sum((-2, -1)) if square else fro2
    row2 = _checked_norms(f.gram_k, f.qt, fro2, "row", repeat=f.group)
    col2 = _checked_norms(f.gram_q, f.kt, fro2, "column", f.group)
    return _scale_back(_finish(fro2, sym_num, row2, col2, n_std, square), f.head_exponents())


def block_factors(block: AttentionBlock, device: torch.device, dtype: torch.dtype = torch.float32) -> Factors:
    """A block's factors on device in dtype, each head normalised (a power of two);
    non-finite weights zeroed and flagged."""
    group = block.group_size
    # nn.Linear weights arrive as views [H, d, k] of [H*k, d]: these transposes are free
    (qt, q_exp), (kt, k_exp) = (_normalised_copy(w.to(device=device, dtype=dtype).mT, w) for w in (block.q, block.k))
    gram_q, gram_k = sym_gram(qt), sym_gram(kt)
    bad = (_suspect(gram_q).view(-1, group) | _suspect(gram_k)[:, None]).flatten()
    if bad.any():
        bad = (_nonfinite(qt).view(-1, group) | _nonfinite(kt)[:, None]).flatten()
        if bad.any():
            qt, kt = finite(qt), finite(kt)
            gram_q, gram_k = sym_gram(qt), sym_gram(kt)
    return Factors(qt, kt, gram_q, gram_k, head_cross(qt, kt), group, bad, q_exp, k_exp)


def regrouped(f: Factors, order: tuple[int, ...]) -> Factors | None:
    """The factors of the same block with its query heads in `order`: query head order[i] then
    meets key head i // group. Each head keeps its scale; the Grams of the regrouped heads and
    the crosses are computed as `block_factors` computes them for a block in that order (the
    same bits), the key heads' reused. None where some weights are not finite: their flags
    belong to the old pairing (score the regrouped block itself)."""
    if f.bad.any():
        return None
    qt = f.qt[torch.tensor(order, device=f.qt.device)]
    return Factors(
        qt, f.kt, sym_gram(qt), f.gram_k, head_cross(qt, f.kt), f.group, f.bad, f.q_exp[list(order)], f.k_exp
    )


def paper_scores(f: Factors, n_std: float = 2.0, zero_directionality: bool = False) -> tuple[dict, dict]:
    """(per-head scores [H], per-layer scores [1]) of a block's factors: the paper's two."""
    per_head = _flag(_score_heads(f, n_std), f.bad)
    per_layer = _flag(_score_layer(f, n_std), f.bad.any()[None])
    f._reasons = (per_head["reason"], per_layer["reason"])
    if zero_directionality:
        for out in (per_head, per_layer):
            out["directionality"] = np.where(np.isnan(out["directionality"]), 0.0, out["directionality"])
    return per_head, per_layer


def score_block(
    block: AttentionBlock,
    device: str | torch.device = "cpu",
    n_std: float = 2.0,
    dtype: torch.dtype = torch.float32,
    zero_directionality: bool = False,
) -> tuple[dict, dict]:
    """(per-head scores [H], per-layer scores [1]) of one attention block.

    Computation runs in `dtype` on `device`; results come back as float64 numpy arrays.
    zero_directionality: directionality 0 where it is otherwise NaN (M = 0, non-finite
    weights), as the authors' code gives whenever no norm exceeds its threshold (wqk.authors).
    The metrics beyond the paper's two: wqk.metric_registry.
    """
    with torch.no_grad():
        return paper_scores(block_factors(block, resolve_device(device), dtype), n_std, zero_directionality)
