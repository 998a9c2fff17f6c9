"""Our medians against the paper's, for every computed model it reports.

data["comparison"]: results/validation/paper_comparison.csv (wqk validate).
"""

from __future__ import annotations

import pandas as pd

CAPTION = "Comparison with the published medians (paper: arXiv 2502.10927); flagged when |ours - paper| > 0.02."


def build(data: dict) -> pd.DataFrame:
    df = data["comparison"]
    flag = df["flag"].astype(str).str.lower().isin(("true", "1"))
    return pd.DataFrame(
        {
            "model": df["model"].astype(str) + " [" + df["stack"].astype(str) + "]",
            "paper file": df["group"].astype(str) + "/" + df["file"].astype(str),
            "metric": df["metric"],
            "paper": df["paper"].astype(float).round(4),
            "ours": df["ours"].astype(float).round(4),
            "difference": df["difference"].astype(float).round(4),
            "flag": flag.map({True: "!", False: ""}),
            "expected cause": df["expected_cause"].fillna(""),
        }
    )
