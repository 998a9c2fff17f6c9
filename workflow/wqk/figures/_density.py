"""Densities for the figures that draw one marker per model, once there are too many.

A panel that would draw more than MAX_MARKERS per-model markers (or lines: a hub atlas has
thousands of models) draws the density of those models instead, and the paper's models
(models.parquet's `in_paper`: the stacks the catalogue's `paper_stacks` names) as markers on
top. At or below MAX_MARKERS a figure draws exactly what it drew before densities existed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap, LogNorm

from . import tint

MAX_MARKERS = 300  # per-model markers one panel draws before it switches to a density
PAPER_EDGE = "white"  # the paper's models stand out on the darkest bins
DENSITY_GID = "wqk-density"  # the hexbins colour_bars explains
HEX_GRID = (36, 14)  # hexagons across x and y of a score panel


def dense(n_markers: int) -> bool:
    return n_markers > MAX_MARKERS


def paper_rows(df: pd.DataFrame) -> np.ndarray:
    """Which rows are the paper's models (none for a table from before `in_paper`)."""
    if "in_paper" not in df:
        return np.zeros(len(df), dtype=bool)
    return df["in_paper"].fillna(False).to_numpy(bool)


def colour_map(colour: str) -> LinearSegmentedColormap:
    """Light to dark shades of colour: few models pale, many dark."""
    return LinearSegmentedColormap.from_list(f"density-{colour}", [tint(colour, 0.88), tint(colour, 0.1)])


def hexbin(ax, x: np.ndarray, y: np.ndarray, colour: str, group: str, extent: tuple, xscale: str = "linear"):
    """Counts of (x, y) in hexagons over extent (log10 of x for a log x) in shades of colour,
    empty hexagons left out; its colour scale is set by colour_bars."""
    ok = np.isfinite(x) & np.isfinite(y) & ((x > 0) if xscale == "log" else True)
    return ax.hexbin(
        x[ok], y[ok], gridsize=HEX_GRID, extent=extent, xscale=xscale, mincnt=1, cmap=colour_map(colour),
        linewidths=0.2, edgecolors="face", zorder=1, gid=DENSITY_GID, label=group,
    )  # fmt: skip


def colour_bars(fig, axes) -> None:
    """One colour bar per group of the hexbins drawn in `axes` (a shared log scale of models
    per hexagon, so that shades compare across groups and panels); nothing without any."""
    bins = [c for ax in axes for c in ax.collections if c.get_gid() == DENSITY_GID]
    if not bins:
        return
    top = max(float(np.max(c.get_array())) for c in bins)
    norm = LogNorm(vmin=1, vmax=max(top, 10.0))
    for c in bins:
        c.set_norm(norm)
    first = {}
    for c in bins:
        first.setdefault(c.get_label(), c)
    for group, c in reversed(first.items()):  # the first group's bar nearest the panels
        bar = fig.colorbar(c, ax=list(axes), location="right", fraction=0.02, pad=0.01, aspect=25)
        bar.set_label(f"{group}: models per bin")
        bar.outline.set_linewidth(0.4)
