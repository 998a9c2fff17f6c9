"""`wqk figure NAME --in key=path ... --out figures/NAME.pdf [--param key=value ...]`

Renders wqk.figures.NAME.draw(data, **params) to NAME.pdf and NAME.png (byte-identical
on rerun).
"""

from __future__ import annotations

import logging

from .. import figures
from ._inputs import load_inputs, pairs, params

log = logging.getLogger(__name__)


def add_arguments(p):
    p.add_argument("name", help="figure module in wqk.figures (e.g. scores_vs_params)")
    p.add_argument("--in", dest="inputs", nargs="+", default=[], metavar="KEY=PATH", help="inputs by key")
    p.add_argument("--param", dest="params", nargs="*", default=[], metavar="KEY=VALUE", help="draw() keywords")
    p.add_argument("--out", required=True, help="output .pdf (a .png is written next to it)")


def run(args) -> int:
    module = figures.get(args.name)
    kwargs = params(args.params)
    data = load_inputs(module, pairs(args.inputs, "--in"), kwargs)
    fig = module.draw(data, **kwargs)
    pdf, png = figures.save(fig, args.out)
    log.info("wrote %s and %s", pdf, png)
    return 0
