"""Our medians and quartiles against the paper's, for every computed model it reports.

data["comparison"]: results/validation/paper_comparison.csv (wqk validate); its model rows.
"""

from __future__ import annotations

import pandas as pd

from ..validate import TOLERANCE

CAPTION = (
    "Comparison with the published medians and quartiles (paper: arXiv 2502.10927); flagged (!) when "
    f"|ours - paper| > {TOLERANCE:g} (the published precision); 'explained' only where the authors' method "
    "on the same weights reproduces the published value."
)


def build(data: dict) -> pd.DataFrame:
    df = data["comparison"]
    if "level" in df.columns:
        df = df[df["level"] == "model"]
    flag = df["flag"].astype(str).str.lower().isin(("true", "1"))
    explained = df.get("explained_by", pd.Series("", index=df.index)).astype("string").fillna("")
    return pd.DataFrame(
        {
            "model": df["model"].astype(str) + " [" + df["stack"].astype(str) + "]",
            "paper file": df["group"].astype(str) + "/" + df["file"].astype(str),
            "metric": df["metric"] + " " + df.get("statistic", pd.Series("median", index=df.index)),
            "paper": df["paper"].astype(float).round(4),
            "ours": df["ours"].astype(float).round(4),
            "difference": df["difference"].astype(float).round(4),
            "flag": flag.map({True: "!", False: ""}),
            "expected cause": df["expected_cause"].fillna(""),
            "explained": explained,
        }
    )
