"""Encoder vs decoder stacks of encoder-decoder models (paper supplementary figure).

data["models"]: models.parquet. Models that have both an encoder and a decoder
self-attention stack; one point per stack against the model's parameter count (navy
encoder, purple decoder), the two stacks of a model joined by a thin grey line.
Params: modality (default: all), figure (catalogue figure key; default: all).
"""

from __future__ import annotations

import numpy as np

from . import DOUBLE, STACK_COLOURS, new_figure, no_data, params_axis, score_axis, style
from .scores_vs_params import METRICS, plot_points, select


def encdec(models, modality=None, figure=None):
    df = select(models, modality, figure)
    stacks = df.groupby("model")["stack"].agg(set)
    both = stacks[stacks.map(lambda s: {"encoder", "decoder"} <= s)].index
    return df[df["model"].isin(both)]


def draw(data: dict, modality: str | None = None, figure: str | None = None, width=DOUBLE, height=2.4):
    df = encdec(data["models"], modality, figure)
    df = df[np.isfinite(df["n_params"].astype(float))]
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        handles = []
        for ax, metric in zip(axes[0], METRICS):
            params_axis(ax, df["n_params"].astype(float))
            score_axis(ax, metric)
            ax.set_title(f"{metric}: encoder vs decoder stacks")
            if df.empty:
                no_data(ax, "no encoder-decoder models")
                continue
            for _, g in df.groupby("model", sort=True):
                ax.plot(g["n_params"], g[f"{metric}_median"], color="0.75", lw=0.5, zorder=0)
            handles = plot_points(ax, df, metric, by="stack", palette=STACK_COLOURS, suffix=" stack")
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
    return fig
