"""Public training histories (the paper's training-dynamics figure, for checkpoints others
published along their training): symmetry and directionality of each swept model against the
fraction of its training, beside our own runs.

data["sweeps"]: results/aggregate_sweeps/models.parquet (one row per revision x stack; columns
sweep, step: wqk.sweeps). data["summary"] (optional): results/training/summary.csv, our runs,
drawn as broken lines, a style per size and dataset (default initialisation, the first seed; params dataset, size: one of
each, default all). The x axis is the step over the history's last step, so that a history of
143,000 steps and a run of 2,000 share it; logarithmic above 1e-4 (early checkpoints are
published log-spaced), linear below, so that step 0 has its place. Per swept model and stack, the median over layers
at each published revision (markers) with the interquartile band; colours by objective (the
paper's), marker shapes by swept model.
"""

from __future__ import annotations

import pandas as pd

from ..report_data import first_seed
from ..sweeps import training_fraction
from . import DOUBLE, OBJECTIVE_ORDER, colour, legend_columns, new_figure, no_data, score_axis, style
from ._training import NAMES

METRICS = ("symmetry", "directionality")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINEAR = 1e-4  # the x axis is linear from 0 to this fraction of training, logarithmic above
OUR_STYLES = ("--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))


def histories(sweeps: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(swept model, stack, its revisions in step order with `fraction`) of every history."""
    sweeps = sweeps.assign(fraction=training_fraction(sweeps))
    out = [(sweep, stack, g.sort_values("step")) for (sweep, stack), g in sweeps.groupby(["sweep", "stack"], sort=True)]
    rank = {o: i for i, o in enumerate(OBJECTIVE_ORDER)}
    return sorted(out, key=lambda h: (rank.get(h[2]["objective"].iloc[0], 9), h[0], h[1]))


def our_runs(summary: pd.DataFrame | None, dataset=None, size=None) -> list[tuple[str, pd.DataFrame]]:
    """(label, run by step with `fraction`) of our default-initialised runs."""
    if summary is None or summary.empty:
        return []
    df = first_seed(summary[summary["init"] == "default"])
    if dataset is not None:
        df = df[df["dataset"].astype(str) == str(dataset)]
    if size is not None:
        df = df[df["size"].astype(str) == str(size)]
    by = ["objective", "size", "dataset"]
    df = df.assign(fraction=training_fraction(df, by))
    return [
        (f"ours: {NAMES.get(objective, objective)}, {size_}, {dataset_}", g.sort_values("step"))
        for (objective, size_, dataset_), g in df.groupby(by, sort=True)
    ]


def draw(data: dict, dataset=None, size=None, width=DOUBLE, height=2.6):
    found = histories(data["sweeps"])
    runs = our_runs(data.get("summary"), dataset, size)
    kinds = sorted({tuple(g[["size", "dataset"]].astype(str).iloc[0]) for _, g in runs})  # a line style each
    markers = {sweep: MARKERS[i % len(MARKERS)] for i, sweep in enumerate(sorted({h[0] for h in found}))}
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        for ax, metric in zip(axes[0], METRICS):
            score_axis(ax, metric)
            # early checkpoints are published log-spaced (Pythia: steps 1, 2, 4 ... 512): log-like x,
            # linear below LINEAR so that step 0 has its place
            ax.set_xscale("symlog", linthresh=LINEAR, linscale=0.5)
            ax.set_xlim(0, 1.2)
            ax.set_xlabel("fraction of training (step / last step)")
            ax.set_title(metric)
            if not found:
                no_data(ax, "no swept models")
            for sweep, stack, g in found:
                c = colour(g["objective"].iloc[0])
                ax.plot(g["fraction"], g[f"{metric}_median"], color=c, marker=markers[sweep], ms=3,
                        label=f"{sweep} ({stack}, {len(g)} revisions)")  # fmt: skip
                ax.fill_between(g["fraction"], g[f"{metric}_q25"], g[f"{metric}_q75"], color=c, alpha=0.15, lw=0)
            for name, g in runs:
                ls = OUR_STYLES[kinds.index(tuple(g[["size", "dataset"]].astype(str).iloc[0])) % len(OUR_STYLES)]
                ax.plot(g["fraction"], g[f"{metric}_median"], color=colour(g["objective"].iloc[0]), ls=ls, lw=0.8,
                        label=name)  # fmt: skip
        handles, labels = axes[0][0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside lower center", ncols=legend_columns(labels, 2, width))
    return fig
