"""The squared singular value spectra of the heads by objective and modality (beyond the paper:
the statistics of qk-spectral-analysis, wqk.qk_spectra, without its core's transpose): per model
x stack the median over its heads of the skew and excess kurtosis of sigma^2(M) (scale-free: the
other statistics carry the weights' scale), and the leading share sigma_1^2 / sum sigma^2
(attention-bilinear-forms'), a box per objective, markers by modality; and the spectra
themselves (their eigen_values, the heads' `sv2` lists): the share of sum sigma^2 in the top
i of the d_head values against i / d_head, the median over each objective's heads with its
quartiles shaded (a flat spectrum is the diagonal, a rank-one head a step at once). Params:
stacks, min_box.
"""

from __future__ import annotations

import numpy as np

from . import DOUBLE, OBJECTIVE_ORDER, colour, label, no_data, stack_list, style
from .spectral_signatures import signatures

METRICS = {
    "sv2_skew": ("skew of sigma^2", "mean(z^3)", None),
    "sv2_kurtosis": ("excess kurtosis of sigma^2", "mean(z^4) - 3", None),
    "leading_share": ("leading singular value", "sigma_1^2 share", (0.0, 1.05)),
}
GRID = np.linspace(0.0, 1.0, 41)  # i / d_head at which each head's cumulative share is read


def cumulative_shares(spectra) -> np.ndarray:
    """[heads, GRID] the share of sum sigma^2 in the top i / d_head of each head's values (a
    descending list), linear between ranks; heads without a spectrum or with sum 0 left out."""
    rows = []
    for s in spectra:
        if s is None:
            continue
        s = np.asarray(s, dtype=float)
        total = s.sum()
        if s.size == 0 or not np.isfinite(total) or total <= 0:
            continue
        rows.append(np.interp(GRID, np.arange(s.size + 1) / s.size, np.concatenate([[0.0], np.cumsum(s) / total])))
    return np.array(rows).reshape(-1, GRID.size)


def spectra_panel(ax, heads, stacks) -> bool:
    """The cumulative spectra by objective (synthetic models dashed); whether any was drawn."""
    ax.set_title("spectrum of sigma^2 (sv2)")
    ax.set_xlabel("top i / d_head of the squared singular values")
    ax.set_ylabel("share of sum sigma^2")
    ax.plot([0, 1], [0, 1], color="0.6", lw=0.6, ls=":", zorder=0)
    if heads is None or "sv2" not in heads:
        return False
    df = heads[heads["stack"].isin(stacks)]
    drawn = False
    order = {o: i for i, o in enumerate(OBJECTIVE_ORDER)}
    for (objective, synthetic), group in sorted(
        df.groupby(["objective", "synthetic"], sort=False), key=lambda kv: (kv[0][1], order.get(kv[0][0], 9))
    ):
        shares = cumulative_shares(group["sv2"])
        if not len(shares):
            continue
        q25, median, q75 = np.quantile(shares, [0.25, 0.5, 0.75], axis=0)
        c = colour(objective)
        ax.fill_between(GRID, q25, q75, color=c, alpha=0.18 if not synthetic else 0.08, lw=0)
        ax.plot(GRID, median, color=c, lw=1.1, ls="--" if synthetic else "-", label=label(objective, bool(synthetic)))
        drawn = True
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    if not drawn:
        no_data(ax, "no sv2 lists")
    return drawn


def draw(
    data: dict, stacks: str = "encoder,decoder,cross", min_box: int = 3, width: float = DOUBLE, height: float = 4.4
):
    fig = signatures(data, METRICS, stacks, min_box, width, height, "no qk_spectra metrics in this run")
    ax = fig.axes[len(METRICS)]  # the cell after the three panels (signatures leaves it empty)
    ax.axis("on")
    with style():
        if spectra_panel(ax, data.get("heads"), stack_list(stacks)):  # its key in the empty cell beside it
            fig.axes[len(METRICS) + 1].legend(
                *ax.get_legend_handles_labels(), loc="center", title="spectrum: median over heads,\nquartiles shaded"
            )
    return fig
