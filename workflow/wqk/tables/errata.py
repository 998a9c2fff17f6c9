"""Errata: the paper's medians that differ from ours beyond the published precision, with the
value the authors' method gives on the same weights, the cause and whether it is proven.

data["comparison"]: results/validation/paper_comparison.csv (wqk validate).
"""

from __future__ import annotations

from ..validate import TOLERANCE, errata

CAPTION = (
    f"Errata: published medians that differ from ours by more than {TOLERANCE:g}: the published value, "
    "ours with the authors' method, ours, how far the figure point moves, and the cause (proven when the "
    "authors' method reproduces the published value)."
)


def build(data: dict):
    out = errata(data["comparison"])
    for c in ("paper", "authors_method", "ours", "point_moves_by"):
        out[c] = out[c].round(4)
    return out
