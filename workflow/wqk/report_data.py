"""What figures and tables both read: the models one draws or lists, and the paper's training
files (its wide loss file, its training curves). wqk.figures and wqk.tables import this
module, never each other.

`load_*` are the `load(key, path, **params)` through which `wqk figure` and `wqk table` read a
module's inputs (wqk.commands._render.load_inputs): a module sets `load = load_losses`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pandas as pd

from .contracts import SELF_STACKS


# ---------------------------------------------------------------- models
def select_models(models: pd.DataFrame, modality: str | None = None, figure: str | None = None) -> pd.DataFrame:
    """Self-attention rows of models.parquet, of one modality, of the models whose catalogue
    `figure` lists the key `figure` (comma-separated keys)."""
    df = models[models["stack"].isin(SELF_STACKS)]
    if modality:
        df = df[df["modality"] == modality]
    if figure:
        keys = df["figure"].fillna("").astype(str).str.split(",")
        df = df[keys.map(lambda ks: figure in [k.strip() for k in ks])]
    return df


# ---------------------------------------------------------------- the paper's loss file
def first_seed(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs repeated over seeds (training.comparison_seeds) reduced to the smallest
    seed's, per size, objective, init and dataset; tables without a seed column as they are."""
    if "seed" not in df.columns or df.empty:
        return df
    return df[df["seed"] == df.groupby(["size", "objective", "init", "dataset"])["seed"].transform("min")]


PAPER_LOG_EVERY = 200


def from_paper(wide: pd.DataFrame, log_every: int = PAPER_LOG_EVERY) -> pd.DataFrame:
    """The paper's wide loss file (symmetric_init_loss.csv: one column per run named
    size--objective--dataset[--symmetric-init], one row per logged step) -> the long losses
    table (run, size, objective, init, dataset, step, loss)."""
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


def load_losses(key: str, path, **_) -> pd.DataFrame:
    """A CSV input; under a key other than "summary", the paper's wide loss file made long
    (our losses.csv as it is)."""
    df = pd.read_csv(path)
    if key == "summary":
        return df
    return from_paper(df) if "step" not in df.columns and any("--" in c for c in df.columns) else df


def load_csv(key: str, path, **_) -> pd.DataFrame:
    """A CSV input as it is."""
    return pd.read_csv(path)


# ---------------------------------------------------------------- the paper's training curves
OBJECTIVES = {"encoder": "bidirectional", "decoder": "autoregressive"}
SIZES = {"bert": "base", "bert-small": "mini"}  # the paper's model names -> our sizes (config/config.yaml)
PAPER_FILE = re.compile(r"(?P<model>bert(?:-small)?)-(?P<kind>encoder|decoder)-(?P<dataset>\w+)\.pkl")


def paper_runs(published: pd.DataFrame) -> Iterator[tuple[str, str, str, pd.DataFrame]]:
    """(our size, dataset, objective, curve by step) of each run of the paper's
    training_curves.csv of a size we name."""
    for file, g in published.groupby("file"):
        m = PAPER_FILE.fullmatch(str(file))
        if m and m["model"] in SIZES:
            yield SIZES[m["model"]], m["dataset"], OBJECTIVES[m["kind"]], g.sort_values("checkpoint_step")
