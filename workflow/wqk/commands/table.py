"""`wqk table NAME --in key=path ... --out results/tables/NAME [--param key=value ...]`

Builds wqk.tables.NAME.build(data, **params) and writes NAME.csv, NAME.md and NAME.tex.
"""

from __future__ import annotations

import logging

from .. import tables
from ._inputs import load_inputs, pairs, params

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("name", help="table module in wqk.tables (e.g. scores_language)")
    p.add_argument("--in", dest="inputs", nargs="+", default=[], metavar="KEY=PATH", help="inputs by key")
    p.add_argument("--param", dest="params", nargs="*", default=[], metavar="KEY=VALUE", help="build() keywords")
    p.add_argument("--out", required=True, help="output stem: writes STEM.csv, STEM.md, STEM.tex")


def run(args) -> int:
    module = tables.get(args.name)
    kwargs = params(args.params)
    data = load_inputs(module, pairs(args.inputs, "--in"), kwargs)
    df = module.build(data, **kwargs)
    caption = getattr(module, "CAPTION", None)
    for path in tables.write(df, args.out, caption=caption):
        log.info("wrote %s", path)
    return 0
