"""Train a BERT-style network from scratch, bidirectionally or autoregressively.

Same `BertConfig` for both objectives: `BertForMaskedLM` with 15% masking, or
`BertLMHeadModel` with `is_decoder=True` (causal mask, next-token loss). Optional symmetric
initialisation copies W_k into W_q in every layer, so every M_h = Q_h K_h^T starts symmetric.

Run folder layout (RUN_DIR):
    run.json                      configuration and metadata (size, objective, init, dataset)
    loss.csv                      step, loss (mean since the previous row), lr
    scores/step-NNNNNN.parquet    scores of every saved step (the scores Parquet of `wqk score`)
    matrices/step-NNNNNN.parquet  per-head Q_h, K_h of every saved step (--keep-matrices only)
    checkpoints/step-NNNNNN/      config.json + model.safetensors (a plain local checkpoint)
                                  + trainer_state.pt (optimizer, scheduler, RNG: for resuming);
                                  only the last --keep-checkpoints of them are kept
    done.json                     written last

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
import json
import logging
import math
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import write_text
from ..contracts import resolve_device
from ..errors import WqkError
from ..progress import bar as progress_bar

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

OBJECTIVES = ("bidirectional", "autoregressive")
INITS = ("default", "symmetric")
MLM_PROBABILITY = 0.15
CHECKPOINT_RE = re.compile(r"step-(\d{6,})")
# Settings that change the trained weights; a resumed run must match them exactly.
_RESUME_KEYS = (
    "objective", "init", "layers", "hidden", "heads", "intermediate", "seq_len", "batch_size",
    "grad_accum", "steps", "lr", "warmup", "weight_decay", "save_every", "log_every", "seed", "fp16",
    "max_grad_norm", "corpus_sha256", "tokenizer_sha256",
)  # fmt: skip


@dataclass
class TrainConfig:
    corpus: str
    tokenizer: str
    out: str
    objective: str = "bidirectional"
    init: str = "default"
    layers: int = 4
    hidden: int = 128
    heads: int = 4
    intermediate: int = 512
    seq_len: int = 64
    batch_size: int = 32
    grad_accum: int = 1
    steps: int = 1000
    lr: float = 5e-4
    warmup: int = 100
    weight_decay: float = 0.01
    save_every: int = 100
    log_every: int = 10
    seed: int = 0
    device: str = "auto"
    fp16: bool = False
    max_grad_norm: float = 1.0  # the transformers Trainer default the authors trained with
    threads: int = 0  # CPU threads for torch (0: torch's default); results may depend on it
    size: str = ""  # label for summaries; default "L{layers}-H{hidden}"
    dataset: str = ""  # label for summaries; default the corpus file's stem
    keep_checkpoints: int = 1  # checkpoints kept for resuming (the last N); 0: every one
    keep_matrices: bool = False  # also write the q/k matrices of every saved step
    score_device: str = "auto"  # where each saved step is scored (auto, cpu, cuda)
    scores_out: str = ""  # folder the scores files are copied to once the run is complete
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise WqkError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.init not in INITS:
            raise WqkError(f"init must be one of {INITS}, got {self.init!r}")
        if self.hidden % self.heads:
            raise WqkError(f"hidden size {self.hidden} is not divisible by {self.heads} heads")
        for name in (
            "steps",
            "save_every",
            "log_every",
            "batch_size",
            "grad_accum",
            "seq_len",
            "layers",
        ):
            if getattr(self, name) < 1:
                raise WqkError(f"--{name.replace('_', '-')} must be at least 1")
        if self.keep_checkpoints < 0:
            raise WqkError("--keep-checkpoints must be at least 0 (0 keeps every checkpoint)")
        self.size = self.size or f"L{self.layers}-H{self.hidden}"
        self.dataset = self.dataset or Path(self.corpus).stem


# --- data -------------------------------------------------------------------------------


def load_tokens(corpus: str | os.PathLike, tok):
    """The corpus as one id sequence (paragraphs, each followed by [SEP]), memory-mapped.

    A .npy file is the token file of `wqk corpus --tokenizer` (written with this tokenizer);
    any other file is read as text (paragraphs at blank lines) and tokenised in chunks into
    a temporary .npy file, mapped and then unlinked: the mapping outlives the name, and
    neither the text nor its ids are ever held in memory as a whole."""
    import tempfile

    from .corpus import file_paragraphs, read_tokens, write_tokens

    path = Path(corpus)
    if path.suffix == ".npy":
        tokens = read_tokens(path)
    else:
        with tempfile.TemporaryDirectory(prefix="wqk-tokens-") as tmp:
            write_tokens(file_paragraphs(path), tok, Path(tmp) / "tokens.npy")
            tokens = read_tokens(Path(tmp) / "tokens.npy")
    vocab_size = tok.get_vocab_size()
    if (vocab_size - 1).bit_length() > tokens.dtype.itemsize * 8:
        raise WqkError(f"{path}: {tokens.dtype} token ids cannot hold the {vocab_size} ids of the tokenizer")
    return tokens


def chunk(tokens, seq_len: int):
    """Non-overlapping sequences of seq_len tokens: an [n, seq_len] view of the ids (no copy)."""
    n = len(tokens) // seq_len
    if n < 1:
        raise WqkError(f"corpus has {len(tokens)} tokens, fewer than one sequence of {seq_len}")
    return tokens[: n * seq_len].reshape(n, seq_len)


def batch_of(data, rows) -> torch.Tensor:
    """Rows of the [n, seq_len] id array (rows: a tensor of row numbers), as int64 ids; only
    those rows are read from the memory map, and their pages are then let go (release)."""
    import numpy as np
    import torch

    batch = torch.from_numpy(np.asarray(data[rows.numpy()], dtype=np.int64))
    release(data)
    return batch


def release(data) -> None:
    """Take the token file's pages out of this process's resident set (madvise
    MADV_DONTNEED over the whole mapping; a no-op for an array in memory). They stay in the
    page cache, so reading them again costs no disk read. Without this, random batches map
    page after page (and, on a fault, the cached pages around it) until the process's RSS
    counts the whole file: clean, reclaimable pages, but what RSS-based memory limits see.
    About 0.25 ms for a 52 GB mapping."""
    import mmap

    mm = getattr(data, "_mmap", None)  # numpy.memmap's mapping, shared by its views
    if mm is not None and hasattr(mm, "madvise"):
        mm.madvise(mmap.MADV_DONTNEED)


def mask_tokens(input_ids, generator, *, mask_id: int, vocab_size: int, special_ids: list[int]):
    """BERT masking as transformers' DataCollatorForLanguageModeling, from an explicit generator:
    15% of non-special tokens are predicted; of those 80% -> [MASK], 10% -> random, 10% kept."""
    import torch

    labels = input_ids.clone()
    prob = torch.full(labels.shape, MLM_PROBABILITY)
    special = torch.isin(labels, torch.tensor(special_ids))
    prob.masked_fill_(special, 0.0)
    masked = torch.bernoulli(prob, generator=generator).bool()
    labels[~masked] = -100
    inputs = input_ids.clone()
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=generator).bool() & masked
    inputs[replaced] = mask_id
    randomised = torch.bernoulli(torch.full(labels.shape, 0.5), generator=generator).bool() & masked & ~replaced
    inputs[randomised] = torch.randint(vocab_size, labels.shape, generator=generator)[randomised]
    return inputs, labels


# --- model ------------------------------------------------------------------------------


def build_model(cfg: TrainConfig, vocab_size: int, pad_id: int):
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertLMHeadModel

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        intermediate_size=cfg.intermediate,
        max_position_embeddings=max(512, cfg.seq_len),
        pad_token_id=pad_id,
        is_decoder=cfg.objective == "autoregressive",
    )
    torch.manual_seed(cfg.seed)
    cls = BertLMHeadModel if cfg.objective == "autoregressive" else BertForMaskedLM
    model = cls(config)
    if cfg.init == "symmetric":
        symmetrize(model)
    return model


def symmetrize(model) -> None:
    """W_q := W_k (and b_q := b_k) in every layer: M_h = W_q,h W_k,h^T starts symmetric."""
    import torch

    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            att = layer.attention.self
            att.query.weight.copy_(att.key.weight)
            att.query.bias.copy_(att.key.bias)


def _optimizer(model, cfg: TrainConfig):
    import torch

    # As transformers' Trainer: no weight decay on biases and LayerNorm weights.
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr)


# --- checkpoints ------------------------------------------------------------------------


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step-{step:06d}"


def checkpoint_steps(cfg: TrainConfig) -> list[int]:
    return sorted({0, cfg.steps, *range(cfg.save_every, cfg.steps + 1, cfg.save_every)})


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


def _save(run_dir: Path, step: int, model, state: dict) -> None:
    import torch

    final = checkpoint_dir(run_dir, step)
    tmp = final.with_name(f".tmp-{final.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    torch.save(state, tmp / "trainer_state.pt")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def _load_weights(model, folder: Path) -> None:
    from safetensors.torch import load_file

    missing, unexpected = model.load_state_dict(load_file(folder / "model.safetensors"), strict=False)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    if unexpected or set(missing) - tied:
        raise WqkError(f"checkpoint {folder} does not match the model: missing {missing}, unexpected {unexpected}")


def _load_trainer_state(path: Path) -> dict:
    """The resume state `_save` wrote: tensors, numbers, strings, lists and dicts only.

    Loaded with torch's weights_only unpickler, which refuses every other Python object: a
    pickle can run arbitrary code when loaded, and a checkpoint folder may come from elsewhere.
    """
    import pickle

    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WqkError(
            f"{path} holds Python objects other than tensors, numbers and strings; it was not "
            f"loaded, since unpickling them could run code ({first}). A trainer state written by "
            f"`wqk train` never does: delete {path.parent} to resume from the checkpoint before it"
        ) from None
    missing = {"optimizer", "scheduler", "scaler", "batches", "masks", "torch", "loss_sum", "loss_n"}
    missing -= set(state) if isinstance(state, dict) else set()
    if missing:
        raise WqkError(f"{path} is not a trainer state of `wqk train` (missing {sorted(missing)})")
    return state


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def _run_record(cfg: TrainConfig) -> dict:
    rec = asdict(cfg)
    for where in ("device", "threads", "score_device", "scores_out"):  # where, not what
        rec.pop(where)
    rec["corpus_sha256"] = _sha256(Path(cfg.corpus))
    rec["tokenizer_sha256"] = _sha256(Path(cfg.tokenizer) / "tokenizer.json")
    rec["run"] = Path(cfg.out).name
    return rec


def _loss_rows(path: Path, up_to: int) -> list[list[str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return [r for r in rows[1:] if int(r[0]) <= up_to]


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


def scores_path(run_dir: Path, step: int) -> Path:
    return run_dir / "scores" / f"step-{step:06d}.parquet"


def matrices_path(run_dir: Path, step: int) -> Path:
    return run_dir / "matrices" / f"step-{step:06d}.parquet"


def step_name(run_dir: Path, step: int) -> str:
    """The model name a step's scores record: RUN/checkpoints/step-NNNNNN, the path that
    `wqk score` records when run from the run folder's parent (wqk.training.summary reads
    the run and the step from it). Relative: the bytes do not depend on where RUN lies."""
    return f"{run_dir.name}/checkpoints/step-{step:06d}"


def score_step(model, run_dir: Path, step: int, device: str = "auto", matrices: bool = False) -> Path:
    """Score the model as it is at a saved step, in this process, by the scoring of
    `wqk score` (wqk.scoring.score: its state_dict through the in-memory store and the
    adapter of its model_type; the q/k matrices too when asked). Identity as `wqk score`
    gives the step's checkpoint, which must be written already: its name (step_name) and
    the hash of its model.safetensors. Writes scores_path (and matrices_path) atomically;
    returns the former."""
    import torch

    from ..checkpoints.provenance import hash_files
    from ..score_table import write_scores
    from ..scoring import score

    weights = checkpoint_dir(run_dir, step) / "model.safetensors"
    out = scores_path(run_dir, step)
    out.parent.mkdir(parents=True, exist_ok=True)
    m_out = matrices_path(run_dir, step) if matrices else None
    if m_out is not None:
        m_out.parent.mkdir(parents=True, exist_ok=True)
    # Training runs with deterministic algorithms required; the scorer's kernels are
    # deterministic (matmuls, sums), but a CUDA kernel torch cannot certify must not stop a
    # run at its first saved step: it only warns while scoring.
    strict = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(strict, warn_only=True)
    try:
        scored = score(
            model,
            name=step_name(run_dir, step),
            provenance=f"xxh3:{hash_files([weights])}",
            device=device,
            progress=False,
            matrices_out=m_out,
        )
    finally:
        torch.use_deterministic_algorithms(strict, warn_only=warn_only)
    write_scores(scored.table, out)
    return out


def _check_scores(run_dir: Path, steps: list[int]) -> None:
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


# --- training ---------------------------------------------------------------------------


def train(cfg: TrainConfig) -> dict:
    """Train (or resume) the run in cfg.out; returns the done.json record.

    Process-wide torch settings (deterministic algorithms, thread count) are restored after."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    import torch

    deterministic, threads = (
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
    )
    try:
        return _train(cfg)
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)


def _train(cfg: TrainConfig) -> dict:
    import torch
    from transformers import get_linear_schedule_with_warmup
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # save_pretrained's per-checkpoint "Writing model shards" bar

    from .tokenizer import load as load_tokenizer

    run_dir = Path(cfg.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    record = _run_record(cfg)
    done_path = run_dir / "done.json"
    run_json = run_dir / "run.json"
    if run_json.is_file():
        old = json.loads(run_json.read_text())
        changed = [k for k in _RESUME_KEYS if old.get(k) != record.get(k)]
        if changed:
            raise WqkError(
                f"{run_dir} holds a run with other settings ({', '.join(changed)}); "
                "delete the folder or choose another --out"
            )
        if done_path.is_file():
            log.info("%s is complete (done.json); nothing to train", run_dir)
            _check_scores(run_dir, checkpoint_steps(cfg))
            if cfg.scores_out:
                publish_scores(run_dir, checkpoint_steps(cfg), cfg.scores_out)
            return json.loads(done_path.read_text())
    _write_json(run_json, record)

    device = resolve_device(cfg.device).type
    fp16 = cfg.fp16 and device == "cuda"
    if cfg.fp16 and not fp16:
        log.info("--fp16 ignored on %s", device)
    torch.use_deterministic_algorithms(True)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    if device == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    tok = load_tokenizer(cfg.tokenizer)
    ids = {t: tok.token_to_id(t) for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")}
    if any(v is None for v in ids.values()):
        raise WqkError(f"tokenizer {cfg.tokenizer} lacks a special token: {ids}")
    vocab_size = tok.get_vocab_size()
    data = chunk(load_tokens(cfg.corpus, tok), cfg.seq_len)
    log.info("%s: %d sequences of %d tokens", cfg.corpus, data.shape[0], cfg.seq_len)

    model = build_model(cfg, vocab_size, ids["[PAD]"]).to(device)
    optimizer = _optimizer(model, cfg)
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.warmup, cfg.steps)
    scaler = torch.amp.GradScaler("cuda", enabled=fp16)
    batches = torch.Generator().manual_seed(cfg.seed)
    masks = torch.Generator().manual_seed(cfg.seed + 1)
    torch.manual_seed(cfg.seed)  # dropout
    loss_sum, loss_n = 0.0, 0

    start = 0
    done_steps = complete_checkpoints(run_dir)
    if done_steps:
        start = done_steps[-1]
        folder = checkpoint_dir(run_dir, start)
        state = _load_trainer_state(folder / "trainer_state.pt")
        _load_weights(model, folder)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        batches.set_state(state["batches"])
        masks.set_state(state["masks"])
        torch.set_rng_state(state["torch"])
        if device == "cuda" and state.get("cuda") is not None:
            torch.cuda.set_rng_state(state["cuda"])
        loss_sum, loss_n = state["loss_sum"], state["loss_n"]
        log.info("resuming %s from step %d", run_dir, start)
    loss_path = run_dir / "loss.csv"
    rows = _loss_rows(loss_path, start)
    with open(loss_path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([["step", "loss", "lr"], *rows])

    def trainer_state() -> dict:
        return {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
            "batches": batches.get_state(),
            "masks": masks.get_state(),
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state() if device == "cuda" else None,
            "loss_sum": loss_sum,
            "loss_n": loss_n,
        }

    saves = set(checkpoint_steps(cfg))
    if not done_steps:
        _save(run_dir, 0, model, trainer_state())
    # The step resumed from is scored again: a kill may have come between its checkpoint and
    # its scores. The steps before it were scored before it was saved.
    for folder in (run_dir / "scores", run_dir / "matrices"):
        remove_partial_files(folder)
    score_step(model, run_dir, start, cfg.score_device, cfg.keep_matrices)
    _check_scores(run_dir, [s for s in sorted(saves) if s < start])
    prune_checkpoints(run_dir, cfg.keep_checkpoints)

    special = [ids["[PAD]"], ids["[CLS]"], ids["[SEP]"]]
    model.train()
    t0 = time.monotonic()
    last_loss = math.nan
    with (
        open(loss_path, "a", newline="") as loss_file,
        progress_bar(
            total=cfg.steps,
            initial=start,
            desc=run_dir.name,
            unit="step",
            dynamic_ncols=True,
        ) as bar,
    ):
        writer = csv.writer(loss_file, lineterminator="\n")
        for step in range(start + 1, cfg.steps + 1):
            step_loss = 0.0
            for _ in range(cfg.grad_accum):
                rows_ = torch.randint(data.shape[0], (cfg.batch_size,), generator=batches)
                input_ids = batch_of(data, rows_)
                if cfg.objective == "bidirectional":
                    input_ids, labels = mask_tokens(
                        input_ids,
                        masks,
                        mask_id=ids["[MASK]"],
                        vocab_size=vocab_size,
                        special_ids=special,
                    )
                else:
                    labels = input_ids  # BertLMHeadModel shifts them for next-token prediction
                with torch.autocast("cuda", dtype=torch.float16, enabled=fp16):
                    out = model(input_ids=input_ids.to(device), labels=labels.to(device))
                loss = out.loss / cfg.grad_accum
                scaler.scale(loss).backward()
                step_loss += loss.item()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            loss_sum += step_loss
            loss_n += 1
            if step % cfg.log_every == 0 or step == cfg.steps:
                last_loss = loss_sum / loss_n
                writer.writerow([step, repr(last_loss), repr(scheduler.get_last_lr()[0])])
                loss_file.flush()
                loss_sum, loss_n = 0.0, 0
                bar.set_postfix(loss=f"{last_loss:.3f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
            if step in saves:
                _save(run_dir, step, model, trainer_state())
                score_step(model, run_dir, step, cfg.score_device, cfg.keep_matrices)
                prune_checkpoints(run_dir, cfg.keep_checkpoints)  # after the new one is complete
            bar.update(1)

    final = _loss_rows(loss_path, cfg.steps)
    result = {
        "steps": cfg.steps,
        "final_loss": float(final[-1][1]) if final else None,
        "checkpoints": [
            checkpoint_dir(run_dir, s).relative_to(run_dir).as_posix() for s in complete_checkpoints(run_dir)
        ],
        "scores": [scores_path(run_dir, s).relative_to(run_dir).as_posix() for s in sorted(saves)],
        "matrices": [
            matrices_path(run_dir, s).relative_to(run_dir).as_posix()
            for s in sorted(saves)
            if matrices_path(run_dir, s).is_file()
        ],
    }
    log.info(
        "%s: %d steps in %.1f s, final loss %s",
        run_dir,
        cfg.steps - start,
        time.monotonic() - t0,
        result["final_loss"],
    )
    if cfg.scores_out:
        publish_scores(run_dir, sorted(saves), cfg.scores_out)
    _write_json(done_path, result)
    return result
