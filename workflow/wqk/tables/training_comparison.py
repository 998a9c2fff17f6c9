"""Our training runs against the paper's (training_curves.csv), qualitatively: the final median
symmetry and directionality of the encoder and the decoder, whether each has the paper's
sign, and whether encoder and decoder are ordered as in the paper.

data["summary"]: results/training/summary.csv (default-init runs are compared).
data["published"]: the paper's training_curves.csv (file bert[-small]-{encoder,decoder}-
{dataset}.pkl, checkpoint_step, {symmetry,directionality}_{median,q25,q75}).
The paper's "bert" runs are our size `base`, its "bert-small" runs our `mini` (the names of
config/config.yaml); runs of other sizes have no published counterpart. Our runs may be far shorter than the paper's
200,000 steps (`ours_step` says how long): a same sign and order at the end is the claim
checked, not the values. A sign within 0.01 of zero counts as zero.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..report_data import OBJECTIVES, first_seed, load_csv, paper_runs

CAPTION = (
    "Training runs against the paper's (training_curves.csv): final median scores of encoder and "
    "decoder, whether the signs and the encoder/decoder order agree."
)
METRICS = ("symmetry", "directionality")
ZERO = 0.01

load = load_csv  # `wqk table` reads the inputs through it


def published_finals(published: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for size, dataset, objective, curve in paper_runs(published):
        last = curve.iloc[-1]
        rows.append({"size": size, "dataset": dataset, "objective": objective, "step": int(last["checkpoint_step"]),
                     **{k: float(last[f"{k}_median"]) for k in METRICS}})  # fmt: skip
    return pd.DataFrame(rows, columns=["size", "dataset", "objective", "step", *METRICS])


def our_finals(summary: pd.DataFrame) -> pd.DataFrame:
    df = first_seed(summary[summary["init"] == "default"])
    last = df[df["step"] == df.groupby("run")["step"].transform("max")]
    return last.rename(columns={f"{k}_median": k for k in METRICS})[["size", "dataset", "objective", "step", *METRICS]]


def _sign(x: float) -> int:
    return 0 if not np.isfinite(x) or abs(x) < ZERO else int(np.sign(x))


def build(data: dict) -> pd.DataFrame:
    paper = published_finals(data["published"]).set_index(["size", "dataset", "objective"])
    ours = our_finals(data["summary"]).astype({"size": str, "dataset": str}).set_index(["size", "dataset", "objective"])
    rows = []
    for size, dataset in sorted({k[:2] for k in ours.index} & {k[:2] for k in paper.index}):
        for metric in METRICS:
            row = {"size": size, "dataset": dataset, "metric": metric}
            values = {}
            for who, table in (("paper", paper), ("ours", ours)):
                for kind, objective in OBJECTIVES.items():
                    key = (size, dataset, objective)
                    values[who, kind] = float(table.loc[key, metric]) if key in table.index else np.nan
                    row[f"{who}_{kind}"] = values[who, kind]
            row["ours_step"] = int(ours.loc[[k for k in ours.index if k[:2] == (size, dataset)], "step"].max())
            row["signs_agree"] = all(_sign(values["paper", k]) == _sign(values["ours", k]) for k in OBJECTIVES)
            order = {who: _sign(values[who, "encoder"] - values[who, "decoder"]) for who in ("paper", "ours")}
            row["order_agrees"] = order["paper"] == order["ours"]
            rows.append(row)
    cols = ["size", "dataset", "metric", "paper_encoder", "paper_decoder", "ours_encoder", "ours_decoder", "ours_step",
            "signs_agree", "order_agrees"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)
