"""Training dynamics (the paper's figure 5): symmetry and directionality against training step.

data["summary"]: results/training/summary.csv. Per objective (encoder navy, decoder purple),
the median over layers as a line with the interquartile band. One figure per dataset
(param dataset, needed when the summary holds several); params init (default "default"),
size (default: all sizes, told apart by line style).
data["published"] (optional): the paper's training_curves.csv; its median curve of each run
shown here (the paper's "bert" = our base, "bert-small" = our mini) is overlaid as a thin
dotted line, its steps scaled to our run's length (the paper trained 200,000 steps).
"""

from __future__ import annotations

from ..report_data import load_csv, paper_runs
from . import DOUBLE, OBJECTIVE_ORDER, colour, legend_columns, new_figure, no_data, score_axis, style
from ._training import NAMES, select, title

METRICS = ("symmetry", "directionality")
LINESTYLES = ("-", "--", ":", "-.")

load = load_csv  # `wqk figure` reads the inputs through it


def draw(data: dict, dataset=None, init="default", size=None, width=DOUBLE, height=2.4):
    df = select(data["summary"], dataset, init, size)
    sizes = sorted(df["size"].astype(str).unique())
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        for ax, metric in zip(axes[0], METRICS):
            score_axis(ax, metric)
            ax.set_xlabel("training step")
            ax.set_title(f"{metric} ({title(df, dataset)})")
            if df.empty:
                no_data(ax, "no runs")
            for objective in OBJECTIVE_ORDER:
                for i, s in enumerate(sizes):
                    g = df[(df["objective"] == objective) & (df["size"].astype(str) == s)].sort_values("step")
                    if g.empty:
                        continue
                    c = colour(objective)
                    name = NAMES.get(objective, objective) + (f", {s}" if len(sizes) > 1 else "")
                    ax.plot(
                        g["step"],
                        g[f"{metric}_median"],
                        color=c,
                        ls=LINESTYLES[i % 4],
                        label=name,
                    )
                    ax.fill_between(
                        g["step"],
                        g[f"{metric}_q25"],
                        g[f"{metric}_q75"],
                        color=c,
                        alpha=0.2,
                        lw=0,
                    )
                    paper = _paper_curve(data.get("published"), s, g["dataset"].iloc[0], objective)
                    if paper is not None:
                        scale = g["step"].max() / paper["checkpoint_step"].max()
                        ax.plot(paper["checkpoint_step"] * scale, paper[f"{metric}_median"], color=c, ls=":",
                                lw=0.8, label=f"paper, {name} (steps scaled)")  # fmt: skip
        handles, labels = axes[0][0].get_legend_handles_labels()
        if handles:
            # the paper's overlaid curves double the entries and lengthen them: fewer columns then
            ncols = legend_columns(labels, 2 if len(handles) > 4 else len(handles), width)
            fig.legend(handles, labels, loc="outside lower center", ncols=ncols)
    return fig


def _paper_curve(published, size: str, dataset: str, objective: str):
    """The paper's median curve of one of our runs (None without one)."""
    if published is None:
        return None
    wanted = (size, str(dataset), objective)
    return next((curve for *run, curve in paper_runs(published) if tuple(run) == wanted), None)
