"""Scores along public training histories: each revision of each swept model (wqk.sweeps),
median [IQR] over layers and over heads, in step order.

data["sweeps"]: results/aggregate_sweeps/models.parquet.
"""

from __future__ import annotations

import pandas as pd

from ..contracts import stack_rank
from ..sweeps import training_fraction
from ._common import score_columns

CAPTION = (
    "Revisions of models published along their training: median [interquartile range] of the scores "
    "over layers and over heads, at each training step."
)


def build(data: dict) -> pd.DataFrame:
    df = data["sweeps"]
    key = pd.DataFrame({"sweep": df["sweep"], "stack": df["stack"].map(stack_rank), "step": df["step"]})
    df = df.loc[key.sort_values(list(key.columns), kind="stable").index].reset_index(drop=True)
    layers, heads = score_columns(df), score_columns(df, prefix="head_")
    return pd.DataFrame(
        {
            "model": df["sweep"],
            "stack": df["stack"],
            "objective": df["objective"],
            "step": df["step"].astype("int64"),
            "fraction of training": training_fraction(df).map(lambda v: f"{v:.3g}"),
            "revision": df["model"].str.rsplit("@", n=1).str[-1],
            "symmetry (layers)": layers["symmetry"],
            "directionality (layers)": layers["directionality"],
            "symmetry (heads)": heads["symmetry"],
            "directionality (heads)": heads["directionality"],
        }
    )
