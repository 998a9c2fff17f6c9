"""`wqk train`: train a BERT-style encoder (bidirectional) or decoder (autoregressive) from scratch.

Every saved step is scored in this process (the scorer of `wqk score`, on the model's own
tensors) into RUN/scores/step-NNNNNN.parquet; only the last --keep-checkpoints checkpoints
are kept, for resuming. Rerunning an interrupted job resumes from its last complete
checkpoint; a finished run (done.json present) is not trained again (its scores are copied
to --scores-out, if given). The options are the settings of wqk.training.spec.
"""

from __future__ import annotations

from ..training import spec


def add_arguments(p) -> None:
    spec.add_arguments(p)


def run(args) -> int:
    from ..atomic import check_writable
    from ..contracts import resolve_device
    from ..training.train import train

    check_writable(args.out, folder=True)  # a run folder: new, or an interrupted run to resume
    if args.scores_out:
        check_writable(args.scores_out, "--scores-out", folder=True)
    resolve_device(args.device)
    resolve_device(args.score_device)
    train(spec.from_args(args))
    return 0
