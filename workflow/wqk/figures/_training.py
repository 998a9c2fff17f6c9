"""Shared selection for the training figures (runs of one dataset, size and initialisation)."""

from __future__ import annotations

import pandas as pd

from ..errors import WqkError
from ..report_data import first_seed

NAMES = {
    "bidirectional": "encoder (bidirectional)",
    "autoregressive": "decoder (autoregressive)",
}


def select(df: pd.DataFrame, dataset=None, init="default", size=None) -> pd.DataFrame:
    """Rows of one dataset (required when several), one init ("all" keeps both), one size or all;
    of runs repeated over seeds (training.comparison_seeds), the smallest seed's."""
    if dataset is None:
        found = sorted(df["dataset"].astype(str).unique())
        if len(found) > 1:
            raise WqkError(f"several datasets ({', '.join(found)}): pick one with --param dataset=NAME")
    else:
        df = df[df["dataset"].astype(str) == str(dataset)]
    if init not in (None, "all"):
        df = df[df["init"] == init]
    if size is not None:
        df = df[df["size"].astype(str) == str(size)]
    return first_seed(df)


def title(df: pd.DataFrame, dataset=None) -> str:
    names = sorted(df["dataset"].astype(str).unique()) if dataset is None else [str(dataset)]
    return ", ".join(names) or "no runs"
