"""Scores against relative depth, layer / (n_layers - 1) (beyond the paper).

data["layers"]: results/aggregate/layers.parquet. Layers are binned by relative depth
(`bins` equal bins over [0, 1]); per objective, the median over all layers of all models in
a bin as a line with the interquartile range as a band. Synthetic models: dashed line,
no band, labelled "(synthetic)"; quantised models (a `storage`: GGUF) counted in the label. Params: modality (default: all), stacks (default
"encoder,decoder"), bins (default 10).
"""

from __future__ import annotations

import numpy as np

from . import DOUBLE, OBJECTIVE_ORDER, colour, label, new_figure, no_data, score_axis, stack_list, style

METRICS = ("symmetry", "directionality")


def binned(df, metric, bins):
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(df["relative_depth"].to_numpy(float), edges[1:-1]), 0, bins - 1)
    centres, med, q25, q75 = [], [], [], []
    values = df[metric].to_numpy(float)
    for b in range(bins):
        v = values[(idx == b) & np.isfinite(values)]
        if v.size:
            lo, m, hi = np.percentile(v, [25, 50, 75])
            centres.append((edges[b] + edges[b + 1]) / 2)
            med.append(m), q25.append(lo), q75.append(hi)
    return np.array(centres), np.array(med), np.array(q25), np.array(q75)


def draw(
    data: dict, modality: str | None = None, stacks: str = "encoder,decoder", bins: int = 10, width=DOUBLE, height=2.4
):
    df = data["layers"]
    df = df[df["stack"].isin(stack_list(stacks))]
    if modality:
        df = df[df["modality"] == modality]
    order = {o: i for i, o in enumerate(OBJECTIVE_ORDER)}
    keys = sorted(
        {(o, bool(s)) for o, s in zip(df["objective"], df["synthetic"])}, key=lambda k: (k[1], order.get(k[0], 9), k[0])
    )
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        for ax, metric in zip(axes[0], METRICS):
            score_axis(ax, metric)
            ax.set_xlim(0, 1)
            ax.set_xlabel("relative depth (layer / (layers - 1))")
            ax.set_title(f"{metric} by depth" + (f" ({modality} models)" if modality else ""))
            if not keys:
                no_data(ax, "no layers")
            for objective, synthetic in keys:
                g = df[(df["objective"] == objective) & (df["synthetic"] == synthetic)]
                x, med, q25, q75 = binned(g, metric, int(bins))
                n = g["model"].nunique()
                stored = g.loc[g["storage"].notna(), "model"].nunique() if "storage" in g else 0
                count = f"n={n}" + (f", {stored} quantised" if stored else "")
                c = colour(objective)
                ax.plot(x, med, color=c, ls="--" if synthetic else "-", marker="o", ms=2,
                        mfc="none" if synthetic else c, label=f"{label(objective, synthetic)} ({count})")  # fmt: skip
                if not synthetic:
                    ax.fill_between(x, q25, q75, color=c, alpha=0.18, lw=0)
        handles, labels = axes[0][0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside lower center", ncols=min(len(handles), 4))
    return fig
