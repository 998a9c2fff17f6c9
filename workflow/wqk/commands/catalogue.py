"""`wqk catalogue [filters] --out CATALOGUE.tsv`: a catalogue of the hub's models, from its listing
(GET /api/models; HF_ENDPOINT, HF_TOKEN as `wqk fetch` reads them), most downloaded first.

Filters asked of the hub: --author, --library, --pipeline-tag, --search, --gated/--not-gated,
--min-params/--max-params (the safetensors count: 125M, 7B, 1.5B or digits), one --model-type (as
a tag). Checked here: --model-type (each given), --min-downloads, the parameter range again, and
--limit (the first N models that pass, lines and comment lines alike). Each model is one line
pinned to its listed commit, or a comment line `# <hub id>\t<why it is not scored>`; both in the
order of the hub ids (wqk.hub_catalogue). The file loads as any catalogue (`catalogue:` in a config).
"""

from __future__ import annotations

import re
import shlex
import sys

from ..errors import WqkError

_COUNT = re.compile(r"(\d+(?:\.\d+)?)\s*([KMBT]?)", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
FLAGS = ("author", "library", "pipeline_tag", "search", "model_type", "min_downloads", "min_params", "max_params")


def count(text: str) -> int:
    """A count as written on the command line: 350M, 1.5B, 7B, 125000000."""
    import argparse

    m = _COUNT.fullmatch(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (write 350M, 1.5B, 7B or the digits)")
    return round(float(m.group(1)) * _SUFFIX[m.group(2).upper()])


def add_arguments(p) -> None:
    p.add_argument("--out", default="-", help="the catalogue TSV to write (default: standard output)")
    p.add_argument("--author", help="the models of one user or organisation")
    p.add_argument("--library", help="the hub's library tag, e.g. transformers")
    p.add_argument("--pipeline-tag", help="e.g. text-generation, fill-mask, automatic-speech-recognition")
    p.add_argument("--search", help="a part of the hub id (any case)")
    p.add_argument("--model-type", action="append", default=[], help="config.json's model_type (repeat for several)")
    gated = p.add_mutually_exclusive_group()
    gated.add_argument("--gated", dest="gated", action="store_true", default=None, help="only gated models")
    gated.add_argument("--not-gated", dest="gated", action="store_false", help="no gated models")
    p.add_argument("--min-downloads", type=count, default=0, help="downloads in the hub's last 30 days")
    p.add_argument("--min-params", type=count, help="fewest parameters (safetensors count)")
    p.add_argument("--max-params", type=count, help="most parameters (safetensors count)")
    p.add_argument("--limit", type=count, help="at most this many models (lines and comment lines)")
    p.add_argument(
        "--revisions",
        help="also sweep each model's revisions along training: a pattern of its branches sampled to a count "
        "(step{N}~8, or step{N}~8log evenly in log step) or a list (step0,step1000); pinned against the hub's branches (wqk.sweeps)",
    )


def run(args) -> int:
    from ..atomic import check_writable, write_text
    from ..checkpoints.hub.client import Hub
    from ..checkpoints.hub.listing import Query
    from ..hub_catalogue import Filters, build, render

    to_stdout = args.out == "-"
    if not to_stdout:
        check_writable(args.out)
    query = Query(
        author=args.author,
        search=args.search,
        pipeline_tag=args.pipeline_tag,
        tags=(args.library,) if args.library else (),
        gated=args.gated,
        min_params=args.min_params,
        max_params=args.max_params,
    )
    filters = Filters(query, tuple(args.model_type), args.min_downloads, args.limit, args.revisions)
    entries = build(filters)
    if not entries:
        raise WqkError(f"the hub lists no model for {_given(args) or 'an empty query'}: widen the filters")
    rows = sum(e.row is not None for e in entries)
    endpoint = Hub.connect("the model listing").endpoint
    preamble = [
        f"Built by `wqk catalogue` from the model listing of {endpoint}: {_given(args) or 'no filter'}.",
        f"{len(entries)} models listed: {rows} lines, pinned to the commits listed, and {len(entries) - rows} "
        "commented out (# <hub id>, then why it is not scored). Columns as in hub_popular.tsv (config/README.md).",
    ]
    text = render(entries, preamble)
    if to_stdout:
        sys.stdout.write(text)
    else:
        write_text(args.out, text)
    print(
        f"catalogue: {len(entries)} models listed: {rows} lines, {len(entries) - rows} commented: {args.out}",
        file=sys.stderr,
    )
    if not rows:
        raise WqkError(f"none of the {len(entries)} models listed can be scored: their reasons are in {args.out}")
    return 0


def _given(args) -> str:
    """The filters as given on the command line, in a fixed order."""
    parts = []
    for name in FLAGS:
        values = getattr(args, name)
        for value in values if isinstance(values, list) else [values]:
            if value not in (None, 0):
                parts.append(f"--{name.replace('_', '-')} {shlex.quote(str(value))}")
    if args.gated is not None:
        parts.append("--gated" if args.gated else "--not-gated")
    if args.limit is not None:
        parts.append(f"--limit {args.limit}")
    if args.revisions:
        parts.append(f"--revisions {shlex.quote(args.revisions)}")
    return " ".join(parts)
