"""Every model x stack: median [IQR] over layers (the paper's statistic) and over heads,
with the null reference's medians where computed.

data["models"]: models.parquet.
"""

from __future__ import annotations

import pandas as pd

from . import cell
from ._common import model_columns, order, score_columns

CAPTION = "All models and stacks: median [interquartile range] over layers and over heads; null = random Q, K of the same shapes."


def build(data: dict) -> pd.DataFrame:
    df = data["models"]
    df = order(df, by_modality=True)
    layers, heads = score_columns(df), score_columns(df, prefix="head_")
    names = model_columns(df)
    out = pd.DataFrame(
        {
            "model": names.pop("model"),
            "family": df["family"],
            "modality": df["modality"],
            **names,
            "symmetry (layers)": layers["symmetry"],
            "directionality (layers)": layers["directionality"],
            "symmetry (heads)": heads["symmetry"],
            "directionality (heads)": heads["directionality"],
        }
    )
    for m in ("symmetry", "directionality"):
        col = f"null_{m}_median"
        if col in df:
            out[f"{m} (null)"] = df[col].map(lambda v: cell(v) if pd.notna(v) else "").to_numpy()
    return out
