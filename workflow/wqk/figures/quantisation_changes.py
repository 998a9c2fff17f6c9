"""What quantisation does to the structure (beyond the paper).

data["quantisation"]: results/quantisation/summary.csv (`wqk quantisation --summary-out`). Two
panels, symmetry and directionality: x the quant type's bits per weight, y (log) the median
over layers of |change| (quantised minus float), one line per model and stack coloured by stack;
the same colour dotted: the null's spread for that stack (std of the score over random forms of
its shapes). A line under its dotted one: quantisation moves the score by less than one random
form differs from another.
"""

from __future__ import annotations

from matplotlib.lines import Line2D

from . import DOUBLE, STACK_COLOURS, new_figure, no_data, style

PANELS = (("symmetry", "symmetry"), ("directionality", "directionality"))
EMPTY = "no quantised models in this run"


def draw(data: dict, width: float = DOUBLE, height: float = 3.4):
    s = data["quantisation"]
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        handles = {}
        types = s.sort_values(["bits_per_weight", "quant_type"]).drop_duplicates("quant_type")
        where = {t: i for i, t in enumerate(types["quant_type"])}
        first = s["model"].iloc[0] if len(s) else None
        for ax, (metric, title) in zip(axes[0], PANELS):
            ax.set_title(f"{title} under quantisation")
            ax.set_xlabel("quant type (bits per weight)")
            ax.set_ylabel("median |change| over layers")
            if s.empty:
                no_data(ax, EMPTY)
                continue
            ax.set_yscale("log")
            ax.set_xticks(
                range(len(where)), [f"{t}\n{b:g}" for t, b in zip(types["quant_type"], types["bits_per_weight"])]
            )
            ax.tick_params(axis="x", labelsize=5)
            for (model, stack), g in s.groupby(["model", "stack"], sort=True):
                c = STACK_COLOURS.get(stack, "grey")
                ls = "-" if model == first else "--"
                x = g["quant_type"].map(where)
                ax.plot(x, g[f"abs_d_{metric}_median"].clip(lower=1e-7), color=c, lw=0.9, ls=ls, marker="o", ms=2)
                ax.axhline(g[f"null_{metric}_std"].median(), color=c, lw=0.6, ls=":")
                handles[(0, model, stack)] = Line2D(
                    [], [], color=c, lw=0.9, ls=ls, marker="o", ms=2, label=f"{model}, {stack}"
                )
                handles[(1, "", stack)] = Line2D([], [], color=c, lw=0.6, ls=":", label=f"null spread, {stack}")
        if handles:
            fig.legend(handles=[handles[k] for k in sorted(handles)], loc="outside lower center", ncols=2)
    return fig
