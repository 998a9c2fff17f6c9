"""Symmetry and directionality against number of parameters (paper Figs. 2-3).

data["models"]: results/aggregate/models.parquet. One point per model x stack (self-
attention stacks only) at the median over layers, with interquartile error bars; colour by
objective (navy bidirectional, purple autoregressive); synthetic models hollow; quantised
models (a `storage`: a GGUF's q/k, scored dequantised) diamonds, labelled with it. Where the
table has null_*_median columns, the null reference of each model is drawn as small grey
crosses. A panel of more than MAX_MARKERS points (wqk.figures._density) draws the real
models as a density instead (hexagons, a colour bar per objective) and only the paper's
models (and synthetic ones, and their null crosses) as points on top. Params: modality
(text|vision|audio, default text), figure (keep models whose catalogue `figure` lists this
key; default: all of the modality).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..contracts import quantised
from ..report_data import select_models
from . import (
    COLOURS,
    DOUBLE,
    NULL_COLOUR,
    OTHER,
    label,
    legend_columns,
    new_figure,
    no_data,
    params_axis,
    score_axis,
    style,
)
from ._density import DENSITY_GID, PAPER_EDGE, colour_bars, dense, hexbin, paper_rows

METRICS = ("symmetry", "directionality")


def plot_points(
    ax, df: pd.DataFrame, metric: str, by: str = "objective", palette=None, suffix: str = "", edge=None, note=""
) -> list:
    """Median with interquartile error bars, coloured by column `by` (palette order first),
    the markers edged in `edge` (default: their colour), `note` after the real ones' labels;
    returns the legend handles: real, then synthetic, then the null reference."""
    palette = palette or COLOURS
    rank = {k: i for i, k in enumerate(palette)}
    handles = {}
    df = df[np.isfinite(df["n_params"].astype(float))]
    stored = df["storage"].fillna("") if "storage" in df else ""
    for (key, synthetic, storage), g in df.assign(_stored=stored).groupby([by, "synthetic", "_stored"], sort=True):
        c = palette.get(key, OTHER)
        edged = {"mec": edge, "mew": 0.5} if edge and not synthetic else {}
        marker = "D" if storage else "o"
        med = g[f"{metric}_median"].to_numpy(float)
        err = np.vstack([med - g[f"{metric}_q25"].to_numpy(float), g[f"{metric}_q75"].to_numpy(float) - med])
        ax.errorbar(
            g["n_params"].to_numpy(float), med, yerr=np.clip(err, 0, None), fmt=marker, color=c, ecolor=c,
            mfc="none" if synthetic else c, elinewidth=0.6, ms=3.5, alpha=0.9, **({"mew": 0.8} | edged),
        )  # fmt: skip
        handles[(synthetic, rank.get(key, 9), key, storage)] = Line2D(
            [], [], ls="", marker=marker, color=c, mfc="none" if synthetic else c, ms=3.5, **edged,
            label=label(f"{key}{suffix}", synthetic) + (f" ({quantised(storage)})" if storage else "")
            + ("" if synthetic else note),
        )  # fmt: skip
    null = f"null_{metric}_median"
    if null in df and df[null].notna().any():
        ax.plot(df["n_params"], df[null], ls="", marker="x", ms=2.5, mew=0.6, color=NULL_COLOUR, zorder=1)
        handles[(True, 99, "null", "")] = Line2D(
            [], [], ls="", marker="x", color=NULL_COLOUR, ms=2.5, label="null (random Q, K)"
        )
    return [handles[k] for k in sorted(handles)]


def plot_density(ax, df: pd.DataFrame, metric: str, by: str = "objective", palette=None, suffix: str = "") -> list:
    """plot_points for more than MAX_MARKERS points: the real models as a density per group
    of `by` (hexagons in shades of its colour), the paper's models and the synthetic ones as
    plot_points draws them, on top; returns their legend handles."""
    palette = palette or COLOURS
    rank = {k: i for i, k in enumerate(palette)}
    df = df[np.isfinite(df["n_params"].astype(float))]
    synthetic = df["synthetic"].astype(bool).to_numpy()
    extent = (*np.log10(ax.get_xlim()), *ax.get_ylim())
    real = df[~synthetic]
    for key in sorted(real[by].unique(), key=lambda k: (rank.get(k, 9), k)):
        g = real[real[by] == key]
        x, y = g["n_params"].to_numpy(float), g[f"{metric}_median"].to_numpy(float)
        hexbin(ax, x, y, palette.get(key, OTHER), f"{key}{suffix}", extent, xscale="log")
    marked = df[paper_rows(df) | synthetic]
    return plot_points(ax, marked, metric, by, palette, suffix, edge=PAPER_EDGE, note=": the paper's models")


def plot_models(ax, df: pd.DataFrame, metric: str, **kw) -> list:
    """plot_points, or plot_density when there are more points than a panel shows readably."""
    n = int(np.isfinite(df["n_params"].astype(float)).sum())
    return (plot_density if dense(n) else plot_points)(ax, df, metric, **kw)


def metric_panels(df, width: float, height: float, title, panel):
    """One panel per score against the parameter count; panel(ax, metric) draws into it and
    returns its legend handles (None when it had nothing to draw)."""
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        handles = []
        for ax, metric in zip(axes[0], METRICS):
            params_axis(ax, df["n_params"].astype(float))
            score_axis(ax, metric)
            ax.set_title(title(metric))
            handles = panel(ax, metric) or handles
        densities = any(c.get_gid() == DENSITY_GID for ax in axes[0] for c in ax.collections)
        colour_bars(fig, axes[0])
        if handles:
            ncols = min(len(handles), 4)
            if densities:  # longer labels ("...: the paper's models")
                ncols = legend_columns([h.get_label() for h in handles], 4, width)
            fig.legend(handles=handles, loc="outside lower center", ncols=ncols)
    return fig


def draw(data: dict, modality: str = "text", figure: str | None = None, width: float = DOUBLE, height: float = 2.4):
    df = select_models(data["models"], modality, figure)

    def panel(ax, metric):
        if df.empty or not np.isfinite(df["n_params"].astype(float)).any():
            no_data(ax, f"no {modality} models" if df.empty else "no parameter counts")
            return None
        unknown = df.loc[~np.isfinite(df["n_params"].astype(float)), "model"].nunique()
        if unknown:
            ax.text(0.98, 0.02, f"{unknown} model(s) without a parameter count not shown", ha="right",
                    va="bottom", transform=ax.transAxes, color="0.4", fontsize=7)  # fmt: skip
        return plot_models(ax, df, metric)

    return metric_panels(df, width, height, lambda metric: f"{metric} ({modality} models)", panel)
