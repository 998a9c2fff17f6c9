"""The run folder: what a run writes, what resuming reads, what a finished run publishes.

Layout (RUN_DIR):
    run.json                      configuration and metadata (size, objective, init, dataset)
    loss.csv                      step, loss (mean since the previous row), lr
    scores/step-NNNNNN.parquet    scores of every saved step (the scores Parquet of `wqk score`)
    matrices/step-NNNNNN.parquet  per-head Q_h, K_h of every saved step (--keep-matrices only)
    checkpoints/step-NNNNNN/      config.json + model.safetensors (a plain local checkpoint)
                                  + trainer_state.pt (optimizer, scheduler, RNG: for resuming);
                                  only the last --keep-checkpoints of them are kept
    done.json                     written last
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import shutil
from pathlib import Path

from ..atomic import write_text
from ..errors import WqkError
from .spec import TrainConfig, checkpoint_steps, recorded, resume_keys

log = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"step-(\d{6,})")
TRAINER_STATE_KEYS = {"optimizer", "scheduler", "scaler", "batches", "masks", "torch", "loss_sum", "loss_n"}


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step-{step:06d}"


def scores_path(run_dir: Path, step: int) -> Path:
    return run_dir / "scores" / f"step-{step:06d}.parquet"


def matrices_path(run_dir: Path, step: int) -> Path:
    return run_dir / "matrices" / f"step-{step:06d}.parquet"


# --- run.json and done.json -------------------------------------------------------------


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def run_record(cfg: TrainConfig) -> dict:
    """run.json: the recorded settings, the hashes of the data, the run's name."""
    rec = recorded(cfg)
    rec["corpus_sha256"] = _sha256(Path(cfg.corpus))
    rec["tokenizer_sha256"] = _sha256(Path(cfg.tokenizer) / "tokenizer.json")
    rec["run"] = Path(cfg.out).name
    return rec


def open_run(cfg: TrainConfig) -> dict | None:
    """Start the run in cfg.out, or take it up again. A folder holding a run of other
    settings is refused. A finished run (done.json) has nothing to train: its scores are
    checked (and published to cfg.scores_out) and its done record returned. Otherwise
    run.json is written and None returned."""
    run_dir = Path(cfg.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    record = run_record(cfg)
    done_path, run_json = run_dir / "done.json", run_dir / "run.json"
    if run_json.is_file():
        old = json.loads(run_json.read_text())
        changed = [k for k in resume_keys(type(cfg)) if old.get(k) != record.get(k)]
        if changed:
            raise WqkError(
                f"{run_dir} holds a run with other settings ({', '.join(changed)}); "
                "delete the folder or choose another --out"
            )
        if done_path.is_file():
            log.info("%s is complete (done.json); nothing to train", run_dir)
            saved = checkpoint_steps(cfg.steps, cfg.save_every)
            check_scores(run_dir, saved)
            if cfg.scores_out:
                publish_scores(run_dir, saved, cfg.scores_out)
            return json.loads(done_path.read_text())
    _write_json(run_json, record)
    return None


def finish_run(cfg: TrainConfig) -> dict:
    """The done record of a run trained to its last step: its final loss and files. Its
    scores are published (to cfg.scores_out, if given) before done.json is written."""
    run_dir = Path(cfg.out)
    saved = checkpoint_steps(cfg.steps, cfg.save_every)
    final = loss_rows(run_dir, cfg.steps)
    result = {
        "steps": cfg.steps,
        "final_loss": float(final[-1][1]) if final else None,
        "checkpoints": [
            checkpoint_dir(run_dir, s).relative_to(run_dir).as_posix() for s in complete_checkpoints(run_dir)
        ],
        "scores": [scores_path(run_dir, s).relative_to(run_dir).as_posix() for s in saved],
        "matrices": [
            matrices_path(run_dir, s).relative_to(run_dir).as_posix()
            for s in saved
            if matrices_path(run_dir, s).is_file()
        ],
    }
    if cfg.scores_out:
        publish_scores(run_dir, saved, cfg.scores_out)
    _write_json(run_dir / "done.json", result)
    return result


# --- loss.csv ---------------------------------------------------------------------------


def loss_rows(run_dir: Path, up_to: int) -> list[list[str]]:
    path = run_dir / "loss.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return [r for r in rows[1:] if int(r[0]) <= up_to]


def restart_loss_log(run_dir: Path, start: int) -> Path:
    """loss.csv cut back to the rows up to the step a run starts from (rows logged after its
    last checkpoint are logged again); returns its path."""
    rows = loss_rows(run_dir, start)
    path = run_dir / "loss.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([["step", "loss", "lr"], *rows])
    return path


# --- checkpoints ------------------------------------------------------------------------


def complete_checkpoints(run_dir: Path) -> list[int]:
    """Steps of the checkpoints written completely (renamed from their temp folder)."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    steps = []
    for d in root.iterdir():
        m = CHECKPOINT_RE.fullmatch(d.name)
        if m and (d / "trainer_state.pt").is_file() and (d / "model.safetensors").is_file():
            steps.append(int(m.group(1)))
    return sorted(steps)


def save_checkpoint(run_dir: Path, step: int, model, state: dict) -> None:
    """The model and the trainer state, written in a temporary folder renamed into place."""
    import torch

    final = checkpoint_dir(run_dir, step)
    tmp = final.with_name(f".tmp-{final.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    torch.save(state, tmp / "trainer_state.pt")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def load_weights(model, folder: Path) -> None:
    from safetensors.torch import load_file

    missing, unexpected = model.load_state_dict(load_file(folder / "model.safetensors"), strict=False)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    if unexpected or set(missing) - tied:
        raise WqkError(f"checkpoint {folder} does not match the model: missing {missing}, unexpected {unexpected}")


def load_trainer_state(folder: Path) -> dict:
    """The resume state save_checkpoint wrote: tensors, numbers, strings, lists and dicts only.

    Loaded with torch's weights_only unpickler, which refuses every other Python object: a
    pickle can run arbitrary code when loaded, and a checkpoint folder may come from elsewhere.
    """
    import pickle

    import torch

    path = folder / "trainer_state.pt"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WqkError(
            f"{path} holds Python objects other than tensors, numbers and strings; it was not "
            f"loaded, since unpickling them could run code ({first}). A trainer state written by "
            f"`wqk train` never does: delete {path.parent} to resume from the checkpoint before it"
        ) from None
    missing = TRAINER_STATE_KEYS - (set(state) if isinstance(state, dict) else set())
    if missing:
        raise WqkError(f"{path} is not a trainer state of `wqk train` (missing {sorted(missing)})")
    return state


def prune_checkpoints(run_dir: Path, keep: int) -> list[int]:
    """Delete every checkpoint but the last `keep` complete ones (0: keep all), and what an
    interrupted save or deletion left; returns the steps kept. A checkpoint is renamed away
    before it is deleted, so a kill mid-deletion never leaves a half checkpoint under its name."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    complete = complete_checkpoints(run_dir)
    kept = complete if keep == 0 else complete[-keep:]
    for d in sorted(root.iterdir()):
        if d.name.startswith((".tmp-", ".trash-")):
            shutil.rmtree(d, ignore_errors=True)
        elif keep and CHECKPOINT_RE.fullmatch(d.name) and int(d.name[5:]) not in kept:
            trash = d.with_name(f".trash-{d.name}")
            os.replace(d, trash)
            shutil.rmtree(trash, ignore_errors=True)
    return kept


# --- scores of saved steps --------------------------------------------------------------


def remove_partial_files(folder: Path) -> None:
    """What a killed process left of an atomic write of a step's file (.step-N.parquet.tmp-PID)."""
    for tmp in folder.glob(".step-*.parquet.tmp-*"):
        tmp.unlink(missing_ok=True)


def check_scores(run_dir: Path, steps: list[int]) -> None:
    """Every saved step up to the one a run resumes from (or ends at) has its scores (each
    is scored right after its checkpoint is written): a missing one stops the run."""
    lost = [s for s in steps if not scores_path(run_dir, s).is_file()]
    if lost:
        raise WqkError(
            f"{run_dir}: no scores for the saved steps {lost} ({run_dir / 'scores'} was deleted?): "
            f"delete {run_dir} to train the run again"
        )


def publish_scores(run_dir: Path, steps: list[int], out: str | os.PathLike) -> list[Path]:
    """Copy the scores of the steps to out/step-NNNNNN.parquet (atomically), and remove other
    step-*.parquet files there, left by an earlier run of other settings: the folder then
    holds exactly this run's scores (what `wqk train-summary --scores FOLDER` reads)."""
    from ..atomic import atomic_path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    remove_partial_files(out)
    written = []
    for s in steps:
        src, dst = scores_path(run_dir, s), out / f"step-{s:06d}.parquet"
        if not src.is_file():
            raise WqkError(f"{src} is missing: the run's scores are incomplete; delete {run_dir} to train it again")
        with atomic_path(dst) as tmp:
            shutil.copyfile(src, tmp)
        written.append(dst)
    names = {p.name for p in written}
    for stale in out.glob("step-*.parquet"):
        if stale.name not in names and CHECKPOINT_RE.fullmatch(stale.name.removesuffix(".parquet")):
            stale.unlink()
    return written
