"""Errata: the paper's numbers that differ from ours by more than the tolerance, and why.

data["comparison"]: results/validation/paper_comparison.csv (wqk validate).
"""

from __future__ import annotations

import pandas as pd

from ..validate import errata

CAPTION = "Errata: published medians that differ from ours by more than 0.02, with the expected cause."


def build(data: dict) -> pd.DataFrame:
    df = data["comparison"].copy()
    df["flag"] = df["flag"].astype(str).str.lower().isin(("true", "1"))
    out = errata(df)
    for c in ("paper", "ours", "difference"):
        out[c] = out[c].round(4)
    return out
