"""Loss curves with and without symmetric initialisation (W_q = W_k at step 0).

data["losses"]: results/training/losses.csv, or the paper's wide symmetric_init_loss.csv.
One panel per (size, dataset); default initialisation solid in the objective's colour,
symmetric dashed in a lighter tint of it, drawn after it (a curve equal to the default's
stays visible); one line per seed (training.comparison_seeds). Params objective (default
bidirectional; "all" draws both), dataset, size (default all), log_y.
"""

from __future__ import annotations

import math

from ..report_data import from_paper, load_losses
from . import DOUBLE, colour, new_figure, no_data, style, tint
from ._training import NAMES

load = load_losses  # `wqk figure` reads the inputs through it


def draw(
    data: dict,
    objective="bidirectional",
    dataset=None,
    size=None,
    width=DOUBLE,
    height=2.4,
    log_y=False,
):
    df = data["losses"]
    if "step" not in df.columns:
        df = from_paper(df)
    objectives = sorted(df["objective"].unique()) if objective == "all" else [objective]
    df = df[df["objective"].isin(objectives)]
    if dataset is not None:
        df = df[df["dataset"].astype(str) == str(dataset)]
    if size is not None:
        df = df[df["size"].astype(str) == str(size)]
    panels = sorted({(str(s), str(d)) for s, d in zip(df["size"], df["dataset"])}) or [("", "")]
    ncols = min(len(panels), 3)
    nrows = math.ceil(len(panels) / ncols)
    with style():
        fig, axes = new_figure(width, height * nrows, nrows=nrows, ncols=ncols)
        flat = [ax for row in axes for ax in row]
        for ax, (s, d) in zip(flat, panels):
            g = df[(df["size"].astype(str) == s) & (df["dataset"].astype(str) == d)]
            ax.set_title(f"{s}, {d}" if s else "no runs")
            ax.set_xlabel("training step")
            ax.set_ylabel("training loss")
            if log_y:
                ax.set_yscale("log")
            else:
                ax.ticklabel_format(axis="y", useOffset=False)  # an offset text ran into the titles
            if g.empty:
                no_data(ax, "no runs")
            for obj in objectives:
                for init, ls in (("default", "-"), ("symmetric", "--")):
                    c = colour(obj) if init == "default" else tint(colour(obj))
                    gi = g[(g["init"] == init) & (g["objective"] == obj)]
                    seeds = gi.groupby("seed", sort=True) if "seed" in gi.columns else [(0, gi)]
                    for n, (_, gs) in enumerate(seeds):
                        gs = gs.sort_values("step")
                        ax.plot(
                            gs["step"],
                            gs["loss"],
                            color=c,
                            ls=ls,
                            lw=1.0 if n == 0 else 0.6,
                            label=f"{NAMES.get(obj, obj)}, {init} init" if n == 0 else None,
                        )
        for ax in flat[len(panels) :]:
            ax.set_visible(False)
        legend = {lab: h for ax in flat for h, lab in zip(*ax.get_legend_handles_labels())}
        handles, labels = list(legend.values()), list(legend)
        if handles:
            fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return fig
