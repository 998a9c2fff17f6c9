"""Per-head score distributions by objective x modality (beyond the paper).

data["heads"]: results/aggregate/heads.parquet. For each modality, one box (quartiles,
whiskers at 1.5 IQR, no fliers) per objective over all heads of all models, with the heads
drawn as a jittered strip (at most `max_points` per box, a fixed random subset). Synthetic
models get their own hollow boxes labelled "(synthetic)". Params: stacks (comma-separated,
default "encoder,decoder": self-attention only).
"""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from ..contracts import MODALITIES
from . import DOUBLE, OBJECTIVE_ORDER, colour, label, new_figure, no_data, score_axis, stack_list, style

METRICS = ("symmetry", "directionality")


def groups(heads, stacks):
    df = heads[heads["stack"].isin(stacks)]
    order = {o: i for i, o in enumerate(OBJECTIVE_ORDER)}
    keys = sorted(
        {(m, o, bool(s)) for m, o, s in zip(df["modality"], df["objective"], df["synthetic"])},
        key=lambda k: (MODALITIES.index(k[0]) if k[0] in MODALITIES else 9, k[2], order.get(k[1], 9), k[1]),
    )
    return df, keys


def draw(data: dict, stacks: str = "encoder,decoder", max_points: int = 300, width=DOUBLE, height=2.6):
    df, keys = groups(data["heads"], stack_list(stacks))
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        for ax, metric in zip(axes[0], METRICS):
            score_axis(ax, metric)
            ax.set_title(f"{metric} of single heads")
            ax.set_xlabel("modality")
            if not keys:
                no_data(ax, "no heads")
                ax.set_xticks([])
                continue
            rng = np.random.default_rng(0)
            for x, (modality, objective, synthetic) in enumerate(keys):
                sel = (df["modality"] == modality) & (df["objective"] == objective) & (df["synthetic"] == synthetic)
                v = df.loc[sel, metric].to_numpy(float)
                v = v[np.isfinite(v)]
                if v.size == 0:
                    continue
                c = colour(objective)
                ax.boxplot(
                    [v], positions=[x], widths=0.6, showfliers=False, patch_artist=True,
                    boxprops={"facecolor": "none", "edgecolor": c, "linewidth": 0.8,
                              "linestyle": "--" if synthetic else "-"},
                    medianprops={"color": c, "linewidth": 1.2}, whiskerprops={"color": c, "linewidth": 0.6},
                    capprops={"color": c, "linewidth": 0.6},
                )  # fmt: skip
                pts = rng.choice(v, size=min(max_points, v.size), replace=False)
                jitter = rng.uniform(-0.22, 0.22, size=pts.size)
                ax.scatter(
                    x + jitter, pts, s=2, lw=0.4, alpha=0.35, zorder=0,
                    facecolors="none" if synthetic else c, edgecolors=c,
                )  # fmt: skip
            ax.set_xticks(range(len(keys)), [f"{m} (synthetic)" if s else m for m, _, s in keys],
                          rotation=30, ha="right", rotation_mode="anchor")  # fmt: skip
            ax.set_xlim(-0.6, len(keys) - 0.4)
        present = sorted(
            {(o, s) for _, o, s in keys},
            key=lambda k: (k[1], OBJECTIVE_ORDER.index(k[0]) if k[0] in OBJECTIVE_ORDER else 9),
        )
        handles = [
            Patch(facecolor="none" if s else colour(o), edgecolor=colour(o), ls="--" if s else "-", label=label(o, s))
            for o, s in present
        ]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
    return fig
