"""Do the paper's two findings survive other forms of the attention bilinear form?

data["models"]: results/aggregate/models.parquet. Three variants of the form scored:
`paper` (M = W_q W_k^T: symmetry, directionality), `gain-folded` (diag(g) M diag(g), the
pre-attention norm's gain folded in: symmetry_gain, directionality_gain) and
`bias-augmented` (the form on [x; 1] with the q and k biases: symmetry_bias,
directionality_bias). For each, over the real (not synthetic) self-attention stacks that
have the variant (a finite per-model median): the median over models of the per-model
median symmetry and directionality, for bidirectional and for autoregressive stacks, and
the number of models of each. Per-model medians are over layers (the paper's statistic,
columns <metric>_median), or over heads with level=heads (head_<metric>_median).

Two findings, each a boolean and a clause of `verdict`: "bidirectional more symmetric than
autoregressive" (median bidirectional symmetry > median autoregressive symmetry) and
"autoregressive column-dominant" (median autoregressive directionality < 0). A side with no
model: the booleans are empty and the verdict is "not enough models"; a variant this run
did not score at all: "not computed in this run". Params: level (layers|heads, default
layers), synthetic (include synthetic models, default false).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..contracts import OBJECTIVES, SELF_STACKS
from ..errors import WqkError

CAPTION = (
    "Robustness of the paper's findings to the form scored: M = W_q W_k^T (paper), with the "
    "pre-attention norm's gain folded in, and augmented with the q/k biases; median over models of "
    "the per-model median symmetry and directionality, by objective (self-attention stacks, real models)."
)
VARIANTS = {
    "paper": ("symmetry", "directionality"),
    "gain-folded": ("symmetry_gain", "directionality_gain"),
    "bias-augmented": ("symmetry_bias", "directionality_bias"),
}
BI, AR = OBJECTIVES
MORE_SYMMETRIC = "bidirectional more symmetric than autoregressive"
COLUMN_DOMINANT = "autoregressive column-dominant"
NOT_ENOUGH = "not enough models"
NOT_COMPUTED = "not computed in this run"
COLUMNS = [
    "variant", "symmetry_column", "directionality_column", "level",
    "n_bidirectional", "n_autoregressive",
    "symmetry_bidirectional", "symmetry_autoregressive",
    "directionality_bidirectional", "directionality_autoregressive",
    "bidirectional_more_symmetric", "autoregressive_column_dominant", "verdict",
]  # fmt: skip


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else float("nan")


def variant_row(models: pd.DataFrame, variant: str, sym: str, dire: str, prefix: str, level: str) -> dict:
    row = dict(variant=variant, symmetry_column=sym, directionality_column=dire, level=level)
    cols = [f"{prefix}{sym}_median", f"{prefix}{dire}_median"]
    if not all(c in models for c in cols):
        stats = dict.fromkeys(COLUMNS[6:10], float("nan"))
        return row | dict(n_bidirectional=0, n_autoregressive=0) | stats | dict(
            bidirectional_more_symmetric=pd.NA, autoregressive_column_dominant=pd.NA, verdict=NOT_COMPUTED
        )  # fmt: skip
    has = np.isfinite(models[cols].to_numpy(float)).all(axis=1)
    df = models[has]
    for objective in (BI, AR):
        g = df[df["objective"] == objective]
        row[f"n_{objective}"] = len(g)
        row[f"symmetry_{objective}"] = _median(g[cols[0]].to_numpy(float))
        row[f"directionality_{objective}"] = _median(g[cols[1]].to_numpy(float))
    if row["n_bidirectional"] and row["n_autoregressive"]:
        more = bool(row["symmetry_bidirectional"] > row["symmetry_autoregressive"])
        dominant = bool(row["directionality_autoregressive"] < 0)
        verdict = "; ".join(
            [
                MORE_SYMMETRIC if more else f"not {MORE_SYMMETRIC}",
                COLUMN_DOMINANT if dominant else f"not {COLUMN_DOMINANT}",
            ]
        )
        return row | dict(bidirectional_more_symmetric=more, autoregressive_column_dominant=dominant, verdict=verdict)
    return row | dict(bidirectional_more_symmetric=pd.NA, autoregressive_column_dominant=pd.NA, verdict=NOT_ENOUGH)


def build(data: dict, level: str = "layers", synthetic: bool = False) -> pd.DataFrame:
    if level not in ("layers", "heads"):
        raise WqkError(f"--param level={level}: give layers (the paper's statistic) or heads")
    models = data["models"]
    models = models[models["stack"].isin(SELF_STACKS) & models["objective"].isin(OBJECTIVES)]
    if not synthetic:
        models = models[~models["synthetic"].astype(bool)]
    prefix = "head_" if level == "heads" else ""
    rows = [variant_row(models, v, sym, dire, prefix, level) for v, (sym, dire) in VARIANTS.items()]
    out = pd.DataFrame(rows, columns=COLUMNS)
    out = out.astype({"n_bidirectional": "int64", "n_autoregressive": "int64"})
    return out.astype({"bidirectional_more_symmetric": "boolean", "autoregressive_column_dominant": "boolean"})
