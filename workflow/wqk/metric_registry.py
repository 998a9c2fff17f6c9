"""The metrics of a head and of a layer, registered by name.

A metric is a function registered with the columns it writes. It takes a `Context` (the
block, its factored quantities `wqk.metrics.Factors`, the options) and returns two dicts
of float64 arrays, {column: [H]} for the head rows and {column: [1]} for the layer row;
a column it cannot compute for a block (no rotary embedding, no bias) it leaves out, and
the table holds NaN there. Every metric works from the k x k (or layer-width) quantities
that the paper's scores already form: one streaming pass over the weights serves them all.

    @register("spectra", columns=(...), summary="...")
    def head_spectra(ctx): ...

The paper's two, symmetry and directionality, are entries too; every table and figure
reads them, so they are always computed (`select` adds them). "default" selects every
cheap metric; "all" adds the ones whose cost grows with the cube of the layer width
(layer_spectra) or that score the form a second time (folded).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch

from .blocks import AttentionBlock
from .contracts import resolve_device
from .errors import WqkError
from .metrics import Factors, block_factors, paper_scores

PAPER = ("symmetry", "directionality")


@dataclass
class Context:
    block: AttentionBlock
    factors: Factors
    n_std: float
    dtype: torch.dtype
    rotary_offsets: tuple[int, ...] | None  # None: powers of two below the model's context


Result = tuple[dict[str, np.ndarray], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Metric:
    name: str
    columns: tuple[str, ...]  # a name with {d} is one column per rotary offset d
    compute: Callable[[Context], Result] | None  # None: the paper's two (wqk.metrics)
    cheap: bool
    summary: str  # one sentence and the formula: README, `wqk metrics`


REGISTRY: dict[str, Metric] = {}


def register(name: str, columns: tuple[str, ...], summary: str, cheap: bool = True):
    def wrap(fn: Callable[[Context], Result]) -> Callable[[Context], Result]:
        if name in REGISTRY:
            raise RuntimeError(f"metric {name!r} registered twice")
        REGISTRY[name] = Metric(name, tuple(columns), fn, cheap, summary)
        return fn

    return wrap


REGISTRY["symmetry"] = Metric(
    "symmetry", ("symmetry",), None, True, "<M, M^T>_F / ||M||_F^2: 1 symmetric, -1 antisymmetric (the paper's)."
)
REGISTRY["directionality"] = Metric(
    "directionality",
    ("directionality", "E_r", "E_c"),
    None,
    True,
    "(E_r - E_c) / (E_r + E_c), E the excess of row (column) norms over mean + 2 std: < 0 column-dominant "
    "(the paper's).",
)


def default_metrics() -> tuple[str, ...]:
    return tuple(name for name, m in REGISTRY.items() if m.cheap)


def select(spec: str | Iterable[str] | None = None) -> tuple[str, ...]:
    """Metric names from "default", "all", or names (a comma-separated string or a list, which
    may include "default"), in registry order, the paper's two always included."""
    names = spec.split(",") if isinstance(spec, str) else list(spec or ["default"])
    chosen = set(PAPER)
    for name in (n.strip() for n in names):
        if name == "default":
            chosen |= set(default_metrics())
        elif name == "all":
            chosen |= set(REGISTRY)
        elif name in REGISTRY:
            chosen.add(name)
        elif name:
            raise WqkError(f"unknown metric {name!r}; registered: default, all, {', '.join(REGISTRY)}")
    return tuple(name for name in REGISTRY if name in chosen)


def metrics_of_columns(columns: Iterable[str]) -> tuple[str, ...]:
    """The metrics whose columns are among `columns` (those of a scores file)."""
    declared = {_OFFSET.sub(r"\1_d{d}", c) for c in columns}
    found, claimed = [], set()
    for name, m in REGISTRY.items():
        if declared & set(m.columns) - claimed:  # layer_spectra's columns are spectra's
            found.append(name)
        claimed |= set(m.columns)
    return select(found)


_OFFSET = re.compile(r"(.*)_d(\d+)$")


def column_order(column: str) -> tuple:
    """Sort key of an extra column: its metric's place in the registry, its place among that
    metric's columns, then the rotary offset."""
    m = _OFFSET.fullmatch(column)
    declared = f"{m.group(1)}_d{{d}}" if m else column
    for rank, metric in enumerate(REGISTRY.values()):
        if declared in metric.columns:
            return (rank, metric.columns.index(declared), int(m.group(2)) if m else 0, column)
    return (len(REGISTRY), 0, 0, column)


def measure_block(
    block: AttentionBlock,
    metrics: Iterable[str] = PAPER,
    device: str | torch.device = "cpu",
    n_std: float = 2.0,
    dtype: torch.dtype = torch.float32,
    zero_directionality: bool = False,
    rotary_offsets: Iterable[int] | None = None,
) -> Result:
    """(per-head columns [H], per-layer columns [1]) of one block for the selected metrics."""
    offsets = tuple(sorted({int(d) for d in rotary_offsets})) if rotary_offsets is not None else None
    with torch.no_grad():
        factors = block_factors(block, resolve_device(device), dtype)
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


# the modules that register the metrics beyond the paper's two, in the order of their columns
from . import spectra, rotary, folded  # noqa: E402, F401, I001
