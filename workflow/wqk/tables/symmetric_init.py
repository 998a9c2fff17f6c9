"""Symmetric initialisation: final loss with and without it, and the fraction of steps saved.

data["losses"]: results/training/losses.csv (run, size, objective, init, dataset, step, loss),
or the paper's wide file (symmetric_init_loss.csv: one column per run named
size--objective--dataset[--symmetric-init], one row per logged step, every 200 steps).

Fraction of steps saved (the paper's definition): 1 - n / N, where n counts the symmetric
run's logged steps up to and including the first whose loss is at or below the baseline's
final loss, and N is the number of logged steps (with logging every k steps from k:
1 - first step / last step). NaN, with a note, when the symmetric run never gets there.
Param objective (default bidirectional; "all" keeps every objective).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CAPTION = (
    "Symmetric initialisation (W_q = W_k at step 0): final training loss with and without it, "
    "and the fraction of steps saved to reach the baseline's final loss."
)
KEYS = ["size", "objective", "dataset"]
PAPER_LOG_EVERY = 200


def from_paper(wide: pd.DataFrame, log_every: int = PAPER_LOG_EVERY) -> pd.DataFrame:
    """The paper's wide loss file -> the long losses table."""
    rows = []
    steps = (np.arange(len(wide)) + 1) * log_every
    for col in wide.columns:
        parts = col.split("--")
        init = "symmetric" if parts[-1] == "symmetric-init" else "default"
        size, kind, dataset = parts[:3]
        objective = {"encoder": "bidirectional", "decoder": "autoregressive"}.get(kind, kind)
        rows.append(pd.DataFrame({"run": col, "size": size, "objective": objective, "init": init,
                                  "dataset": dataset, "step": steps, "loss": wide[col].to_numpy(float)}))  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def load(key: str, path, **_) -> pd.DataFrame:
    df = pd.read_csv(path)
    return from_paper(df) if "step" not in df.columns and any("--" in c for c in df.columns) else df


def steps_saved(baseline: pd.DataFrame, symmetric: pd.DataFrame) -> tuple[float, float, float, str]:
    """(baseline final loss, first step reaching it, fraction saved, note) for one pair of runs."""
    base = baseline.dropna(subset=["loss"]).sort_values("step")
    sym = symmetric.dropna(subset=["loss"]).sort_values("step")
    target = float(base["loss"].iloc[-1])
    hit = np.flatnonzero(sym["loss"].to_numpy(float) <= target)
    if not hit.size:
        return (
            target,
            np.nan,
            np.nan,
            "symmetric run never reaches the baseline's final loss",
        )
    n_first = int(hit[0]) + 1
    return target, float(sym["step"].iloc[hit[0]]), 1.0 - n_first / len(sym), ""


def build(data: dict, objective: str = "bidirectional") -> pd.DataFrame:
    df = data["losses"]
    if "step" not in df.columns:
        df = from_paper(df)
    if objective != "all":
        df = df[df["objective"] == objective]
    rows = []
    for key, g in df.groupby(KEYS, sort=True):
        base, sym = g[g["init"] == "default"], g[g["init"] == "symmetric"]
        if base.empty or sym.empty:
            continue
        target, step, fraction, note = steps_saved(base, sym)
        final_sym = float(sym.dropna(subset=["loss"]).sort_values("step")["loss"].iloc[-1])
        rows.append({**dict(zip(KEYS, key)), "final_loss_default": target, "final_loss_symmetric": final_sym,
                     "steps": int(sym["step"].max()), "step_reaching_default": step,
                     "fraction_steps_saved": fraction, "note": note})  # fmt: skip
    cols = [*KEYS, "final_loss_default", "final_loss_symmetric", "steps", "step_reaching_default",
            "fraction_steps_saved", "note"]  # fmt: skip
    out = pd.DataFrame(rows, columns=cols)
    out["step_reaching_default"] = out["step_reaching_default"].astype("Int64")
    return out
