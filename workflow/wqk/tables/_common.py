"""Helpers shared by the score tables."""

from __future__ import annotations

import pandas as pd

from . import params_text, quartile_text

STACK_ORDER = {"encoder": 0, "decoder": 1, "cross": 2}
OBJECTIVE_ORDER = {"bidirectional": 0, "autoregressive": 1}


def model_name(row) -> str:
    return f"{row['model']} (synthetic)" if bool(row.get("synthetic", False)) else str(row["model"])


def score_columns(df: pd.DataFrame, prefix: str = "", digits: int = 2) -> dict[str, pd.Series]:
    return {
        m: df.apply(
            lambda r: quartile_text(r[f"{prefix}{m}_median"], r[f"{prefix}{m}_q25"], r[f"{prefix}{m}_q75"], digits),
            axis=1,
        )
        for m in ("symmetry", "directionality")
    }


MODALITY_ORDER = {"text": 0, "vision": 1, "audio": 2}


def order(df: pd.DataFrame, by_modality: bool = False) -> pd.DataFrame:
    """(Modality,) objective, then size, then name: the reading order of the paper's tables."""
    key = pd.DataFrame(
        {
            "mod": df["modality"].map(lambda m: MODALITY_ORDER.get(m, 9)) if by_modality else 0,
            "o": df["objective"].map(lambda o: OBJECTIVE_ORDER.get(o, 9)),
            "syn": df["synthetic"].astype(bool),
            "p": df["n_params"].astype(float).fillna(float("inf")),
            "m": df["model"],
            "s": df["stack"].map(lambda s: STACK_ORDER.get(s, 9)),
        },
        index=df.index,
    )
    return df.loc[key.sort_values(list(key.columns), kind="stable").index].reset_index(drop=True)


__all__ = ["model_name", "score_columns", "order", "params_text"]
