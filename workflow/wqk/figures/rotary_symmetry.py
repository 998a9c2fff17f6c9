"""Rotary-aware symmetry s(d) against the relative offset d (beyond the paper).

data["models"]: results/aggregate/models.parquet. For a rotary model the form a query and a
key d positions apart see is M rotated by the rotary angle of offset d; s(d) is its symmetry
(s(0) is the symmetry of M itself). Columns head_rotary_symmetry_d<d>_median: per model x
stack, the median over heads of rotary_symmetry_d<d> (wqk.aggregate). One thin line per
model x stack, coloured by objective, dashed for synthetic models; a thick line per
objective: the median over its real models at each d where it has any. x is symmetric-log
(linear in [0, 1], log2 beyond) so that d = 0 is shown. Without rotary models (no such
column, or NaN for every model), an empty figure that says so. Params: stacks
(comma-separated, default "encoder,decoder": self-attention). More than MAX_MARKERS lines
(wqk.figures._density): the real models of each objective as bands (10-90% and 25-75% of
them at each d) around the median line, and as thin lines only the paper's models (and the
synthetic ones).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from . import OBJECTIVE_ORDER, SINGLE, colour, label, new_figure, no_data, score_axis, stack_list, style, tint
from ._density import dense, paper_rows

COLUMN = re.compile(r"head_rotary_symmetry_d(\d+)_median")
EMPTY = "no rotary models in this run"


def curves(models: pd.DataFrame, stacks: str = "encoder,decoder") -> tuple[np.ndarray, pd.DataFrame]:
    """(offsets d ascending, the model x stack rows that have s(d) for at least one d, with
    their values in columns named by d)."""
    cols = {int(m.group(1)): c for c in models.columns if (m := COLUMN.fullmatch(c))}
    offsets = np.array(sorted(cols), dtype=np.int64)
    df = models[models["stack"].isin(stack_list(stacks))]
    values = df[[cols[d] for d in offsets]].to_numpy(float) if offsets.size else np.empty((len(df), 0))
    keep = np.isfinite(values).any(axis=1)
    out = df.loc[keep, ["model", "stack", "objective", "synthetic"]].reset_index(drop=True)
    out["in_paper"] = paper_rows(df)[keep]
    vals = pd.DataFrame(values[keep], columns=list(offsets))
    return offsets, pd.concat([out, vals], axis=1)


def tick_text(t: int) -> str:
    return f"{t >> 20}M" if t >= 2**20 else f"{t >> 10}k" if t >= 2**10 else str(t)


def offset_axis(ax, offsets, max_ticks: int = 8) -> None:
    """Symmetric-log d (linear in [0, 1]); ticks at 0, 1 and powers of 2, 4, 8 or 16 (the
    finest that needs at most max_ticks), up to the first one at or past the largest offset."""
    top = int(max(offsets.max(), 1)) if len(offsets) else 1024
    ax.set_xscale("symlog", base=2, linthresh=1, linscale=0.5)
    for step in (2, 4, 8, 16):
        ticks = [0, 1]
        while ticks[-1] < top:
            ticks.append(ticks[-1] * step)
        if len(ticks) <= max_ticks:
            break
    ax.set_xticks(ticks, [tick_text(t) for t in ticks])
    ax.set_xlim(0, ticks[-1])
    ax.set_xlabel("relative offset d (tokens)")


def bands(ax, offsets: np.ndarray, values: np.ndarray, objective: str) -> Patch:
    """The spread of an objective's models at each d (values: one row per model): 10-90% pale,
    25-75% darker, under its median line; the legend handle of the darker band."""
    has = np.isfinite(values).sum(axis=0) >= 2
    q = np.nanpercentile(values[:, has], [10, 25, 75, 90], axis=0)
    c = colour(objective)
    outer, inner = tint(c, 0.8), tint(c, 0.55)
    ax.fill_between(offsets[has], q[0], q[3], color=outer, lw=0, zorder=1)
    ax.fill_between(offsets[has], q[1], q[2], color=inner, lw=0, zorder=2)
    return Patch(facecolor=inner, label=f"{objective}: 25-75% (pale: 10-90%) of its models")


def draw(data: dict, stacks: str = "encoder,decoder", width: float = SINGLE, height: float = 2.8):
    offsets, df = curves(data["models"], stacks)
    order = {o: i for i, o in enumerate(OBJECTIVE_ORDER)}
    with style():
        fig, axes = new_figure(width, height)
        ax = axes[0][0]
        score_axis(ax, "rotary-aware symmetry")
        ax.set_ylabel("symmetry s(d), median over heads")
        ax.set_title("symmetry at relative offset d")
        offset_axis(ax, offsets)
        if df.empty:
            no_data(ax, EMPTY)
            return fig
        handles = {}
        many = dense(len(df))
        note = ": the paper's models" if many else ""
        lines = df[df["in_paper"] | df["synthetic"].astype(bool)] if many else df
        for row, y in zip(lines.itertuples(index=False), lines[list(offsets)].to_numpy(float)):
            ok = np.isfinite(y)
            synthetic = bool(row.synthetic)
            c = colour(row.objective)
            ax.plot(offsets[ok], y[ok], color=c, lw=0.6, alpha=0.45 if not synthetic else 0.6,
                    ls="--" if synthetic else "-", marker="o", ms=1.5)  # fmt: skip
            key = (synthetic, order.get(row.objective, 9), row.objective)
            handles[key] = Line2D([], [], color=c, lw=0.6, ls="--" if synthetic else "-",
                                  label=label(row.objective, synthetic) + ("" if synthetic else note))  # fmt: skip
        real = df[~df["synthetic"].astype(bool)]
        for objective, g in real.groupby("objective", sort=True):
            v = g[list(offsets)].to_numpy(float)
            has = np.isfinite(v).any(axis=0)
            med = np.array([np.median(col[np.isfinite(col)]) if h else np.nan for col, h in zip(v.T, has)])
            ax.plot(offsets[has], med[has], color=colour(objective), lw=1.8, zorder=4)
            handles[(False, order.get(objective, 9), objective, "median")] = Line2D(
                [], [], color=colour(objective), lw=1.8, label=f"{objective}: median (n={len(g)})"
            )
            if many:
                handles[(False, order.get(objective, 9), objective, "band", "")] = bands(ax, offsets, v, objective)
        ordered = [handles[k] for k in sorted(handles, key=lambda k: (k[0], k[1], k[2], len(k)))]
        fig.legend(handles=ordered, loc="outside lower center", ncols=1)  # two columns ran past the edges
    return fig
