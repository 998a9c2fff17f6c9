"""Figures: one module per figure with `draw(data: dict[str, DataFrame], **params) -> Figure`.

`save(fig, out_pdf)` writes OUT.pdf and OUT.png side by side with their metadata stripped,
so a rerun gives byte-identical files, once the figure passes the layout check (`_layout`:
every text inside the canvas and clear of the others, the legend naming only what is
drawn). Figures are built on matplotlib.figure.Figure (no pyplot state), in the paper's
look: 7 pt fonts, single (3.5 in) or double (7 in) column.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from ..atomic import atomic_path
from ..contracts import OBJECTIVES
from ..errors import WqkError
from . import _layout

logging.getLogger("fontTools").setLevel(logging.WARNING)  # font subsetting chatter on every PDF

SINGLE = 3.5  # inches: one column
DOUBLE = 7.0  # inches: two columns
DPI = 300

# The paper: navy for bidirectional (encoder-only), purple for autoregressive (decoder-only).
COLOURS = {"bidirectional": "navy", "autoregressive": "purple"}
OBJECTIVE_ORDER = OBJECTIVES
STACK_COLOURS = {"encoder": "navy", "decoder": "purple", "cross": "grey"}
OTHER = "grey"
NULL_COLOUR = "0.55"

RC = {
    "font.size": 7,
    "axes.titlesize": 8,
    "axes.labelsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.0,
    "lines.markersize": 4,
    "errorbar.capsize": 1.5,
    "pdf.fonttype": 42,  # TrueType in the PDF: text stays text, and editable
    "svg.hashsalt": "wqk",
    "savefig.dpi": DPI,
    "figure.dpi": 100,
    "image.interpolation": "nearest",
}


@contextlib.contextmanager
def style():
    """rc settings of every figure (used while drawing and while saving)."""
    with matplotlib.rc_context(RC):
        yield


def new_figure(width: float = DOUBLE, height: float = 2.4, **subplots) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(squeeze=False, **subplots)
    return fig, axes


def colour(objective: str) -> str:
    return COLOURS.get(objective, OTHER)


def tint(colour_: str, amount: float = 0.5) -> tuple:
    """colour_ mixed with white: a lighter line of the same hue."""
    return tuple(v + (1 - v) * amount for v in matplotlib.colors.to_rgb(colour_))


def label(objective: str, synthetic: bool = False) -> str:
    return f"{objective} (synthetic)" if synthetic else objective


def stack_list(stacks: str) -> list[str]:
    """The stacks a figure's `stacks` parameter names ("encoder,decoder")."""
    return [s.strip() for s in str(stacks).split(",")]


def no_data(ax, text: str = "no models") -> None:
    """Mark an empty panel instead of failing: e.g. a quick start without vision models."""
    ax.text(0.5, 0.72, text, transform=ax.transAxes, ha="center", va="center", color="0.35",
            bbox={"facecolor": "white", "edgecolor": "0.7", "boxstyle": "round", "lw": 0.5})  # fmt: skip


def score_axis(ax, metric: str) -> None:
    """y from -1 to 1 with a dashed line at 0, as in the paper."""
    ax.set_ylim(-1.05, 1.05)
    ax.set_yticks([-1, -0.5, 0, 0.5, 1])
    ax.axhline(0, color="0.3", lw=0.6, ls="--", zorder=0)
    ax.set_ylabel(f"{metric} score")


def params_axis(ax, n_params=()) -> None:
    """log x from 1e6 to 1e12 (widened to hold smaller or larger models, e.g. tiny ones)."""
    v = np.asarray([x for x in n_params if np.isfinite(x) and x > 0], dtype=float)
    lo = min(1e6, 10 ** np.floor(np.log10(v.min()))) if v.size else 1e6
    hi = max(1e12, 10 ** np.ceil(np.log10(v.max()))) if v.size else 1e12
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("number of parameters")


def legend_columns(labels: list[str], ncols: int, width: float = DOUBLE) -> int:
    """The most columns, up to ncols, in which a figure legend of these labels (in the legend
    font, line handles) fits a figure `width` inches wide: a one-row legend of long labels runs
    past both edges. Text widths from the font's outlines: no drawing needed."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    with style():
        rc = matplotlib.rcParams
        size = FontProperties(size=rc["legend.fontsize"]).get_size_in_points()
        font = FontProperties(size=size)
        text = [TextToPath().get_text_width_height_descent(s, font, ismath=False)[0] for s in labels]
        entry = (rc["legend.handlelength"] + rc["legend.handletextpad"]) * size
        gap, pad = rc["legend.columnspacing"] * size, (rc["legend.borderpad"] + rc["legend.borderaxespad"]) * size
    for n in range(max(1, min(ncols, len(labels))), 1, -1):
        columns = [c for c in np.array_split(np.asarray(text), n) if len(c)]  # filled as Legend fills them
        if sum(entry + c.max() for c in columns) + gap * (len(columns) - 1) + 2 * pad <= width * 72:
            return n
    return 1


def output_paths(out: str | os.PathLike) -> list[Path]:
    """[OUT.pdf, OUT.png]: what `save` writes for out (any other suffix replaced)."""
    out_pdf = Path(out).with_suffix(".pdf")
    return [out_pdf, out_pdf.with_suffix(".png")]


def save(fig: Figure, out_pdf: str | os.PathLike) -> tuple[Path, Path]:
    """Write OUT.pdf and OUT.png (same stem), metadata stripped, atomically; a WqkError and
    neither file when the PNG's draw fails the layout check (`_layout`)."""
    out_pdf, out_png = output_paths(out_pdf)
    out_pdf.parent.mkdir(parents=True, exist_ok=True)
    meta_pdf = {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None}
    with style(), atomic_path(out_pdf) as tmp_pdf, atomic_path(out_png) as tmp_png:
        fig.savefig(tmp_pdf, format="pdf", metadata=meta_pdf, dpi=DPI)
        with _layout.on_draw(fig) as problems:
            fig.savefig(tmp_png, format="png", metadata={"Software": None}, dpi=DPI)
        if problems:
            raise WqkError(
                f"figure {out_pdf.stem} is not readable (fix its module, wqk.figures):\n  " + "\n  ".join(problems)
            )
    return out_pdf, out_png
