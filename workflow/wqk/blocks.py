"""The unit of extraction: one attention layer of one stack, as per-head Q_h and K_h."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .contracts import STACKS


@dataclass
class AttentionBlock:
    """Per-head factors of one attention layer.

    q: [H, d, k] with query_h = q[h].T @ x; k: [H_kv, d, k] likewise for keys.
    Query head h is paired with key head h // (H // H_kv) (grouped-query attention).
    For cross-attention, q acts on decoder states and k on encoder states (d may differ:
    q is [H, d_q, k] and k is [H_kv, d_k, k]).
    """

    stack: str
    layer: int
    q: torch.Tensor
    k: torch.Tensor

    def __post_init__(self):
        if self.stack not in STACKS:
            raise ValueError(f"stack must be one of {STACKS}, got {self.stack!r}")
        if self.q.ndim != 3 or self.k.ndim != 3:
            raise ValueError(f"q and k must be [heads, d, k], got {tuple(self.q.shape)} and {tuple(self.k.shape)}")
        if self.q.shape[2] != self.k.shape[2] or self.q.shape[0] % self.k.shape[0]:
            raise ValueError(
                f"{self.stack} layer {self.layer}: incompatible q {tuple(self.q.shape)} and k {tuple(self.k.shape)}"
            )

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
