"""The metrics by name and the columns each writes, without torch: what option checks, the
workflow's parse-time config check and aggregation need. Also the interface of the modules
that compute them (spectra, rotary, folded): `register` binds a catalogued name to its
function, `Context` is what the function takes; wqk.metric_registry imports those modules
and runs them.

A column name with {d} stands for one column per rotary offset d (rotary_symmetry_d0, ...).
The catalogue's order is the order of the metric columns in every scores file and table.
"default" selects the cheap metrics; "all" adds those whose cost grows with the cube of the
layer width (layer_spectra), that score the form a second time (folded), and the follow-up
papers' families (FOLLOW_UPS; "follow_ups" selects the three); fingerprint_null (random draws
per head) only by its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import WqkError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .blocks import AttentionBlock
    from .metrics import Factors

PAPER = ("symmetry", "directionality")
SPECTRA_COLUMNS = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")
# the follow-up papers' families (wqk.fingerprint, wqk.bilinear_forms, wqk.qk_spectra): opt-in
FINGERPRINT_COLUMNS = (
    "dir_frac", "D_head", "imag_mass", "henrici", "cond_eig", "spectral_radius_raw", "content_pos_frac",
    "prin_angle_mean", "prin_angle_max", "rope_imag_frac", "freq_centroid", "hi_freq_dir",
)  # fmt: skip
BILINEAR_FORMS_COLUMNS = (
    "symmetric_energy", "profile_a", "profile_b", "profile_c", "profile_d", "pairing", "rho", "pairing_bound", "lobe_departure",
    "trace_ratio", "participation_ratio", "leading_share", "head_type",
)  # fmt: skip
QK_SPECTRA_COLUMNS = ("sv2", "sv2_min", "sv2_max", "sv2_mean", "sv2_std", "sv2_skew", "sv2_kurtosis")
# columns that hold a list of floats per row (list<double> in Parquet; null in rows without it), not one float
LIST_COLUMNS = frozenset({"sv2"})
FINGERPRINT_NULL_COLUMNS = tuple(
    f"{m}_{x}" for m in ("dir_frac", "D_head", "imag_mass", "henrici") for x in ("null_mean", "null_std", "z")
)
FOLLOW_UPS = ("fingerprint", "bilinear_forms", "qk_spectra")
FOLLOW_UP_COLUMNS = (*FINGERPRINT_COLUMNS, *BILINEAR_FORMS_COLUMNS, *QK_SPECTRA_COLUMNS)  # the three families'
# a family that publishes a column another computes selects that one too (their stable_rank: spectra's)
REQUIRES = {"bilinear_forms": ("spectra",), "fingerprint_null": ("fingerprint",)}


@dataclass(frozen=True)
class Entry:
    name: str
    columns: tuple[str, ...]
    cheap: bool


CATALOGUE: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry("symmetry", ("symmetry",), True),
        Entry("directionality", ("directionality", "E_r", "E_c"), True),
        Entry("spectra", SPECTRA_COLUMNS, True),
        Entry("layer_spectra", SPECTRA_COLUMNS, False),  # the layer form's: spectra's columns, layer rows
        Entry("rotary_symmetry", ("rotary_symmetry_d{d}",), True),
        Entry("folded", ("symmetry_gain", "directionality_gain", "symmetry_bias", "directionality_bias"), False),
        Entry("fingerprint", FINGERPRINT_COLUMNS, False),
        Entry("bilinear_forms", BILINEAR_FORMS_COLUMNS, False),
        Entry("qk_spectra", QK_SPECTRA_COLUMNS, False),
        Entry("fingerprint_null", FINGERPRINT_NULL_COLUMNS, False),  # random draws per head: opt-in alone
    )
}


def default_metrics() -> tuple[str, ...]:
    return tuple(name for name, e in CATALOGUE.items() if e.cheap)


def select(spec: str | Iterable[str] | None = None) -> tuple[str, ...]:
    """Metric names from "default", "all", or names (a comma-separated string or a list, which
    may include "default"), in catalogue order, the paper's two always included."""
    names = spec.split(",") if isinstance(spec, str) else list(spec or ["default"])
    chosen = set(PAPER)
    for name in (str(n).strip() for n in names):
        if name == "default":
            chosen |= set(default_metrics())
        elif name == "all":
            chosen |= set(CATALOGUE) - {"fingerprint_null"}
        elif name == "follow_ups":
            chosen |= {m for f in FOLLOW_UPS for m in (f, *REQUIRES.get(f, ()))}
        elif name in CATALOGUE:
            chosen |= {name, *REQUIRES.get(name, ())}
        elif name:
            raise WqkError(f"unknown metric {name!r}; registered: default, all, follow_ups, {', '.join(CATALOGUE)}")
    return tuple(name for name in CATALOGUE if name in chosen)


def score_flags(metrics: str | Iterable[str], rotary_offsets: Iterable[int] | None) -> str:
    """`wqk score` flags of the config's score.metrics and score.rotary_offsets; none for the
    defaults ("default", None), which `wqk score` applies itself."""
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    flags = []
    if metrics != ["default"]:
        flags.append(f"--metrics {','.join(metrics)}")
    if rotary_offsets is not None:
        flags.append(f"--rotary-offsets {','.join(str(int(d)) for d in rotary_offsets)}")
    return " ".join(flags)


_OFFSET = re.compile(r"(.*)_d(\d+)$")
_NUMBERED = re.compile(r"(.*?)(\d+)")


def metrics_of_columns(columns: Iterable[str]) -> tuple[str, ...]:
    """The metrics whose columns are among `columns` (those of a scores file)."""
    declared = {_OFFSET.sub(r"\1_d{d}", c) for c in columns}
    found, claimed = [], set()
    for name, e in CATALOGUE.items():
        if declared & set(e.columns) - claimed:  # layer_spectra's columns are spectra's
            found.append(name)
        claimed |= set(e.columns)
    return select(found)


def column_order(column: str) -> tuple:
    """Sort key of a catalogued metric column: its metric's place in the catalogue, its place
    among that metric's columns, then the rotary offset; None for a column not catalogued."""
    m = _OFFSET.fullmatch(column)
    declared = f"{m.group(1)}_d{{d}}" if m else column
    for rank, entry in enumerate(CATALOGUE.values()):
        if declared in entry.columns:
            return (rank, entry.columns.index(declared), int(m.group(2)) if m else 0)
    return None


def order_columns(columns: Iterable[str]) -> list[str]:
    """Metric columns in the one order of scores files and tables: catalogued ones by
    column_order, then the others in order of first appearance, a numbered family (x_d0,
    x_d1, ...) kept together in numeric order at its first member's place. The order does
    not depend on which file (with which offsets) came first."""
    columns = list(dict.fromkeys(columns))

    def stem(c):
        m = _NUMBERED.fullmatch(c)
        return (m.group(1), int(m.group(2))) if m else (c, -1)

    first: dict[str, int] = {}
    for i, c in enumerate(columns):
        first.setdefault(stem(c)[0], i)

    def key(c):
        known = column_order(c)
        return (0, *known, 0, "") if known is not None else (1, first[stem(c)[0]], stem(c)[1], 0, c)

    return sorted(columns, key=key)


# ---------------------------------------------------------------- the computing side
@dataclass
class Context:
    """What a metric's function takes: the block, its factored quantities, the options."""

    block: AttentionBlock
    factors: Factors
    n_std: float
    dtype: torch.dtype
    rotary_offsets: tuple[int, ...] | None  # None: powers of two below the model's context
    seed_key: str = ""  # the model's name: what seeds the random draws of a metric (with stack, layer, head)


Result = tuple[dict[str, "np.ndarray"], dict[str, "np.ndarray"]]


@dataclass(frozen=True)
class Metric:
    name: str
    columns: tuple[str, ...]
    compute: Callable[[Context], Result] | None  # None: the paper's two (wqk.metrics)
    cheap: bool
    summary: str  # one sentence and the formula: README, `wqk metrics`


REGISTERED: dict[str, Metric] = {
    "symmetry": Metric(
        "symmetry",
        CATALOGUE["symmetry"].columns,
        None,
        True,
        "<M, M^T>_F / ||M||_F^2: 1 symmetric, -1 antisymmetric (the paper's).",
    ),
    "directionality": Metric(
        "directionality",
        CATALOGUE["directionality"].columns,
        None,
        True,
        "(E_r - E_c) / (E_r + E_c), E the excess of row (column) norms over mean + 2 std: < 0 column-dominant "
        "(the paper's).",
    ),
}


def register(name: str, columns: tuple[str, ...], summary: str, cheap: bool = True):
    """Bind the catalogued metric `name` to the decorated function; its columns and cost
    must be the catalogue's (CATALOGUE, which option checks read without importing it)."""

    def wrap(fn: Callable[[Context], Result]) -> Callable[[Context], Result]:
        if name in REGISTERED:
            raise RuntimeError(f"metric {name!r} registered twice")
        entry = CATALOGUE.get(name)
        if entry is None or entry.columns != tuple(columns) or entry.cheap != cheap:
            raise RuntimeError(
                f"metric {name!r} ({fn.__module__}) registers columns {tuple(columns)}, cheap={cheap}; "
                f"wqk/metric_catalogue.py CATALOGUE has {entry}: make the two agree"
            )
        REGISTERED[name] = Metric(name, tuple(columns), fn, cheap, summary)
        return fn

    return wrap
