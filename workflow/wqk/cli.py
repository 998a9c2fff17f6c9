"""`wqk <command> ...`: every pipeline step, runnable by hand.

Each command lives in its own module exposing `add_arguments(parser)` and `run(args)`;
this file only dispatches, so modules import (torch, transformers) only when used.

Exit codes: 0 done; 1 the run failed (a WqkError: one line naming the way out; any other
error: one line too, its traceback with -v); 2 a usage error (argparse: unknown command or
option, missing argument).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import logging
import os
import sys
import traceback

from .errors import WqkError
from .progress import set_quiet

COMMANDS = {
    # name: (module, one-line help)
    "extract": ("wqk.commands.extract", "checkpoint -> per-head Q_h, K_h Parquet"),
    "score": ("wqk.commands.score", "matrices Parquet (or any checkpoint source) -> scores Parquet"),
    "metrics": ("wqk.commands.metrics", "list the metrics `wqk score --metrics` can compute"),
    "tiny": ("wqk.commands.tiny", "build a tiny random model of a model_type (safetensors)"),
    "records": ("wqk.commands.records", "architecture records: hand, derived from transformers' forward, or refused"),
    "fetch": ("wqk.commands.fetch", "download only what extraction needs into the cache"),
    "pin": ("wqk.commands.pin", "pin a catalogue's hub revisions to commit shas, in place"),
    "catalogue": ("wqk.commands.catalogue", "a catalogue of the hub's models, from its listing"),
    "null": ("wqk.commands.null", "scores of random Gaussian Q, K with a model's shapes"),
    "quantisation": ("wqk.commands.quantisation", "what each GGUF quant type does to a float checkpoint's scores"),
    "aggregate": ("wqk.commands.aggregate", "scores of many models -> per-model statistics"),
    "figure": ("wqk.commands.figure", "render one figure from the aggregates"),
    "table": ("wqk.commands.table", "render one table from the aggregates"),
    "validate": ("wqk.commands.validate", "compare our scores with the paper's"),
    "corpus": ("wqk.commands.corpus", "build a training corpus (token ids .npy, or text)"),
    "tokenizer": ("wqk.commands.tokenizer", "train or fetch the training tokenizer"),
    "train": ("wqk.commands.train", "train a BERT-style encoder or decoder from scratch"),
    "train-summary": ("wqk.commands.train_summary", "scores and losses of training runs -> summary"),
    "explorer": ("wqk.commands.explorer", "the aggregates -> an interactive page of every head (no network)"),
    "release": ("wqk.commands.release", "a run's results -> a citable dataset bundle (card, Croissant, SHA256SUMS)"),
}


def _reuse_freed_memory() -> None:
    """Scoring allocates and frees the same large tensors once per layer. glibc hands each
    one back to the kernel (mmap) and the next layer page-faults it in afresh: a third of
    the run time on CPU. Keep freed memory in the heap instead (glibc only)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(-4, 0)  # M_MMAP_MAX: serve large blocks from the heap
    libc.mallopt(-1, 2**31 - 1)  # M_TRIM_THRESHOLD: do not shrink the heap after each free


def version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("wqk")
    except importlib.metadata.PackageNotFoundError:
        from .version import __version__

        return __version__


class _Version(argparse.Action):
    """--version, looked up only when asked (not on every start)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"wqk {version()}")
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wqk", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging; tracebacks of unexpected errors")
    parser.add_argument("--version", action=_Version)
    parser.add_argument(
        "-q", "--quiet", dest="no_bars", action="store_true", help="no progress bars (else drawn on a terminal only)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    modules = {}
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_)
        if name == chosen:
            modules[name] = importlib.import_module(module)
            modules[name].add_arguments(p)
    args = parser.parse_args(argv)
    set_quiet(args.no_bars)  # every bar of the command (wqk.progress)
    _reuse_freed_memory()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # one INFO line per HTTP request from the hub's client drowns what wqk says; -v shows them
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
        logging.getLogger(name).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        return int(modules[args.command].run(args) or 0)
    except WqkError as e:
        print(f"wqk {args.command}: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # not foreseen: still one line, the traceback on demand
        if args.verbose:
            traceback.print_exc()
        message = " ".join(str(e).split()) or "(no message)"
        hint = "" if args.verbose else f" (rerun as `wqk -v {args.command} ...` for the traceback)"
        print(f"wqk {args.command}: error: {type(e).__name__}: {message}{hint}", file=sys.stderr)
        return 1


def entry() -> None:
    """The console script: main(), then exit without the interpreter's teardown.

    Tearing down torch's modules at exit takes about 0.4 s, a tenth of scoring a 2 GB
    model. Every output is written and closed by then; stdio and logging are flushed here.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    entry()
