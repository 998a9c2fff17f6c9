"""`wqk figure NAME --in key=path ... --out figures/NAME.pdf [--param key=value ...]`

Renders wqk.figures.NAME.draw(data, **params) to NAME.pdf and NAME.png (byte-identical
on rerun).
"""

from __future__ import annotations

import logging

from . import _render

log = logging.getLogger(__name__)


def add_arguments(p):
    _render.add_arguments(p, "figure", "draw", "output .pdf (a .png is written next to it)")


def run(args) -> int:
    from .. import figures

    module, kwargs, data = _render.prepare("figure", args, "draw")
    pdf, png = figures.save(module.draw(data, **kwargs), args.out)
    log.info("wrote %s and %s", pdf, png)
    return 0
