"""Train a BERT-style network from scratch, bidirectionally or autoregressively.

Same `BertConfig` for both objectives: `BertForMaskedLM` with 15% masking, or
`BertLMHeadModel` with `is_decoder=True` (causal mask, next-token loss). Optional symmetric
initialisation copies W_k into W_q in every layer, so every M_h = Q_h K_h^T starts symmetric.
The settings are wqk.training.spec's, the run folder wqk.training.run_folder's.

Every saved step is scored in this process, from the model's own tensors (its state_dict
through wqk.scoring, the code of `wqk score`), right after its checkpoint is written: the scores file holds the same bytes as
`wqk score RUN/checkpoints/step-NNNNNN` run from RUN's parent folder (model name
RUN/checkpoints/step-NNNNNN, provenance the hash of that model.safetensors). Then the
checkpoints before the last --keep-checkpoints are deleted: a run keeps its scores, its
loss curve and what resuming needs, not 200 copies of the model and its optimizer.
With --scores-out, the scores files are copied there once the run is complete (the files a
workflow declares; those in RUN_DIR survive a failed job, which a workflow may delete).

Deterministic: fixed seeds, deterministic torch kernels, all randomness from explicit
generators whose states are checkpointed, so a job killed and rerun resumes from its last
complete checkpoint and ends with the same bytes as an uninterrupted run (loss.csv, every
scores file, the last checkpoints, done.json).
"""

from __future__ import annotations

import csv
import logging
import os
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import vml
from ..contracts import resolve_device
from ..determinism import use_deterministic_algorithms
from ..errors import WqkError
from ..progress import bar as progress_bar
from .data import batch_of, chunk, draw_batch, load_tokens
from .model import build_model, optimizer
from .run_folder import (
    check_scores,
    checkpoint_dir,
    complete_checkpoints,
    finish_run,
    load_trainer_state,
    load_weights,
    open_run,
    prune_checkpoints,
    remove_partial_files,
    restart_loss_log,
    save_checkpoint,
)
from .spec import TrainConfig, checkpoint_steps
from .step_scores import score_step

if TYPE_CHECKING:
    import torch

# What tests and benchmarks import from here, besides train.
__all__ = [
    "TrainConfig",
    "batch_of",
    "build_model",
    "chunk",
    "complete_checkpoints",
    "load_tokens",
    "score_step",
    "train",
]

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")


def train(cfg: TrainConfig) -> dict:
    """Train (or resume) the run in cfg.out; returns the done.json record.

    Process-wide torch settings (deterministic algorithms, thread count) are restored after."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    import torch

    deterministic, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    try:
        return _train(cfg)
    finally:
        use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)


def _train(cfg: TrainConfig) -> dict:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # save_pretrained's per-checkpoint "Writing model shards" bar
    finished = open_run(cfg)
    if finished is not None:
        return finished
    run_dir = Path(cfg.out)
    device, fp16 = _set_up_torch(cfg)
    tok, ids = _tokenizer(cfg.tokenizer)
    data = chunk(load_tokens(cfg.corpus, tok), cfg.seq_len)
    log.info("%s: %d sequences of %d tokens", cfg.corpus, data.shape[0], cfg.seq_len)

    t = _start(cfg, tok.get_vocab_size(), ids["[PAD]"], device, fp16)
    start = _resume(t, run_dir)
    loss_path = restart_loss_log(run_dir, start)
    saved = set(checkpoint_steps(cfg.steps, cfg.save_every))
    _score_start(t, cfg, run_dir, start, saved)

    draw = _batches(cfg, t, data, ids, tok.get_vocab_size())
    t.model.train()
    t0 = time.monotonic()
    with (
        open(loss_path, "a", newline="") as loss_file,
        progress_bar(total=cfg.steps, initial=start, desc=run_dir.name, unit="step", dynamic_ncols=True) as bar,
    ):
        loss_log = csv.writer(loss_file, lineterminator="\n")
        for step in range(start + 1, cfg.steps + 1):
            t.loss_sum += _step(t, draw, cfg.grad_accum, cfg.max_grad_norm)
            t.loss_n += 1
            if step % cfg.log_every == 0 or step == cfg.steps:
                _log_loss(t, step, loss_log, loss_file, bar)
            if step in saved:
                _save_and_score(t, cfg, run_dir, step)
            bar.update(1)

    result = finish_run(cfg)
    log.info("%s: %d steps in %.1f s, final loss %s", run_dir, cfg.steps - start, time.monotonic() - t0,
             result["final_loss"])  # fmt: skip
    return result


@dataclass
class _Training:
    """What the steps change, and what a checkpoint holds of it to resume from."""

    model: Any
    optimizer: Any
    scheduler: Any
    scaler: Any
    batches: torch.Generator  # draws the rows of each batch
    masks: torch.Generator  # draws the masked tokens
    device: str
    fp16: bool
    loss_sum: float = 0.0  # of the steps since the last row of loss.csv
    loss_n: int = 0

    def state(self) -> dict:
        import torch

        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "batches": self.batches.get_state(),
            "masks": self.masks.get_state(),
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state() if self.device == "cuda" else None,
            "loss_sum": self.loss_sum,
            "loss_n": self.loss_n,
        }

    def load(self, state: dict) -> None:
        import torch

        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.batches.set_state(state["batches"])
        self.masks.set_state(state["masks"])
        torch.set_rng_state(state["torch"])
        if self.device == "cuda" and state.get("cuda") is not None:
            torch.cuda.set_rng_state(state["cuda"])
        self.loss_sum, self.loss_n = state["loss_sum"], state["loss_n"]


def _set_up_torch(cfg: TrainConfig) -> tuple[str, bool]:
    """The device (cpu or cuda) and whether fp16 is used on it; deterministic kernels."""
    import torch

    device = resolve_device(cfg.device).type
    fp16 = cfg.fp16 and device == "cuda"
    if cfg.fp16 and not fp16:
        log.info("--fp16 ignored on %s", device)
    use_deterministic_algorithms(True)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    vml.prime()  # MKL's vector functions set up from one thread, before the first parallel one
    if device == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return device, fp16


def _tokenizer(path: str):
    """The tokenizer and the ids of its special tokens."""
    from .tokenizer import load

    tok = load(path)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    if any(v is None for v in ids.values()):
        raise WqkError(f"tokenizer {path} lacks a special token: {ids}")
    return tok, ids


def _start(cfg: TrainConfig, vocab_size: int, pad_id: int, device: str, fp16: bool) -> _Training:
    """The model at step 0, its optimizer, schedule and loss scaler, the seeded generators."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    model = build_model(cfg, vocab_size, pad_id).to(device)
    opt = optimizer(model, cfg)
    scheduler = get_linear_schedule_with_warmup(opt, cfg.warmup, cfg.steps)
    scaler = torch.amp.GradScaler("cuda", enabled=fp16)
    batches = torch.Generator().manual_seed(cfg.seed)
    masks = torch.Generator().manual_seed(cfg.seed + 1)
    torch.manual_seed(cfg.seed)  # dropout
    return _Training(model, opt, scheduler, scaler, batches, masks, device, fp16)


def _resume(t: _Training, run_dir: Path) -> int:
    """The step the run starts from: that of its last complete checkpoint, loaded (0: none)."""
    steps = complete_checkpoints(run_dir)
    if not steps:
        return 0
    folder = checkpoint_dir(run_dir, steps[-1])
    state = load_trainer_state(folder)
    load_weights(t.model, folder)
    t.load(state)
    log.info("resuming %s from step %d", run_dir, steps[-1])
    return steps[-1]


def _score_start(t: _Training, cfg: TrainConfig, run_dir: Path, start: int, saved: set[int]) -> None:
    """A new run saves its step 0. The step resumed from is scored again: a kill may have
    come between its checkpoint and its scores; the steps before it must have theirs."""
    if not complete_checkpoints(run_dir):
        save_checkpoint(run_dir, 0, t.model, t.state())
    for folder in (run_dir / "scores", run_dir / "matrices"):
        remove_partial_files(folder)
    score_step(t.model, run_dir, start, cfg.score_device, cfg.keep_matrices)
    check_scores(run_dir, [s for s in sorted(saved) if s < start])
    prune_checkpoints(run_dir, cfg.keep_checkpoints)


def _save_and_score(t: _Training, cfg: TrainConfig, run_dir: Path, step: int) -> None:
    save_checkpoint(run_dir, step, t.model, t.state())
    score_step(t.model, run_dir, step, cfg.score_device, cfg.keep_matrices)
    prune_checkpoints(run_dir, cfg.keep_checkpoints)  # after the new one is complete


def _batches(cfg: TrainConfig, t: _Training, data, ids: dict, vocab_size: int):
    """A function drawing the next batch (input ids, labels) of the run's objective."""
    if cfg.objective == "autoregressive":
        return partial(draw_batch, data, cfg.batch_size, t.batches)
    special = [ids["[PAD]"], ids["[CLS]"], ids["[SEP]"]]
    return partial(draw_batch, data, cfg.batch_size, t.batches, t.masks,
                   mask_id=ids["[MASK]"], vocab_size=vocab_size, special_ids=special)  # fmt: skip


def _step(t: _Training, draw, grad_accum: int, max_grad_norm: float) -> float:
    """One optimizer step over grad_accum batches; returns its loss."""
    import torch

    step_loss = 0.0
    for _ in range(grad_accum):
        input_ids, labels = draw()
        with torch.autocast("cuda", dtype=torch.float16, enabled=t.fp16):
            out = t.model(input_ids=input_ids.to(t.device), labels=labels.to(t.device))
        loss = out.loss / grad_accum
        t.scaler.scale(loss).backward()
        step_loss += loss.item()
    t.scaler.unscale_(t.optimizer)
    torch.nn.utils.clip_grad_norm_(t.model.parameters(), max_grad_norm)
    t.scaler.step(t.optimizer)
    t.scaler.update()
    t.scheduler.step()
    t.optimizer.zero_grad(set_to_none=True)
    return step_loss


def _log_loss(t: _Training, step: int, loss_log, loss_file, bar) -> None:
    """A row of loss.csv: the mean loss of the steps since the last row, and the lr."""
    loss, lr = t.loss_sum / t.loss_n, t.scheduler.get_last_lr()[0]
    loss_log.writerow([step, repr(loss), repr(lr)])
    loss_file.flush()
    t.loss_sum, t.loss_n = 0.0, 0
    bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}")
