"""`wqk train-summary`: training runs and the scores of their saved steps -> summary.csv, layers.csv, losses.csv.

With --scores, the scores Parquet files given (or every .parquet file of the folders given:
the --scores-out folders of `wqk train`, or files of `wqk score RUN/checkpoints/step-N`) are
read. Without, the scores each run wrote for itself (RUN/scores/) are read; a run without
them (trained before `wqk train` scored its steps) has its complete checkpoints scored here.
"""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--runs", nargs="+", required=True, help="run folders written by `wqk train`")
    p.add_argument(
        "--scores",
        nargs="*",
        default=None,
        help="scores Parquet files of the runs' saved steps, or folders of them",
    )
    p.add_argument(
        "--out",
        required=True,
        help="summary CSV (e.g. results/training/summary.csv)",
    )
    p.add_argument(
        "--layers-out",
        help="per-layer CSV (default: layers.csv next to --out)",
    )
    p.add_argument(
        "--losses-out",
        help="loss-curve CSV (default: losses.csv next to --out)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        help="device for in-process scoring (auto, cpu, cuda)",
    )


def run(args) -> int:
    from ..atomic import check_writable
    from ..contracts import resolve_device
    from ..training.summary import summarize, write_csv

    out = check_writable(args.out)
    layers_out = check_writable(args.layers_out or out.with_name("layers.csv"), "--layers-out")
    losses_out = check_writable(args.losses_out or out.with_name("losses.csv"), "--losses-out")
    if not args.scores:  # only scoring checkpoints here uses the device (and torch): checked before the work
        resolve_device(args.device)
    summary, layers, losses = summarize(args.runs, args.scores, device=args.device)
    write_csv(layers, layers_out)
    write_csv(losses, losses_out)
    write_csv(summary, out)
    last = summary.sort_values("step").groupby("run").tail(1)
    cols = ["run", "step", "loss", "symmetry_median", "directionality_median"]
    print(last[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0
