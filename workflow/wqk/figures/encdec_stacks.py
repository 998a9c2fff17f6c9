"""Encoder vs decoder stacks of encoder-decoder models (paper supplementary figure).

data["models"]: models.parquet. Models that have both an encoder and a decoder
self-attention stack; one point per stack against the model's parameter count (navy
encoder, purple decoder), the two stacks of a model joined by a thin grey line. Above
MAX_MARKERS points (wqk.figures._density): a density per stack, with the paper's models
(and synthetic ones) as joined points on top.
Params: modality (default: all), figure (catalogue figure key; default: all).
"""

from __future__ import annotations

import numpy as np

from ..report_data import select_models
from . import DOUBLE, STACK_COLOURS, no_data
from ._density import dense, paper_rows
from .scores_vs_params import metric_panels, plot_models


def encdec(models, modality=None, figure=None):
    df = select_models(models, modality, figure)
    stacks = df.groupby("model")["stack"].agg(set)
    both = stacks[stacks.map(lambda s: {"encoder", "decoder"} <= s)].index
    return df[df["model"].isin(both)]


def draw(data: dict, modality: str | None = None, figure: str | None = None, width=DOUBLE, height=2.4):
    df = encdec(data["models"], modality, figure)
    df = df[np.isfinite(df["n_params"].astype(float))]

    def panel(ax, metric):
        if df.empty:
            no_data(ax, "no encoder-decoder models")
            return None
        many = dense(len(df))
        joined = df[paper_rows(df) | df["synthetic"].astype(bool).to_numpy()] if many else df
        for _, g in joined.groupby("model", sort=True):  # over the density, when there is one
            ax.plot(
                g["n_params"],
                g[f"{metric}_median"],
                color="0.35" if many else "0.75",
                lw=0.5,
                zorder=1.5 if many else 0,
            )
        return plot_models(ax, df, metric, by="stack", palette=STACK_COLOURS, suffix=" stack")

    return metric_panels(df, width, height, lambda metric: f"{metric}: encoder vs decoder stacks", panel)
