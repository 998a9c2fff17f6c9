"""Training dynamics per layer (the paper's figure 5, right): one line per layer, cividis by depth.

data["layers"]: results/training/layers.csv. Per model size a block of panels: rows
symmetry, directionality; columns the encoder (bidirectional) and the decoder
(autoregressive) run; a colour bar of its own layers. Blocks go top to bottom from the
deepest size to the shallowest (then by name): with the paper's sizes the first block is
the base-size runs of the paper's figure 5, the mini runs get their own block below. Params
dataset (needed when several), init (default "default"), size (one size only; default all).
"""

from __future__ import annotations

import matplotlib as mpl

from . import DOUBLE, OBJECTIVE_ORDER, new_figure, no_data, score_axis, style
from ._training import NAMES, select, title

METRICS = ("symmetry", "directionality")


def ordered_sizes(df) -> list[str]:
    """The sizes in the layers table, deepest first (ties by name): the order of the blocks."""
    depth = df.groupby(df["size"].astype(str))["layer"].max()
    return sorted(depth.index, key=lambda s: (-int(depth[s]), s))


def draw(data: dict, dataset=None, init="default", size=None, width=DOUBLE, height=4.0):
    df = select(data["layers"], dataset, init, size)
    sizes = ordered_sizes(df) if len(df) else [None]
    cmap = mpl.colormaps["cividis"]
    with style():
        fig, axes = new_figure(width, height * len(sizes), nrows=2 * len(sizes), ncols=2, sharex=True)
        for block, s in enumerate(sizes):
            dfs = df if s is None else df[df["size"].astype(str) == s]
            n_layers = int(dfs["layer"].max()) + 1 if len(dfs) else 1
            norm = mpl.colors.Normalize(vmin=0, vmax=max(n_layers - 1, 1))
            rows = axes[2 * block : 2 * block + 2]
            for col, objective in enumerate(OBJECTIVE_ORDER):
                g = dfs[dfs["objective"] == objective]
                for row, metric in enumerate(METRICS):
                    ax = rows[row][col]
                    score_axis(ax, metric)
                    if row == 0:
                        ax.set_title(f"{NAMES[objective]}, {title(dfs, dataset)}" + (f", {s}" if s else ""))
                    if row == 1 and block == len(sizes) - 1:
                        ax.set_xlabel("training step")
                    if g.empty:
                        no_data(ax, "no run")
                    for layer, gl in g.groupby("layer"):
                        gl = gl.sort_values("step")
                        ax.plot(gl["step"], gl[metric], color=cmap(norm(layer)), lw=0.9)
            bar = fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=rows, shrink=0.6, pad=0.02)
            bar.set_label(f"layer ({s})" if s else "layer")
            bar.set_ticks(range(n_layers) if n_layers <= 12 else range(0, n_layers, max(1, n_layers // 6)))
    return fig
