"""What quantisation does to the structure (beyond the paper).

data["quantisation"]: results/quantisation/summary.csv (`wqk quantisation --summary-out`). Two
panels, symmetry and directionality: x the quant type's bits per weight, y (log) the median
over layers of |change| (quantised minus float), one line per model and stack coloured by stack;
the same colour dotted: the null's spread for that stack (std of the score over random forms of
its shapes). A line under its dotted one: quantisation moves the score by less than one random
form differs from another.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from . import DOUBLE, STACK_COLOURS, new_figure, no_data, style

PANELS = (("symmetry", "symmetry"), ("directionality", "directionality"))
EMPTY = "no quantised models in this run"


def draw(data: dict, width: float = DOUBLE, height: float = 2.6):
    s = data["quantisation"]
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        handles = {}
        for ax, (metric, title) in zip(axes[0], PANELS):
            ax.set_title(f"{title}: change under quantisation")
            ax.set_xlabel("bits per weight")
            ax.set_ylabel(f"|change in {metric}|, median over layers")
            if s.empty:
                no_data(ax, EMPTY)
                continue
            ax.set_yscale("log")
            ax.set_xscale("log", base=2)
            bits = np.sort(s["bits_per_weight"].unique())
            ax.set_xticks(bits, [f"{b:g}\n{t}" for b, t in zip(bits, _type_names(s, bits))], fontsize=5)
            ax.minorticks_off()
            for (model, stack), g in s.groupby(["model", "stack"], sort=True):
                c = STACK_COLOURS.get(stack, "grey")
                y = g[f"abs_d_{metric}_median"].clip(lower=1e-7)
                ls = "-" if model == s["model"].iloc[0] else "--"
                ax.plot(g["bits_per_weight"], y, color=c, lw=0.9, ls=ls, marker="o", ms=2)
                ax.axhline(g[f"null_{metric}_std"].median(), color=c, lw=0.6, ls=":")
                handles[(model, stack)] = Line2D(
                    [], [], color=c, lw=0.9, ls=ls, marker="o", ms=2, label=f"{model}, {stack}"
                )
        handles["null"] = Line2D(
            [], [], color="0.3", lw=0.6, ls=":", label="null: std over random forms (colour: stack)"
        )
        fig.legend(handles=list(handles.values()), loc="outside lower center", ncols=2)
    return fig


def _type_names(s, bits) -> list[str]:
    return ["/".join(sorted(s.loc[s["bits_per_weight"] == b, "quant_type"].unique())) for b in bits]
