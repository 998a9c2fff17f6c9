"""Folded forms (wqk.metric_registry entry "folded"): the form the model applies.

- gain: a pre-norm model normalises x before the projections, x' = g * x_hat (+ beta), so
  the form on the normalised states is diag(g_q) M diag(g_k) = (diag(g_q) Q)(diag(g_k) K)^T
  (g_q = g_k for self-attention; the shift beta is left out);
- bias: with projection biases the score is (Q^T x_i + b_q)^T (K^T x_j + b_k), the form
  M_aug = Q_aug K_aug^T on [x; 1], Q_aug = [Q; b_q^T], K_aug = [K; b_k^T]. Its last row holds
  b_q^T K^T x_j: a term of the key alone, the same for every query (token-level column
  dominance), which the paper's directionality of M_aug reads as one dominant ROW (the
  query's constant coordinate), > 0; the key bias's term x_i^T Q b_k (a constant per query,
  which softmax ignores) is the last column.
Each variant is scored with the paper's symmetry and directionality. Scoring a second form
costs a second scoring of the block (the weights are not read again): not a default metric.
"""

from __future__ import annotations

import torch

from .blocks import AttentionBlock
from .metric_catalogue import Context, register
from .metrics import block_factors, paper_scores


def gain_block(b: AttentionBlock, dtype: torch.dtype) -> AttentionBlock:
    q = b.q.to(dtype) * _unit_scale(b.q_gain.to(dtype))[None, :, None]
    k = b.k.to(dtype) * _unit_scale(b.k_gain.to(dtype))[None, :, None]
    return AttentionBlock(b.stack, b.layer, q, k)


def _unit_scale(gain: torch.Tensor) -> torch.Tensor:
    """gain 2^-e, its largest entry in [1/2, 1): a scale of the form that its scores do not
    see, and extreme gains times extreme weights then cannot overflow (or underflow) the dtype."""
    top = gain.abs().max()
    if not (torch.isfinite(top) and top > 0):
        return gain
    return torch.ldexp(gain, -torch.frexp(top).exponent.to(torch.int64))


def bias_block(b: AttentionBlock, dtype: torch.dtype) -> AttentionBlock:
    (h, _, k), h_kv = b.q.shape, b.k.shape[0]
    qb = b.q_bias.to(dtype) if b.q_bias is not None else torch.zeros(h, k, dtype=dtype)
    kb = b.k_bias.to(dtype) if b.k_bias is not None else torch.zeros(h_kv, k, dtype=dtype)
    q = torch.cat([b.q.to(dtype), qb[:, None, :]], 1)
    kk = torch.cat([b.k.to(dtype), kb[:, None, :]], 1)
    return AttentionBlock(b.stack, b.layer, q, kk)


@register(
    "folded",
    ("symmetry_gain", "directionality_gain", "symmetry_bias", "directionality_bias"),
    "the paper's two scores of diag(g) M diag(g) (pre-norm models, g the gain of the norm feeding the "
    "attention) and of the bias-augmented form [Q; b_q^T][K; b_k^T]^T (models with q/k biases).",
    cheap=False,
)
def folded_forms(ctx: Context):
    b, dev = ctx.block, ctx.factors.qt.device
    heads, layer = {}, {}
    variants = []
    if b.q_gain is not None and b.k_gain is not None:
        variants.append(("gain", gain_block(b, ctx.dtype)))
    if b.q_bias is not None or b.k_bias is not None:
        variants.append(("bias", bias_block(b, ctx.dtype)))
    for suffix, block in variants:
        h, lay = paper_scores(block_factors(block, dev, ctx.dtype), ctx.n_std)
        for metric in ("symmetry", "directionality"):
            heads[f"{metric}_{suffix}"] = h[metric]
            layer[f"{metric}_{suffix}"] = lay[metric]
    return heads, layer
