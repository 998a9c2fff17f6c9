"""Symmetry and directionality of bilinear forms M = Q K^T (DESIGN.md sections 2-3).

    symmetry(M)       = <M, M^T>_F / ||M||_F^2                      in [-1, 1]
    directionality(M) = (E_r - E_c) / (E_r + E_c)                   in [-1, 1]

E_r (E_c) is the excess of the row (column) norms of M over mean + n_std * std (Bessel),
summed over the rows (columns) above that threshold; negative directionality means a few
columns (keys) dominate. `score_factors` never forms M: it works from w x w Grams,
batched over a leading dimension; `score_dense` is the oracle on explicit matrices.
"""

from __future__ import annotations

import numpy as np
import torch

from .blocks import AttentionBlock

FIELDS = ("symmetry", "directionality", "fro_norm", "E_r", "E_c")
# Above this many bytes a dense per-layer M is never formed, whatever the flop count says.
DENSE_BYTES_LIMIT = 2 << 30


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
    return dev


def _excess(norms: torch.Tensor, n_std: float) -> torch.Tensor:
    """Sum over entries above mean + n_std * std of (entry - threshold); norms: [B, n]."""
    threshold = norms.mean(-1, keepdim=True) + n_std * norms.std(-1, keepdim=True)
    return torch.relu(norms - threshold).sum(-1)


def _finish(fro2, sym_num, row_norms, col_norms, n_std, square: bool) -> dict:
    """Scores from the reduced quantities of a batch: fro2, sym_num [B]; norms [B, n]."""
    fro2, sym_num = fro2.double(), sym_num.double()
    e_r = _excess(row_norms, n_std).double()
    e_c = _excess(col_norms, n_std).double()
    total = e_r + e_c
    directionality = torch.where(total > 0, (e_r - e_c) / torch.where(total > 0, total, 1), 0.0)
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
        if not square:
            reasons[i] = "non-square M (d_q != d_k): symmetry undefined"
        elif out["fro_norm"][i] == 0:
            reasons[i] = "zero matrix (||M||_F = 0): symmetry undefined"
    out["reason"] = reasons
    return out


def _nonfinite(t: torch.Tensor) -> torch.Tensor:
    """Per matrix of a [B, m, n] batch: does it hold a NaN or an Inf?

    A finite sum proves every entry finite (NaN and Inf propagate), at a tenth of the cost
    of an elementwise test; only a non-finite sum (or an overflow) takes the exact test.
    """
    bad = ~torch.isfinite(t.sum((-2, -1)))
    return ~torch.isfinite(t).all(-1).all(-1) if bad.any() else bad


def _flag_nonfinite(out: dict, bad: torch.Tensor) -> dict:
    for i in torch.nonzero(bad).flatten().tolist():
        for f in FIELDS:
            out[f][i] = np.nan
        out["reason"][i] = "non-finite weights (NaN or Inf) in W_q or W_k"
    return out


def _finite(t: torch.Tensor, bad: torch.Tensor) -> torch.Tensor:
    # Only when needed: a copy of every weight costs as much as a score.
    return torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0) if bad.any() else t


def score_dense(M: torch.Tensor, n_std: float = 2.0) -> dict:
    """Scores of explicit matrices M: [B, d_q, d_k] (or one [d_q, d_k])."""
    if M.ndim == 2:
        M = M[None]
    bad = _nonfinite(M)
    M = _finite(M, bad)
    square = M.shape[-1] == M.shape[-2]
    fro2 = (M * M).sum((-2, -1))
    sym_num = (M * M.transpose(-1, -2)).sum((-2, -1)) if square else fro2
    return _flag_nonfinite(_finish(fro2, sym_num, M.norm(dim=-1), M.norm(dim=-2), n_std, square), bad)


def score_factors(Q: torch.Tensor, K: torch.Tensor, n_std: float = 2.0) -> dict:
    """Scores of M_b = Q_b K_b^T without forming M. Q: [B, d_q, w], K: [B, d_k, w]."""
    if Q.ndim == 2:
        Q, K = Q[None], K[None]
    bad_q, bad_k = _nonfinite(Q), _nonfinite(K)
    Q, K = _finite(Q, bad_q), _finite(K, bad_k)
    bad = bad_q | bad_k
    square = Q.shape[-2] == K.shape[-2]
    gram_q = Q.transpose(-1, -2) @ Q
    gram_k = K.transpose(-1, -2) @ K
    fro2 = (gram_q * gram_k).sum((-2, -1))
    if square:
        cross = K.transpose(-1, -2) @ Q  # C = K^T Q; <M, M^T> = <C, C^T>
        sym_num = (cross * cross.transpose(-1, -2)).sum((-2, -1))
    else:
        sym_num = fro2
    row2 = ((Q @ gram_k) * Q).sum(-1).clamp_min(0)
    col2 = ((K @ gram_q) * K).sum(-1).clamp_min(0)
    return _flag_nonfinite(_finish(fro2, sym_num, row2.sqrt(), col2.sqrt(), n_std, square), bad)


def layer_factors(block: AttentionBlock) -> tuple[torch.Tensor, torch.Tensor]:
    """Q, K of the layer form M = sum_h Q_h K_kv(h)^T as one product of width n_kv * k:
    query heads sharing a key head are summed first (GQA keeps the form narrow)."""
    h_kv, d_q, k = block.n_kv_heads, block.q.shape[1], block.q.shape[2]
    q_sum = block.q.reshape(h_kv, block.group_size, d_q, k).sum(1)
    q_cat = q_sum.permute(1, 0, 2).reshape(d_q, h_kv * k)
    k_cat = block.k.permute(1, 0, 2).reshape(block.k.shape[1], h_kv * k)
    return q_cat, k_cat


def _dense_is_cheaper(d_q: int, d_k: int, width: int, itemsize: int) -> bool:
    # dense: 2 d_q d_k w flops to form M, then about as much again in passes over M (its
    # transpose, norms); factored: ~10 d w^2 flops (Grams, cross term, row and column norms).
    # Measured on CPU at d = 4096, w = 1024: factored 0.26 s, dense 0.44 s.
    if d_q * d_k * itemsize > DENSE_BYTES_LIMIT:
        return False
    return 4 * d_q * d_k * width < 5 * (d_q + d_k) * width * width


def score_layer(block: AttentionBlock, device: torch.device, dtype: torch.dtype, n_std: float) -> dict:
    q_cat, k_cat = (t.to(device=device, dtype=dtype) for t in layer_factors(block))
    d_q, d_k, width = q_cat.shape[0], k_cat.shape[0], q_cat.shape[1]
    itemsize = torch.empty((), dtype=dtype).element_size()
    if _dense_is_cheaper(d_q, d_k, width, itemsize):
        return score_dense(q_cat @ k_cat.T, n_std)
    return score_factors(q_cat, k_cat, n_std)


def score_heads(block: AttentionBlock, device: torch.device, dtype: torch.dtype, n_std: float) -> dict:
    """Per query head, in head order (key head h // group for query head h)."""
    q = block.q.to(device=device, dtype=dtype)
    # A copy of the key heads per query head is cheaper than broadcasting them in matmul.
    k = block.k.to(device=device, dtype=dtype).repeat_interleave(block.group_size, dim=0)
    return score_factors(q, k, n_std)


def score_block(
    block: AttentionBlock,
    device: str | torch.device = "cpu",
    n_std: float = 2.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[dict, dict]:
    """(per-head scores [H], per-layer scores [1]) of one attention block.

    Computation runs in `dtype` on `device`; results come back as float64 numpy arrays.
    """
    dev = resolve_device(device)
    with torch.no_grad():
        return score_heads(block, dev, dtype, n_std), score_layer(block, dev, dtype, n_std)
