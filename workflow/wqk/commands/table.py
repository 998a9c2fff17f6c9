"""`wqk table NAME --in key=path ... --out results/tables/NAME [--param key=value ...]`

Builds wqk.tables.NAME.build(data, **params) and writes NAME.csv, NAME.md and NAME.tex.
"""

from __future__ import annotations

import logging

from . import _render

log = logging.getLogger(__name__)


def add_arguments(p):
    _render.add_arguments(p, "table", "build", "output stem: writes STEM.csv, STEM.md, STEM.tex")


def run(args) -> int:
    from .. import tables

    module, kwargs, data = _render.prepare("table", args, "build")
    for path in tables.write(module.build(data, **kwargs), args.out, caption=getattr(module, "CAPTION", None)):
        log.info("wrote %s", path)
    return 0
