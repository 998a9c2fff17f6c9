"""Training dynamics per layer (the paper's figure 5, right): one line per layer, cividis by depth.

data["layers"]: results/training/layers.csv. Rows: symmetry, directionality; columns: the
encoder (bidirectional) and the decoder (autoregressive) run. Params dataset (needed when
several), init (default "default"), size (needed when several).
"""

from __future__ import annotations

import matplotlib as mpl

from ..errors import WqkError
from . import DOUBLE, OBJECTIVE_ORDER, new_figure, no_data, score_axis, style
from ._training import NAMES, select, title

METRICS = ("symmetry", "directionality")


def draw(data: dict, dataset=None, init="default", size=None, width=DOUBLE, height=4.0):
    df = select(data["layers"], dataset, init, size)
    sizes = sorted(df["size"].astype(str).unique())
    if len(sizes) > 1:
        raise WqkError(f"several model sizes ({', '.join(sizes)}): pick one with --param size=NAME")
    cmap = mpl.colormaps["cividis"]
    n_layers = int(df["layer"].max()) + 1 if len(df) else 1
    norm = mpl.colors.Normalize(vmin=0, vmax=max(n_layers - 1, 1))
    with style():
        fig, axes = new_figure(width, height, nrows=2, ncols=2, sharex=True)
        for col, objective in enumerate(OBJECTIVE_ORDER):
            g = df[df["objective"] == objective]
            for row, metric in enumerate(METRICS):
                ax = axes[row][col]
                score_axis(ax, metric)
                if row == 0:
                    ax.set_title(f"{NAMES[objective]}, {title(df, dataset)}")
                if row == 1:
                    ax.set_xlabel("training step")
                if g.empty:
                    no_data(ax, "no run")
                for layer, gl in g.groupby("layer"):
                    gl = gl.sort_values("step")
                    ax.plot(gl["step"], gl[metric], color=cmap(norm(layer)), lw=0.9)
        bar = fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.6, pad=0.02)
        bar.set_label("layer")
        bar.set_ticks(range(n_layers) if n_layers <= 12 else range(0, n_layers, max(1, n_layers // 6)))
    return fig
