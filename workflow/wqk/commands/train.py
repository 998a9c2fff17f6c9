"""`wqk train`: train a BERT-style encoder (bidirectional) or decoder (autoregressive) from scratch.

Every saved step is scored in this process (the scorer of `wqk score`, on the model's own
tensors) into RUN/scores/step-NNNNNN.parquet; only the last --keep-checkpoints checkpoints
are kept, for resuming. Rerunning an interrupted job resumes from its last complete
checkpoint; a finished run (done.json present) is not trained again (its scores are copied
to --scores-out, if given).
"""

from __future__ import annotations

from ..training.train import INITS, OBJECTIVES, TrainConfig


def add_arguments(p) -> None:
    p.add_argument(
        "--corpus",
        required=True,
        help="token ids from `wqk corpus --tokenizer` (.npy, memory-mapped), or a text file (tokenised first)",
    )
    p.add_argument(
        "--tokenizer",
        required=True,
        help="folder from `wqk tokenizer` (tokenizer.json)",
    )
    p.add_argument("--objective", choices=OBJECTIVES, required=True)
    p.add_argument(
        "--init",
        choices=INITS,
        default="default",
        help="symmetric: W_q := W_k at initialisation",
    )
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--steps", type=int, default=1000, help="optimizer steps")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument(
        "--save-every",
        type=int,
        default=100,
        help="save and score every N steps (and at 0 and the end)",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=int,
        default=1,
        help="checkpoints kept for resuming: the last N (0: every one; default 1)",
    )
    p.add_argument(
        "--keep-matrices",
        action="store_true",
        help="also keep the q/k matrices of every saved step (RUN/matrices/step-N.parquet)",
    )
    p.add_argument("--log-every", type=int, default=10, help="log the mean loss every N steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--size",
        default="",
        help="size label for summaries (default L{layers}-H{hidden})",
    )
    p.add_argument(
        "--dataset",
        default="",
        help="dataset label for summaries (default: corpus file stem)",
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument(
        "--score-device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the saved steps are scored",
    )
    p.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: its default)")
    p.add_argument("--fp16", action="store_true", help="mixed precision (CUDA only)")
    p.add_argument("--out", required=True, help="run folder")
    p.add_argument(
        "--scores-out",
        default="",
        help="folder to copy the scores of every saved step to once the run is complete"
        " (its other step-*.parquet files are removed)",
    )


def run(args) -> int:
    from ..atomic import check_writable
    from ..contracts import resolve_device
    from ..training.train import train

    check_writable(args.out, folder=True)  # a run folder: new, or an interrupted run to resume
    if args.scores_out:
        check_writable(args.scores_out, "--scores-out", folder=True)
    resolve_device(args.device)
    resolve_device(args.score_device)
    cfg = TrainConfig(
        corpus=args.corpus,
        tokenizer=args.tokenizer,
        out=args.out,
        objective=args.objective,
        init=args.init,
        layers=args.layers,
        hidden=args.hidden,
        heads=args.heads,
        intermediate=args.intermediate,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        steps=args.steps,
        lr=args.lr,
        warmup=args.warmup,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        save_every=args.save_every,
        log_every=args.log_every,
        seed=args.seed,
        size=args.size,
        dataset=args.dataset,
        device=args.device,
        fp16=args.fp16,
        threads=args.threads,
        keep_checkpoints=args.keep_checkpoints,
        keep_matrices=args.keep_matrices,
        score_device=args.score_device,
        scores_out=args.scores_out,
    )
    train(cfg)
    return 0
