"""The end of every training run, over its seeds: the final median symmetry and directionality
(over layers) of each size, dataset, objective and initialisation, as mean, standard deviation
(Bessel), min and max over the seeds it was trained with (config training.seeds and
comparison_seeds), and the final loss. Below each encoder/decoder pair of one size and dataset
(default initialisation), a row `encoder - decoder` holds what the paper's claim is about: the
encoder's symmetry minus the decoder's (mean: of the means; min: the smallest encoder seed's
minus the largest decoder seed's) and likewise the directionality.

data["summary"]: results/training/summary.csv.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..report_data import OBJECTIVES

CAPTION = (
    "Final median scores of the training runs (over layers), mean, sd, min and max over seeds, and the "
    "encoder's minus the decoder's."
)
KEYS = ["size", "dataset", "objective", "init"]
SCORES = ("symmetry", "directionality")
STATS = ("mean", "sd", "min", "max")
GAP = "encoder - decoder"


def _stats(values: np.ndarray) -> dict:
    return {
        "mean": float(values.mean()),
        "sd": float(values.std(ddof=1)) if len(values) > 1 else np.nan,
        "min": float(values.min()),
        "max": float(values.max()),
    }


def finals(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per KEYS: seeds, final step, the scores' and the loss's statistics over seeds."""
    last = summary[summary["step"] == summary.groupby("run")["step"].transform("max")]
    rows = []
    for key, g in last.groupby(KEYS, sort=True):
        row = {**dict(zip(KEYS, key)), "seeds": int(g["seed"].nunique()), "step": int(g["step"].max())}
        for score in SCORES:
            row |= {f"{score}_{s}": v for s, v in _stats(g[f"{score}_median"].to_numpy(float)).items()}
        row |= {f"loss_{s}": v for s, v in _stats(g["loss"].to_numpy(float)).items() if s in ("mean", "sd")}
        rows.append(row)
    return pd.DataFrame(rows)


def _gap(encoder: pd.Series, decoder: pd.Series) -> dict:
    row = {"objective": GAP, "init": "default", "seeds": min(encoder["seeds"], decoder["seeds"])}
    for score in SCORES:
        row[f"{score}_mean"] = encoder[f"{score}_mean"] - decoder[f"{score}_mean"]
        row[f"{score}_min"] = encoder[f"{score}_min"] - decoder[f"{score}_max"]
        row[f"{score}_max"] = encoder[f"{score}_max"] - decoder[f"{score}_min"]
    return row


def build(data: dict) -> pd.DataFrame:
    table = finals(data["summary"])
    out = []
    for (size, dataset), g in table.groupby(["size", "dataset"], sort=True):
        out += g.to_dict("records")
        default = g[g["init"] == "default"].set_index("objective")
        if {OBJECTIVES["encoder"], OBJECTIVES["decoder"]} <= set(default.index):
            gap = _gap(default.loc[OBJECTIVES["encoder"]], default.loc[OBJECTIVES["decoder"]])
            out.append({"size": size, "dataset": dataset, "step": int(g["step"].max()), **gap})
    columns = [*KEYS, "seeds", "step", *(f"{s}_{t}" for s in SCORES for t in STATS), "loss_mean", "loss_sd"]
    df = pd.DataFrame(out, columns=columns)
    return df.astype({"seeds": "Int64", "step": "Int64"})
