"""Spectral signatures of single heads by objective and modality (beyond the paper).

data["models"]: results/aggregate/models.parquet. One panel per spectral metric of M_h =
Q_h K_h^T (columns head_<metric>_median: the per-model median over its heads; see
wqk.aggregate): stable rank, effective rank, spectral radius / largest singular value, share
of the eigenvalue modulus mass on real eigenvalues, positive share of the symmetric part's
spectrum. On x, the objective of each stack (bidirectional, autoregressive, cross-attention
as its own group); one point per model x stack, jittered, filled in the objective's colour,
its marker naming the modality (circle text, square vision, triangle audio), hollow for
synthetic models. A box (quartiles, whiskers at 1.5 IQR, no fliers) over the real models of
a group when it has at least `min_box` of them, else a bar at their median; synthetic models
are drawn, never summarised. A dashed grey line: the null reference, the median over the
models drawn of their null's per-head median (random Gaussian Q, K of the same shapes;
columns null_head_<metric>_median). A metric that this run did not compute, or that is NaN
for every model, gets an annotated empty panel. A panel of more than MAX_MARKERS points
(wqk.figures._density) draws the real models of each group as a violin (their density)
under the box, and as points only the paper's models (and the synthetic ones). Params:
stacks (comma-separated, default "encoder,decoder,cross"), min_box (default 3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..contracts import CROSS, MODALITIES
from . import DOUBLE, NULL_COLOUR, OBJECTIVE_ORDER, OTHER, colour, new_figure, no_data, stack_list, style
from ._density import PAPER_EDGE, dense, paper_rows

# metric -> (panel title, y label, fixed y range or None)
METRICS = {
    "stable_rank": ("stable rank", "||M||_F^2 / ||M||_2^2", None),
    "effective_rank": ("effective rank", "exp(entropy of singular values)", None),
    "spectral_radius": ("spectral radius", "max |eig| / max singular value", (0.0, 1.05)),
    "real_eig_share": ("real eigenvalues", "share of |eig| mass on real eigs", (0.0, 1.05)),
    "sym_positive_share": ("symmetric part", "positive share of its |eig| mass", (0.0, 1.05)),
}
GROUPS = (*OBJECTIVE_ORDER, CROSS)
SHORT = {"bidirectional": "bidir.", "autoregressive": "autoreg.", CROSS: "cross"}  # tick labels; legend: full
COLOURS = {CROSS: "0.35"}
MARKERS = dict(zip(MODALITIES, ("o", "s", "^")))
OTHER_MARKER = "D"
VIOLIN = "0.86"  # the density of a group's models, under its box
VIOLIN_GID = "wqk-violin"


def group_colour(group: str) -> str:
    return COLOURS.get(group, colour(group))


def select(models: pd.DataFrame, stacks: str) -> pd.DataFrame:
    df = models[models["stack"].isin(stack_list(stacks))]
    return df.reset_index(drop=True)


def group_order(df: pd.DataFrame) -> list[str]:
    present = set(df["objective"])
    return [g for g in GROUPS if g in present] + sorted(present - set(GROUPS))


def null_level(df: pd.DataFrame, metric: str) -> float:
    """Median over the models drawn of their null reference's per-head median (NaN if none)."""
    for col in (f"null_head_{metric}_median", f"null_{metric}_median"):
        if col in df:
            v = df[col].to_numpy(float)
            v = v[np.isfinite(v)]
            if v.size:
                return float(np.median(v))
    return float("nan")


def panel(ax, df: pd.DataFrame, metric: str, groups: list[str], min_box: int, metrics: dict = METRICS) -> bool:
    """Draw one metric; False (and an annotated panel) when there is nothing to draw."""
    title, ylabel, ylim = metrics[metric]
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("objective")
    col = f"head_{metric}_median"
    if ylim:
        ax.set_ylim(*ylim)
    if col not in df:
        no_data(ax, "not computed in this run")
        ax.set_xticks([])
        return False
    values = df[col].to_numpy(float)
    if not np.isfinite(values).any():
        no_data(ax, "NaN for every model")
        ax.set_xticks([])
        return False
    rng = np.random.default_rng(0)
    ticks = []
    many = dense(int(np.isfinite(values).sum()))
    for x, group in enumerate(groups):
        sel = (df["objective"] == group).to_numpy() & np.isfinite(values)
        synthetic = df["synthetic"].to_numpy(bool)
        real = values[sel & ~synthetic]
        c = group_colour(group)
        if many:
            violin(ax, x, real, c)
            sel &= paper_rows(df) | synthetic
        if real.size >= min_box:
            ax.boxplot(
                [real], positions=[x], widths=0.55, showfliers=False, patch_artist=True,
                boxprops={"facecolor": "none", "edgecolor": c, "linewidth": 0.8},
                medianprops={"color": c, "linewidth": 1.2}, whiskerprops={"color": c, "linewidth": 0.6},
                capprops={"color": c, "linewidth": 0.6},
            )  # fmt: skip
        elif real.size:
            ax.plot([x - 0.25, x + 0.25], [np.median(real)] * 2, color=c, lw=1.2)
        for idx in np.flatnonzero(sel):
            row = df.iloc[idx]
            jitter = rng.uniform(-0.18, 0.18)
            edged = {"mec": PAPER_EDGE, "mew": 0.5} if many and not bool(row["synthetic"]) else {"mew": 0.7}
            ax.plot(
                x + jitter, values[idx], ls="", marker=MARKERS.get(row["modality"], OTHER_MARKER), ms=3.2,
                color=c, mfc="none" if bool(row["synthetic"]) else c, alpha=0.85, zorder=3, **edged,
            )  # fmt: skip
        n_real, n_syn = int(real.size), int((sel & synthetic).sum())
        count = f"n={n_real}" + (f"\n+{n_syn} syn." if n_syn else "")
        ticks.append(f"{SHORT.get(group, group)}\n{count}")
    ax.set_xticks(range(len(groups)), ticks)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    null = null_level(df, metric)
    if np.isfinite(null):
        ax.axhline(null, color=NULL_COLOUR, lw=0.8, ls="--", zorder=1)
    if not ylim:
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(0.0, lo), hi)
    return True


def violin(ax, x: float, values: np.ndarray, c: str) -> None:
    """The density of a group's values (a violin edged in its colour); none for fewer than two
    distinct values, whose density is not a shape."""
    if values.size < 2 or np.ptp(values) == 0:
        return
    parts = ax.violinplot([values], positions=[x], widths=0.8, showextrema=False)
    for body in parts["bodies"]:
        body.set(facecolor=VIOLIN, edgecolor=c, linewidth=0.4, alpha=1, zorder=1, gid=VIOLIN_GID)


def legend_handles(
    df: pd.DataFrame, groups: list[str], null: bool = True, many: bool = False, violins: bool = False
) -> list:
    """The legend; `many`: the panels drew points only for the paper's models (and synthetic
    ones), whose modalities the keys name; `violins`: and densities (none where every model
    has the same value)."""
    handles = [Patch(facecolor=group_colour(g), edgecolor=group_colour(g), label=g) for g in groups]
    marked = df[paper_rows(df) & ~df["synthetic"].astype(bool).to_numpy()] if many else df
    present = [m for m in MODALITIES if m in set(marked["modality"])]
    present += sorted(set(marked["modality"]) - set(MODALITIES))
    note = ": the paper's models" if many else ""
    if violins:
        handles.append(Patch(facecolor=VIOLIN, edgecolor=OTHER, lw=0.4, label="density of all models (violin)"))
    handles += [
        Line2D([], [], ls="", marker=MARKERS.get(m, OTHER_MARKER), color=OTHER, ms=3.2, label=f"{m}{note}")
        for m in present
    ]
    if df["synthetic"].astype(bool).any():
        handles.append(Line2D([], [], ls="", marker="o", color=OTHER, mfc="none", ms=3.2, label="synthetic (hollow)"))
    if null:  # a run without the null reference draws no null line
        handles.append(Line2D([], [], color=NULL_COLOUR, ls="--", lw=0.8, label="null (random Q, K)"))
    return handles


def draw(
    data: dict,
    stacks: str = "encoder,decoder,cross",
    min_box: int = 3,
    width: float = DOUBLE,
    height: float = 4.4,
):
    return signatures(data, METRICS, stacks, min_box, width, height, "no spectra in this run")


def signatures(data: dict, metrics: dict, stacks: str, min_box: int, width: float, height: float, empty: str):
    """One panel per metric of `metrics` (column -> title, y label, y range), three to a row,
    the legend in the last cell: what this figure and the follow-up families' figures draw."""
    df = select(data["models"], stacks)
    groups = group_order(df)
    with style():
        fig, axes = new_figure(width, height, nrows=-(-(len(metrics) + 1) // 3), ncols=3)
        flat = list(axes.flat)
        drawn = null = False
        for ax, metric in zip(flat, metrics):
            if not groups:
                ax.set_title(metrics[metric][0])
                ax.set_ylabel(metrics[metric][1])
                ax.set_xlabel("objective")
                no_data(ax, "no models")
                ax.set_xticks([])
                continue
            shown = panel(ax, df, metric, groups, int(min_box), metrics)
            drawn = shown or drawn
            null = null or (shown and np.isfinite(null_level(df, metric)))
        for ax in flat[len(metrics) : -1]:
            ax.axis("off")
        key = flat[-1]
        key.axis("off")
        if drawn:
            many = any(dense(int(np.isfinite(df[f"head_{m}_median"].to_numpy(float)).sum()))
                       for m in metrics if f"head_{m}_median" in df)  # fmt: skip
            violins = any(c.get_gid() == VIOLIN_GID for ax in flat for c in ax.collections)
            handles = legend_handles(df, groups, null, many, violins)
            key.legend(handles=handles, loc="center", title="per-model median over heads")
        else:
            key.text(0.5, 0.5, empty, ha="center", va="center", color="0.35")
    return fig
