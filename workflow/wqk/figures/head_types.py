"""The head types of attention-bilinear-forms by objective and modality (beyond the paper:
wqk.bilinear_forms): per group of heads of the real models (objective x modality; synthetic
models left out: random weights have no type to speak of), the
shares of type I+ (the symmetric part's positive lobe the larger: (c - d)/(c + d) > 0.2),
type II (paired lobes) and type I- (< -0.2), among heads with c + d > 0.01 for either type I,
as a stacked bar with its head and model counts. Right: the profile (b, c, d) and a (the
antisymmetric energy) as the groups' median shares. data["heads"]: results/aggregate/heads.parquet.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ..contracts import CROSS
from . import DOUBLE, OBJECTIVE_ORDER, new_figure, no_data, style
from .spectral_signatures import SHORT

TYPES = ((1.0, "type I+", "#b2182b"), (0.0, "type II", "#bababa"), (-1.0, "type I-", "#2166ac"))
PROFILE = (("profile_a", "a: antisymmetric", "#1b9e77"), ("profile_b", "b: paired lobes", "#bababa"),
           ("profile_c", "c: positive lobe excess", "#b2182b"), ("profile_d", "d: negative lobe excess", "#2166ac"))  # fmt: skip
GROUPS = (*OBJECTIVE_ORDER, CROSS)


def groups_of(heads: pd.DataFrame) -> list[tuple]:
    """(objective, modality) of the heads with a type, objectives in their order."""
    rank = {g: i for i, g in enumerate(GROUPS)}
    keys = heads[["objective", "modality"]].drop_duplicates().itertuples(index=False)
    return sorted((tuple(k) for k in keys), key=lambda k: (rank.get(k[0], 9), k[0], k[1]))


def draw(data: dict, width: float = DOUBLE, height: float = 3.0):
    heads = data["heads"]
    heads = heads[heads["head_type"].notna()] if "head_type" in heads else heads.iloc[:0]
    heads = heads[~heads["synthetic"].astype(bool)]
    keys = groups_of(heads)
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        left, right = axes[0]
        left.set_title("head types (attention-bilinear-forms)")
        right.set_title("lobe profile: median shares of ||L||^2")
        if not keys:
            for ax in (left, right):
                no_data(ax, "no bilinear_forms metrics in this run")
                ax.set_xticks([])
            return fig
        labels = []
        for x, (objective, modality) in enumerate(keys):
            g = heads[(heads["objective"] == objective) & (heads["modality"] == modality)]
            bottom = 0.0
            for value, _, c in TYPES:
                share = float((g["head_type"] == value).mean())
                left.bar(x, share, bottom=bottom, color=c, width=0.7, edgecolor="white", linewidth=0.4)
                bottom += share
            bottom = 0.0
            for column, _, c in PROFILE:
                share = float(np.nanmedian(g[column].to_numpy(float)))
                right.bar(x, share, bottom=bottom, color=c, width=0.7, edgecolor="white", linewidth=0.4)
                bottom += share
            labels.append(f"{SHORT.get(objective, objective)}\n{modality}\n{len(g)} h, {g['model'].nunique()} m")
        for ax in (left, right):
            ax.set_xticks(range(len(keys)), labels, fontsize=6)
            ax.set_xlim(-0.6, len(keys) - 0.4)
            ax.set_ylim(0, 1.02)
            ax.set_ylabel("share")
        handles = [Patch(color=c, label=t) for _, t, c in (*TYPES, *PROFILE)]
        fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=7)
    return fig
