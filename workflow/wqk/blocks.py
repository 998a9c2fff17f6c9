"""The unit of extraction: one attention layer of one stack, as per-head Q_h and K_h."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .contracts import STACKS

# what the block's factors score (the scores' `form` column): "bilinear", the logits are
# scale * x Q_h K_h^T y; "qk_norm_gain_folded", a QK-norm model's logits divided by the norm's
# per-token scalings (rms of each query and key), its gains folded into Q_h and K_h
FORMS = ("bilinear", "qk_norm_gain_folded")


@dataclass(frozen=True)
class Rope:
    """Rotary position embedding of a block's heads: query and key at positions i and j
    meet through R(j - i), rotations by (j - i) * inv_freq[p] of the rotary pairs p.

    The rotary dims are the first 2 * len(inv_freq) of each head (the rest, if any, are
    not rotated: GPT-NeoX's rotary_pct, Phi's partial_rotary_factor, GPT-J's rotary_dim).
    layout: how the checkpoint's q/k rows pair them, "half" (pair p = rows p and p + r/2:
    transformers' rotate_half, HF Llama checkpoints) or "interleaved" (rows 2p and 2p + 1:
    GPT-J's rotate_every_two). context: the longest position offset (max_position_embeddings).
    """

    inv_freq: tuple[float, ...]
    layout: str
    context: int

    def __post_init__(self):
        if self.layout not in ("half", "interleaved"):
            raise ValueError(f"rotary layout must be half or interleaved, not {self.layout!r}")

    @property
    def rotary_dim(self) -> int:
        return 2 * len(self.inv_freq)


@dataclass
class AttentionBlock:
    """Per-head factors of one attention layer.

    q: [H, d, k] with query_h = q[h].T @ x; k: [H_kv, d, k] likewise for keys.
    Query head h is paired with key head h // (H // H_kv) (grouped-query attention).
    For cross-attention, q acts on decoder states and k on encoder states (d may differ:
    q is [H, d_q, k] and k is [H_kv, d_k, k]).

    What acts on the form besides Q and K, where the adapter knows it (else None):
    q_bias [H, k] and k_bias [H_kv, k], the projections' biases; q_gain [d_q] and k_gain
    [d_k], the gain of the normalisation that feeds the queries and the keys (pre-norm
    models), norm_centred: that normalisation is a LayerNorm (its output centred), not an
    RMSNorm; rope, the rotary embedding. heads: the label of each query head when q is
    not in head order (the authors' method regroups heads); None: 0..H-1. form: what q and
    k score (FORMS). storage: what q and k were stored as where that is no float type
    (quantised GGUF: "Q5_0", or "q Q4_K, k Q6_K"), dequantised to float32 for scoring; None:
    stored as floats (the scores' `storage` column, present only where some block has one).
    q_norm_bias [H, k] and k_norm_bias [H_kv, k]: a QK-norm's shift, added after the norm (a
    LayerNorm with a bias: Persimmon's), of form="qk_norm_gain_folded" blocks.
    """

    stack: str
    layer: int
    q: torch.Tensor
    k: torch.Tensor
    q_bias: torch.Tensor | None = None
    k_bias: torch.Tensor | None = None
    q_gain: torch.Tensor | None = None
    k_gain: torch.Tensor | None = None
    norm_centred: bool | None = None
    rope: Rope | None = None
    heads: tuple[int, ...] | None = None
    form: str = "bilinear"
    storage: str | None = None
    q_norm_bias: torch.Tensor | None = None
    k_norm_bias: torch.Tensor | None = None

    def __post_init__(self):
        if self.form not in FORMS:
            raise ValueError(f"{self.stack} layer {self.layer}: form must be one of {FORMS}, got {self.form!r}")
        if self.stack not in STACKS:
            raise ValueError(f"stack must be one of {STACKS}, got {self.stack!r}")
        if self.q.ndim != 3 or self.k.ndim != 3:
            raise ValueError(f"q and k must be [heads, d, k], got {tuple(self.q.shape)} and {tuple(self.k.shape)}")
        if self.q.shape[2] != self.k.shape[2] or self.q.shape[0] % self.k.shape[0]:
            raise ValueError(
                f"{self.stack} layer {self.layer}: incompatible q {tuple(self.q.shape)} and k {tuple(self.k.shape)}"
            )
        (h, d_q, k), (h_kv, d_k, _) = self.q.shape, self.k.shape
        expected = {"q_bias": (h, k), "k_bias": (h_kv, k), "q_gain": (d_q,), "k_gain": (d_k,)}
        expected |= {"q_norm_bias": (h, k), "k_norm_bias": (h_kv, k)}
        for name, shape in expected.items():
            t = getattr(self, name)
            if t is not None and tuple(t.shape) != shape:
                raise ValueError(f"{self.stack} layer {self.layer}: {name} is {tuple(t.shape)}, expected {shape}")
        if self.rope is not None and self.rope.rotary_dim > k:
            raise ValueError(f"{self.stack} layer {self.layer}: rotary dim {self.rope.rotary_dim} > head dim {k}")
        if self.heads is not None and sorted(self.heads) != list(range(h)):
            raise ValueError(f"{self.stack} layer {self.layer}: heads must order 0..{h - 1}, got {self.heads}")

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]

    @property
    def n_kv_heads(self) -> int:
        return self.k.shape[0]

    @property
    def group_size(self) -> int:
        return self.n_heads // self.n_kv_heads

    def kv_head(self, head: int) -> int:
        return head // self.group_size

    def k_per_query_head(self) -> torch.Tensor:
        """K repeated so that row h is the key head of query head h: [H, d, k]."""
        return self.k.repeat_interleave(self.group_size, dim=0)
