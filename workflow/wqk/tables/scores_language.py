"""Symmetry and directionality per language model (the paper's two tables, merged).

data["models"]: models.parquet. Self-attention stacks of models of one modality (param
modality, default text), optionally only those whose catalogue `figure` lists the key
`figure`. Median [q25, q75] over layers.
"""

from __future__ import annotations

import pandas as pd

from ..report_data import select_models
from ._common import model_columns, order, score_columns

CAPTION = "Symmetry and directionality scores per language model: median [interquartile range] over layers."


def build(data: dict, modality: str = "text", figure: str | None = None) -> pd.DataFrame:
    df = order(select_models(data["models"], modality, figure))
    scores = score_columns(df)
    return pd.DataFrame({**model_columns(df), **scores})
