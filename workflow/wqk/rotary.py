"""Rotary-aware symmetry (wqk.metric_registry entry "rotary_symmetry").

With rotary embeddings the score of query position i and key position j is
x_i^T Q R(j - i) K^T x_j: the form at offset d = j - i is M(d) = Q R(d) K^T, and "i attends
to j as j attends to i" compares M(d) with M(-d)^T:

    s(d) = <M(d), M(-d)^T>_F / (||M(d)||_F ||M(-d)||_F),     s(0) = the paper's symmetry,

s(-d) = s(d). From k x k quantities (C = K^T Q, G_q = Q^T Q, G_k = K^T K, R = R(d)):
<M(d), M(-d)^T> = tr(R^T C R C), ||M(d)||^2 = tr(R^T G_q R G_k), ||M(-d)||^2 = tr(R G_q R^T G_k).
R rotates the rotary pairs of each head (wqk.blocks.Rope: which rows pair, at which
frequencies); each trace is a trigonometric polynomial in the offset whose coefficient
matrices are formed once (Rotation.traces), so an offset costs two matrix-vector products.
The layer form sums the heads, with the same R in every k x k block of its W x W quantities.
"""

from __future__ import annotations

import numpy as np
import torch

from .blocks import Rope
from .metric_catalogue import Context, register


def default_offsets(context: int) -> tuple[int, ...]:
    """0 and the powers of two below the context length."""
    out, d = [0], 1
    while d < context:
        out.append(d)
        d *= 2
    return tuple(out)


def pair_rows(rope: Rope) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows a_p and b_p of each rotary pair p within a head."""
    half = len(rope.inv_freq)
    p = torch.arange(half)
    if rope.layout == "half":
        return p, p + half
    return 2 * p, 2 * p + 1


class Rotation:
    """R(d) = D_c + D_s J on the head-dim rows of n blocks of k: D_c, D_s the cosines and sines
    of each row's pair (1 and 0 for rows not rotated), J the signed pair swap
    (J x)_a = -x_b, (J x)_b = x_a. Then, for any A, B,

        tr(R^T A R B) = c^T (A o B^T) c + c^T (A o (J B)^T) s + s^T (A o J B^T) c + s^T (A o (J B J^T)^T) s

    (o elementwise): four matrices formed once, then two vector products per offset, instead
    of rotating the W x W matrices at every offset. R(-d): s -> -s."""

    def __init__(self, rope: Rope, head_dim: int, blocks: int, device: torch.device):
        a, b = pair_rows(rope)
        partner, sign = torch.arange(head_dim), torch.zeros(head_dim)
        partner[a], partner[b] = b, a
        sign[a], sign[b] = -1.0, 1.0
        pair = torch.full((head_dim,), -1, dtype=torch.long)
        pair[a] = pair[b] = torch.arange(len(a))
        offsets = torch.arange(blocks)[:, None] * head_dim
        self.partner = (offsets + partner).flatten().to(device)
        self.sign = sign.repeat(blocks).to(device)
        self.pair = pair.repeat(blocks).to(device)
        self.freq = torch.tensor(rope.inv_freq, dtype=torch.float64, device=device)

    def cos_sin(self, offsets, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """[n_offsets, n * k] cosines and sines of each row's pair (1, 0: not rotated)."""
        angle = torch.tensor(offsets, dtype=torch.float64, device=self.freq.device)[:, None] * self.freq
        rotated = self.pair >= 0
        index = self.pair.clamp_min(0)
        cos = torch.where(rotated, angle.cos()[:, index], 1.0)
        sin = torch.where(rotated, angle.sin()[:, index], 0.0)
        return cos.to(dtype), sin.to(dtype)

    def traces(self, a: torch.Tensor, b: torch.Tensor, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
        """(tr(R(d)^T A R(d) B), tr(R(-d)^T A R(-d) B)) [batch, n_offsets] for A, B [batch, n, n]."""
        p, sg = self.partner, self.sign
        jb = b[..., p, :] * sg[:, None]  # J B
        parts = (a * b.mT, a * jb.mT, a * (b.mT[..., p, :] * sg[:, None]), a * (jb[..., :, p] * sg).mT)
        cc, cs, sc, ss = (((x @ t) * y).sum(-1) for t, (x, y) in zip(parts, _pairs(cos, sin), strict=True))
        return cc + cs + sc + ss, cc - cs - sc + ss


def _pairs(cos, sin):
    return ((cos, cos), (cos, sin), (sin, cos), (sin, sin))


def rotary_symmetry(rot: Rotation, gram_q, gram_k, cross, offsets) -> dict[str, np.ndarray]:
    """s(d) for each offset of a batch of forms [B, n*k, n*k]."""
    cos, sin = rot.cos_sin(offsets, gram_q.dtype)
    num, _ = rot.traces(cross, cross, cos, sin)
    plus, minus = rot.traces(gram_q, gram_k, cos, sin)
    num, plus, minus = num.double(), plus.double(), minus.double()
    den = (plus * minus).clamp_min(0).sqrt()
    s = torch.where(den > 0, num / torch.where(den > 0, den, 1.0), torch.nan).cpu().numpy().astype(np.float64)
    return {f"rotary_symmetry_d{d}": s[:, i] for i, d in enumerate(offsets)}


@register(
    "rotary_symmetry",
    ("rotary_symmetry_d{d}",),
    "rotary models, per head and layer: s(d) = <M(d), M(-d)^T> / (||M(d)|| ||M(-d)||), M(d) = Q R(d) K^T the "
    "form at position offset d (R the model's own rotary rotation); s(0) is the paper's symmetry.",
)
def head_and_layer_rotary(ctx: Context):
    rope, f = ctx.block.rope, ctx.factors
    if rope is None or f.cross is None:
        return {}, {}
    offsets = ctx.rotary_offsets if ctx.rotary_offsets is not None else default_offsets(rope.context)
    k = f.qt.shape[1]
    gram_k = f.gram_k_per_head()
    heads = rotary_symmetry(Rotation(rope, k, 1, f.qt.device), f.gram_q, gram_k, f.cross, offsets)
    lf = f.layer()
    blocks = Rotation(rope, k, lf.gram_q.shape[-1] // k, f.qt.device)
    layer = rotary_symmetry(blocks, lf.gram_q[None], lf.gram_k[None], lf.cross[None], offsets)
    return heads, layer
