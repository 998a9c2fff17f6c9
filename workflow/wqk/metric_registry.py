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

import dataclasses
from collections.abc import Iterable

import numpy as np
import torch

# the modules that register the metrics beyond the paper's two
from . import bilinear_forms, fingerprint, fingerprint_null, folded, qk_spectra, rotary, spectra  # noqa: F401
from .blocks import AttentionBlock
from .contracts import SCORE_FIELDS as FIELDS
from .metric_catalogue import CATALOGUE, PAPER, REGISTERED, Context, Metric, Result, column_order, select
from .metrics import block_factors, paper_scores, regrouped

__all__ = ["PAPER", "REGISTRY", "Context", "Metric", "column_order", "measure_block", "measure_with_authors", "select"]

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
    seed_key: str = "",
) -> Result:
    """(per-head columns [H], per-layer columns [1]) of one block for the selected metrics,
    on a device already resolved (wqk.scoring.resolve). seed_key: the model's name, which
    seeds a metric's random draws (fingerprint_null)."""
    with torch.no_grad():
        factors = block_factors(block, torch.device(device), dtype)
        return _measure(block, factors, metrics, n_std, dtype, zero_directionality, rotary_offsets, seed_key)


def measure_with_authors(
    block: AttentionBlock,
    order: tuple[int, ...] | None,
    metrics: Iterable[str] = PAPER,
    device: str | torch.device = "cpu",
    n_std: float = 2.0,
    rotary_offsets: Iterable[int] | None = None,
) -> tuple[Result, Result]:
    """`measure_block` of a block, and from the same factors the paper's two as the authors'
    method scores it (wqk.authors): its query heads in `order` (grouped-query key heads tiled:
    query head h meets key head h mod n_kv), or as they are (None: the exact rows, without the
    other metrics), directionality 0 where it is NaN."""
    dtype = torch.float32
    with torch.no_grad():
        factors = block_factors(block, torch.device(device), dtype)
        exact = _measure(block, factors, metrics, n_std, dtype, False, rotary_offsets)
        if order is None:
            kept = (*FIELDS, "reason")
            paper = tuple({c: r[c] for c in kept} for r in exact)
            for r in paper:
                r["directionality"] = np.where(np.isnan(r["directionality"]), 0.0, r["directionality"])
            return exact, paper
        tiled = regrouped(factors, order)
        if tiled is None:  # non-finite weights: the regrouped block's own factors flag them
            tiled = block_factors(
                dataclasses.replace(block, q=block.q[list(order)], heads=order), factors.qt.device, dtype
            )
        return exact, paper_scores(tiled, n_std, zero_directionality=True)


def _measure(block, factors, metrics, n_std, dtype, zero_directionality, rotary_offsets, seed_key="") -> Result:
    offsets = tuple(sorted({int(d) for d in rotary_offsets})) if rotary_offsets is not None else None
    per_head, per_layer = paper_scores(factors, n_std, zero_directionality)
    ctx = Context(block, factors, n_std, dtype, offsets, seed_key)
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
    return {c: np.where(mask.reshape(-1, *[1] * (np.ndim(v) - 1)), np.nan, v) for c, v in columns.items()}
