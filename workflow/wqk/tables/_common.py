"""Helpers shared by the score tables."""

from __future__ import annotations

import pandas as pd

from ..contracts import METRICS, MODALITIES, OBJECTIVES, quantised, stack_rank
from . import params_text, quartile_text

OBJECTIVE_ORDER = {o: i for i, o in enumerate(OBJECTIVES)}


def model_name(row) -> str:
    """The model as a table names it: marked synthetic, or quantised with what its q/k were
    stored as (the models table's `storage`, a GGUF's: "quantised: Q5_0")."""
    if bool(row.get("synthetic", False)):
        return f"{row['model']} (synthetic)"
    return f"{row['model']} ({quantised(row.get('storage'))})" if quantised(row.get("storage")) else str(row["model"])


def score_columns(df: pd.DataFrame, prefix: str = "", digits: int = 2) -> dict[str, pd.Series]:
    def text(m: str) -> pd.Series:
        return df.apply(
            lambda r: quartile_text(*(r[f"{prefix}{m}_{s}"] for s in ("median", "q25", "q75")), digits), axis=1
        )

    return {m: text(m) for m in METRICS}


MODALITY_ORDER = {m: i for i, m in enumerate(MODALITIES)}


def order(df: pd.DataFrame, by_modality: bool = False) -> pd.DataFrame:
    """(Modality,) objective, then size, then name: the reading order of the paper's tables."""
    key = pd.DataFrame(
        {
            "mod": df["modality"].map(lambda m: MODALITY_ORDER.get(m, 9)) if by_modality else 0,
            "o": df["objective"].map(lambda o: OBJECTIVE_ORDER.get(o, 9)),
            "syn": df["synthetic"].astype(bool),
            "p": df["n_params"].astype(float).fillna(float("inf")),
            "m": df["model"],
            "s": df["stack"].map(stack_rank),
        },
        index=df.index,
    )
    return df.loc[key.sort_values(list(key.columns), kind="stable").index].reset_index(drop=True)


__all__ = ["model_name", "score_columns", "order", "params_text"]


def model_columns(df: pd.DataFrame) -> dict[str, pd.Series]:
    """The columns that name a model x stack row in every score table."""
    return {
        "model": df.apply(model_name, axis=1),
        "stack": df["stack"],
        "objective": df["objective"],
        "parameters": df["n_params"].map(params_text),
        "layers": df["n_layers"].astype("int64"),
    }
