"""Training runs + scores of their saved steps -> the stable tables tools read.

summary.csv  one row per (run, saved step): run metadata, the logged loss nearest to
             that step, and the median and quartiles over layers of both scores
layers.csv   one row per (run, step, layer): symmetry and directionality of the layer form
losses.csv   every logged loss of every run (for loss curves and the symmetric-init table)

Scores are scores Parquet files (the contract of `wqk score`): those `wqk train` writes for
every saved step (RUN/scores/step-NNNNNN.parquet, copied to its --scores-out folder), or
those of `wqk score CHECKPOINT`. Which run and step a file belongs to is read from its
`model` (RUN/checkpoints/step-NNNNNN, as `wqk train` names it, or any checkpoint path
ending so) or, failing that, from the file's own path (.../RUN/step-NNNNNN...).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_path
from ..contracts import SELF_STACKS, quartiles  # a causal BERT's layers are "decoder"
from ..errors import WqkError

META = ["run", "size", "objective", "init", "dataset", "seed"]
_WHERE = re.compile(r"(?:^|/)(?P<run>[^/]+)/(?:checkpoints/)?step-(?P<step>\d+)")


def run_meta(run_dir: str | os.PathLike) -> dict:
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise WqkError(f"{path} not found: is {run_dir} a run folder written by `wqk train`?")
    rec = json.loads(path.read_text())
    return {
        "run": rec.get("run") or Path(run_dir).name,
        **{k: rec.get(k, 0) if k == "seed" else rec[k] for k in META[1:]},
    }


def losses(run_dir: str | os.PathLike) -> pd.DataFrame:
    meta = run_meta(run_dir)
    path = Path(run_dir) / "loss.csv"
    df = pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=["step", "loss", "lr"])
    for k, v in reversed(meta.items()):
        df.insert(0, k, v)
    return df


def locate(model: str, file: str | os.PathLike) -> tuple[str, int]:
    """(run name, step) of a checkpoint's scores, from its model id or else its file path."""
    for text in (str(model).replace("\\", "/"), Path(file).as_posix()):
        matches = list(_WHERE.finditer(text))
        if matches:
            m = matches[-1]
            return m.group("run"), int(m.group("step"))
    raise WqkError(
        f"{file}: cannot tell which run and step these scores belong to (model {model!r}); "
        "score checkpoints by their folder path (RUN/checkpoints/step-NNNNNN)"
    )


def layer_rows(scores: pd.DataFrame, run: str, step: int) -> pd.DataFrame:
    rows = scores[(scores["scope"] == "layer") & scores["stack"].isin(SELF_STACKS)]
    out = rows[["stack", "layer", "symmetry", "directionality"]].copy()
    out.insert(0, "step", step)
    out.insert(0, "run", run)
    return out


def score_checkpoint(folder: str | os.PathLike, device: str = "cpu") -> pd.DataFrame:
    """Scores Parquet rows of one checkpoint folder, computed in-process (wqk.scoring)."""
    from ..score_table import to_frame
    from ..scoring import score

    return to_frame(score(os.fspath(folder), device=device, progress=False).table)


def checkpoint_folders(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    from .train import checkpoint_dir, complete_checkpoints

    return [(s, checkpoint_dir(Path(run_dir), s)) for s in complete_checkpoints(Path(run_dir))]


def expand_score_files(paths: list[str | os.PathLike]) -> list[Path]:
    """The files among paths, and the *.parquet files of the folders among them (sorted):
    a workflow passes one folder per run, not thousands of file names on a command line."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.parquet"))
            if not found:
                raise WqkError(f"{p}: a folder of scores without any .parquet file")
            files += found
        else:
            files.append(p)
    return files


def run_score_files(run_dir: str | os.PathLike) -> list[Path]:
    """The scores `wqk train` wrote for the run's saved steps (RUN/scores/), if any."""
    return sorted((Path(run_dir) / "scores").glob("step-*.parquet"))


def _nearest_loss(loss: pd.DataFrame, step: int) -> float:
    if loss.empty:
        return float("nan")
    i = int(np.argmin(np.abs(loss["step"].to_numpy() - step)))  # ties: the earlier log
    return float(loss["loss"].iloc[i])


def _quartiles(values: pd.Series, name: str) -> dict:
    med, q25, q75 = quartiles(values)
    return {f"{name}_median": med, f"{name}_q25": q25, f"{name}_q75": q75}


def summarize(
    run_dirs: list[str], score_files: list[str] | None = None, device: str = "cpu"
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(summary, layers, losses) of the runs, from score_files (files, or folders of them);
    without them, from the scores each run holds (RUN/scores/), or else by scoring each
    complete checkpoint of the run here (runs trained before scores were written in process)."""
    metas = {m["run"]: m for m in map(run_meta, run_dirs)}
    if len(metas) != len(run_dirs):
        raise WqkError(f"run folders must have distinct names: {run_dirs}")
    loss = pd.concat([losses(d) for d in run_dirs], ignore_index=True)

    layers = []
    if score_files:
        for f in expand_score_files(score_files):
            df = pd.read_parquet(f)
            if df.empty:
                raise WqkError(f"{f}: empty scores file")
            run, step = locate(df["model"].iloc[0], f)
            if run not in metas:
                raise WqkError(f"{f}: scores of run {run!r}, which is not among --runs ({', '.join(metas)})")
            layers.append(layer_rows(df, run, step))
    else:
        for d in run_dirs:
            run = run_meta(d)["run"]
            own = run_score_files(d)
            if own:
                for f in own:
                    layers.append(layer_rows(pd.read_parquet(f), run, int(f.stem.removeprefix("step-"))))
            else:
                for step, folder in checkpoint_folders(d):
                    layers.append(layer_rows(score_checkpoint(folder, device), run, step))
    if not layers:
        raise WqkError("no checkpoint scores: pass --scores, or runs with checkpoints")
    layer_df = pd.concat(layers, ignore_index=True).sort_values(["run", "step", "stack", "layer"])
    if layer_df.duplicated(["run", "step", "stack", "layer"]).any():
        raise WqkError("the same checkpoint was scored twice among --scores")

    rows = []
    for (run, step), g in layer_df.groupby(["run", "step"], sort=True):
        run_loss = loss[loss["run"] == run]
        rows.append(
            {
                **metas[run],
                "step": int(step),
                "loss": _nearest_loss(run_loss, step),
                **_quartiles(g["symmetry"], "symmetry"),
                **_quartiles(g["directionality"], "directionality"),
                "n_layers": int(g["layer"].nunique()),
                "stack": "/".join(sorted(g["stack"].unique())),
            }
        )
    summary = pd.DataFrame(rows)
    layer_out = layer_df.merge(pd.DataFrame(metas.values()), on="run")[
        [*META, "step", "stack", "layer", "symmetry", "directionality"]
    ].reset_index(drop=True)
    return summary, layer_out, loss.sort_values(["run", "step"]).reset_index(drop=True)


def write_csv(df: pd.DataFrame, out: str | os.PathLike) -> Path:
    with atomic_path(out) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n")
    return Path(out)
