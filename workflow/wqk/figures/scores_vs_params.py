"""Symmetry and directionality against number of parameters (paper Figs. 2-3).

data["models"]: results/aggregate/models.parquet. One point per model x stack (self-
attention stacks only) at the median over layers, with interquartile error bars; colour by
objective (navy bidirectional, purple autoregressive); synthetic models hollow. Where the
table has null_*_median columns, the null reference of each model is drawn as small grey
crosses. Params: modality (text|vision|audio, default text), figure (keep models whose
catalogue `figure` lists this key; default: all of the modality).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..report_data import select_models
from . import COLOURS, DOUBLE, NULL_COLOUR, OTHER, label, new_figure, no_data, params_axis, score_axis, style

METRICS = ("symmetry", "directionality")


def plot_points(ax, df: pd.DataFrame, metric: str, by: str = "objective", palette=None, suffix: str = "") -> list:
    """Median with interquartile error bars, coloured by column `by` (palette order first);
    returns the legend handles: real, then synthetic, then the null reference."""
    palette = palette or COLOURS
    rank = {k: i for i, k in enumerate(palette)}
    handles = {}
    df = df[np.isfinite(df["n_params"].astype(float))]
    for (key, synthetic), g in df.groupby([by, "synthetic"], sort=True):
        c = palette.get(key, OTHER)
        med = g[f"{metric}_median"].to_numpy(float)
        err = np.vstack([med - g[f"{metric}_q25"].to_numpy(float), g[f"{metric}_q75"].to_numpy(float) - med])
        ax.errorbar(
            g["n_params"].to_numpy(float), med, yerr=np.clip(err, 0, None), fmt="o", color=c, ecolor=c,
            mfc="none" if synthetic else c, elinewidth=0.6, ms=3.5, mew=0.8, alpha=0.9,
        )  # fmt: skip
        handles[(synthetic, rank.get(key, 9), key)] = Line2D(
            [], [], ls="", marker="o", color=c, mfc="none" if synthetic else c, ms=3.5,
            label=label(f"{key}{suffix}", synthetic),
        )  # fmt: skip
    null = f"null_{metric}_median"
    if null in df and df[null].notna().any():
        ax.plot(df["n_params"], df[null], ls="", marker="x", ms=2.5, mew=0.6, color=NULL_COLOUR, zorder=1)
        handles[(True, 99, "null")] = Line2D(
            [], [], ls="", marker="x", color=NULL_COLOUR, ms=2.5, label="null (random Q, K)"
        )
    return [handles[k] for k in sorted(handles)]


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
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
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
        return plot_points(ax, df, metric)

    return metric_panels(df, width, height, lambda metric: f"{metric} ({modality} models)", panel)
