"""The metrics of a head and of a layer, by name: each catalogued name (wqk.metric_catalogue)
bound to the function that computes it.

A metric's function takes a `Context` (the block, its factored quantities
`wqk.metrics.Factors`, the options) and returns two dicts of float64 arrays, {column: [H]}
for the head rows and {column: [1]} for the layer row; a column it cannot compute for a
block (no rotary embedding, no bias) it leaves out, and the table holds NaN there. Every
metric works from the k x k (or layer-width) quantities that the paper's scores already
form: one streaming pass over the weights serves them all.

    @register("spectra", columns=(...), summary="...")   # in wqk.spectra, from wqk.metric_catalogue
    def head_spectra(ctx): ...

The paper's two, symmetry and directionality, are entries too; every table and figure
reads them, so they are always computed (`select` adds them).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

# the modules that register the metrics beyond the paper's two
from . import folded, rotary, spectra  # noqa: F401
from .blocks import AttentionBlock
from .metric_catalogue import CATALOGUE, PAPER, REGISTERED, Context, Metric, Result, column_order, select
from .metrics import block_factors, paper_scores

__all__ = ["PAPER", "REGISTRY", "Context", "Metric", "column_order", "measure_block", "select"]

_missing = [name for name in CATALOGUE if name not in REGISTERED]
if _missing:
    raise RuntimeError(f"metrics {_missing} are in wqk/metric_catalogue.py but no module registers them")
REGISTRY: dict[str, Metric] = {name: REGISTERED[name] for name in CATALOGUE}  # catalogue order


def measure_block(
    block: AttentionBlock,
    metrics: Iterable[str] = PAPER,
    device: str | torch.device = "cpu",
    n_std: float = 2.0,
    dtype: torch.dtype = torch.float32,
    zero_directionality: bool = False,
    rotary_offsets: Iterable[int] | None = None,
) -> Result:
    """(per-head columns [H], per-layer columns [1]) of one block for the selected metrics,
    on a device already resolved (wqk.scoring.resolve)."""
    offsets = tuple(sorted({int(d) for d in rotary_offsets})) if rotary_offsets is not None else None
    with torch.no_grad():
        factors = block_factors(block, torch.device(device), dtype)
        per_head, per_layer = paper_scores(factors, n_std, zero_directionality)
        ctx = Context(block, factors, n_std, dtype, offsets)
        for name in metrics:
            compute = REGISTRY[name].compute
            if compute is not None:
                heads, layer = compute(ctx)
                per_head |= _masked(heads, factors.bad)
                per_layer |= _masked(layer, factors.bad.any()[None])
    return per_head, per_layer


def _masked(columns: dict[str, np.ndarray], bad: torch.Tensor) -> dict[str, np.ndarray]:
    """NaN where the weights were not finite (the paper's scores say why in "reason")."""
    if not bad.any():
        return columns
    mask = bad.cpu().numpy()
    return {c: np.where(mask, np.nan, v) for c, v in columns.items()}
