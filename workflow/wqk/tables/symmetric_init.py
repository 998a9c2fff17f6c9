"""Symmetric initialisation: final loss with and without it, the fraction of steps saved, and
whether that saving stands out from the seed-to-seed noise.

data["losses"]: results/training/losses.csv (run, size, objective, init, dataset, seed, step,
loss), or the paper's wide file (symmetric_init_loss.csv: one column per run named
size--objective--dataset[--symmetric-init], one row per logged step, every 200 steps).

Losses are first averaged over a trailing window of WINDOW_STEPS = 200 training steps, the
window of the paper's logged losses (its trainer logs the mean loss of every 200 steps), at
most a tenth of the run (a short run keeps ten windows); on the paper's own file, logged
every 200 steps, each window holds one entry: its losses stay as published. One noisy log entry dipping below the target must not
count as a crossing.

Fraction of steps saved (the paper's definition, on the averaged losses): 1 - n / N, where n
counts the symmetric run's logged steps up to and including the first whose loss is at or
below the baseline's final loss, and N is the number of logged steps. NaN, with a note, when
the symmetric run never gets there.

Spread. With several seeds (config training.comparison_seeds) the fraction is computed per
seed (default seed s against symmetric seed s): mean, standard deviation, min and max. The
noise reference is the same statistic between two DEFAULT runs of different seeds (no effect
by construction): `noise_fraction_max` is the largest "saving" seed noise alone produced.
`verdict`: "saving beyond seed noise" when every seed's saving exceeds that maximum,
"within seed noise" otherwise, "one seed: spread unknown" with one seed.
With data["summary"] (results/training/summary.csv), the final step's median symmetry and
directionality of each init: mean and standard deviation over the seeds.
Param objective (default bidirectional; "all" keeps every objective).
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pandas as pd

from ..report_data import from_paper, load_losses

CAPTION = (
    "Symmetric initialisation (W_q = W_k at step 0): final training loss with and without it, the "
    "fraction of steps saved to reach the baseline's final loss (losses averaged over 200 steps), its "
    "spread over seeds, and the same statistic between two baseline seeds (seed noise)."
)
KEYS = ["size", "objective", "dataset"]
WINDOW_STEPS = 200  # the paper's logging window
COLUMNS = [*KEYS, "seeds", "window_steps", "final_loss_default", "final_loss_symmetric", "steps",
           "step_reaching_default", "fraction_steps_saved", "fraction_sd", "fraction_min", "fraction_max",
           "noise_fraction_max", "verdict", "note"]  # fmt: skip


load = load_losses  # `wqk table` reads the inputs through it


def final_scores(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (size, objective, dataset): each init's final median symmetry and directionality,
    mean and standard deviation over seeds (columns final_<score>_<init>[_sd])."""
    last = summary[summary["step"] == summary.groupby("run")["step"].transform("max")]
    rows = []
    for key, g in last.groupby(KEYS, sort=True):
        row = dict(zip(KEYS, key))
        for init in ("default", "symmetric"):
            gi = g[g["init"] == init]
            for score in ("symmetry", "directionality"):
                values = gi[f"{score}_median"].to_numpy(float)
                row[f"final_{score}_{init}"] = float(values.mean()) if len(values) else np.nan
                row[f"final_{score}_{init}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def window_steps(steps: np.ndarray) -> int:
    """The averaging window in training steps: WINDOW_STEPS, at most a tenth of the run."""
    return int(min(WINDOW_STEPS, max(1, steps.max() // 10)))


def smoothed(run: pd.DataFrame, window: int) -> pd.DataFrame:
    """One run's logged losses, each replaced by the mean of those logged in the trailing
    `window` steps (itself included)."""
    run = run.dropna(subset=["loss"]).sort_values("step")
    steps, loss = run["step"].to_numpy(), run["loss"].to_numpy(float)
    first = np.searchsorted(steps, steps - window, side="right")
    return run.assign(loss=[loss[a : i + 1].mean() for i, a in enumerate(first)])


def steps_saved(baseline: pd.DataFrame, symmetric: pd.DataFrame) -> tuple[float, float, float, str]:
    """(baseline final loss, first step reaching it, fraction saved, note) for one pair of runs."""
    base = baseline.dropna(subset=["loss"]).sort_values("step")
    sym = symmetric.dropna(subset=["loss"]).sort_values("step")
    target = float(base["loss"].iloc[-1])
    hit = np.flatnonzero(sym["loss"].to_numpy(float) <= target)
    if not hit.size:
        return target, np.nan, np.nan, "symmetric run never reaches the baseline's final loss"
    n_first = int(hit[0]) + 1
    return target, float(sym["step"].iloc[hit[0]]), 1.0 - n_first / len(sym), ""


def _by_seed(g: pd.DataFrame, init: str, window: int) -> dict:
    runs = g[g["init"] == init]
    seeds = runs["seed"] if "seed" in runs.columns else pd.Series(0, index=runs.index)
    return {int(s): smoothed(r, window) for s, r in runs.groupby(seeds.fillna(0), sort=True)}


def _compare(g: pd.DataFrame) -> dict:
    window = window_steps(g["step"].to_numpy())
    default, symmetric = _by_seed(g, "default", window), _by_seed(g, "symmetric", window)
    seeds = sorted(default.keys() & symmetric.keys())
    pairs = [steps_saved(default[s], symmetric[s]) for s in seeds]
    fractions = np.array([p[2] for p in pairs], float)
    noise = [steps_saved(default[a], default[b])[2] for a, b in permutations(sorted(default), 2)]
    noise_max = float(np.nanmax(noise)) if noise and not np.isnan(noise).all() else np.nan
    reached = fractions[~np.isnan(fractions)]
    if len(seeds) < 2:
        verdict = "one seed: spread unknown"
    elif len(reached) == len(seeds) and not np.isnan(noise_max) and reached.min() > noise_max:
        verdict = "saving beyond seed noise"
    else:
        verdict = "within seed noise"
    steps_hit = [p[1] for p in pairs if not np.isnan(p[1])]
    return {
        "seeds": len(seeds),
        "window_steps": window,
        "final_loss_default": float(np.mean([p[0] for p in pairs])),
        "final_loss_symmetric": float(np.mean([symmetric[s]["loss"].iloc[-1] for s in seeds])),
        "steps": int(g["step"].max()),
        "step_reaching_default": float(np.median(steps_hit)) if steps_hit else np.nan,
        "fraction_steps_saved": float(np.mean(fractions)) if len(reached) == len(seeds) else np.nan,
        "fraction_sd": float(np.std(reached, ddof=1)) if len(reached) > 1 else np.nan,
        "fraction_min": float(reached.min()) if len(reached) else np.nan,
        "fraction_max": float(reached.max()) if len(reached) else np.nan,
        "noise_fraction_max": noise_max,
        "verdict": verdict,
        "note": "; ".join(sorted({p[3] for p in pairs if p[3]})),
    }


def build(data: dict, objective: str = "bidirectional") -> pd.DataFrame:
    df = data["losses"]
    if "step" not in df.columns:
        df = from_paper(df)
    if objective != "all":
        df = df[df["objective"] == objective]
    rows = []
    for key, g in df.groupby(KEYS, sort=True):
        if {"default", "symmetric"} <= set(g["init"]):
            rows.append({**dict(zip(KEYS, key)), **_compare(g)})
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["step_reaching_default"] = out["step_reaching_default"].round().astype("Int64")
    out["seeds"] = out["seeds"].astype("Int64")
    if "summary" in data and not out.empty:
        out = out.merge(final_scores(data["summary"]), on=KEYS, how="left")
    return out
