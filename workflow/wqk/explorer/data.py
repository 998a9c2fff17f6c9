"""The explorer's data: the aggregate tables as compact, JSON-ready dicts.

The index (every model and stack, its medians and quartiles: what the overview, the filters
and the search read) and one dict per model (its layers and heads as columns, and its null
reference's spread), loaded when the model is picked. Numbers are rounded once, here, so
that the bytes of the page do not depend on how a float would have been printed; NaN is null.
A model's columns are integers, the value times 10**decimals(column) (the page divides): the
per-head data are most of the page's size, and "-823" is half of "-0.08230000000000001".
The paper's two scores keep DECIMALS decimals; the spectra's shares and the rotary s(d), three;
the ranks, two; the follow-up families' columns, DECIMALS.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from ..aggregate import metric_columns
from ..contracts import METRICS, NULL_SUFFIX, stack_rank
from ..metric_catalogue import FOLLOW_UP_COLUMNS, SPECTRA_COLUMNS

DECIMALS = 4
FEWER_DECIMALS = {"stable_rank": 2, "effective_rank": 2, "spectral_radius": 3, "real_eig_share": 3,
                  "sym_positive_share": 3}  # fmt: skip
NULL_QUANTILES = {"q05": 0.05, "q25": 0.25, "q50": 0.5, "q75": 0.75, "q95": 0.95}
# Per-model columns beyond the paper's two: the spectra and the rotary s(d). The folded forms
# stay in the tables (the robustness table reads them), out of the page's size budget.
ROTARY_PREFIX = "rotary_symmetry_d"
SUMMARY = [f"{p}{m}_{s}" for p in ("", "head_") for m in METRICS for s in ("median", "q25", "q75")]


def decimals(column: str) -> int:
    return 3 if column.startswith(ROTARY_PREFIX) else FEWER_DECIMALS.get(column, DECIMALS)


def _finite(value) -> float | None:
    if value is None or pd.isna(value):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def number(value, places: int = DECIMALS) -> float | None:
    """A finite value rounded to `places` decimals (None for NaN: JSON null)."""
    v = _finite(value)
    return None if v is None else round(v, places) + 0.0  # + 0.0: -0.0 prints as 0.0


def scaled(value, column: str) -> int | None:
    """value * 10**decimals(column) as the integer of its decimal digits (what Python's
    f"{value:.{n}f}" prints, so that the page shows exactly those digits)."""
    v = _finite(value)
    return None if v is None else int(f"{v:.{decimals(column)}f}".replace(".", ""))


def explored(columns: Iterable[str]) -> list[str]:
    """The metric columns the page carries, in the tables' order; s(0) is the symmetry itself
    (the page draws it so), not carried twice."""
    rotary = [c for c in columns if c.startswith(ROTARY_PREFIX) and c != f"{ROTARY_PREFIX}0"]
    return [c for c in columns if c in METRICS or c in SPECTRA_COLUMNS or c in FOLLOW_UP_COLUMNS or c in rotary]


def _present(rows: pd.DataFrame, metrics: list[str]) -> list[str]:
    return [m for m in metrics if np.isfinite(rows[m].to_numpy(np.float64)).any()]


def _columns(rows: pd.DataFrame, keys: list[str], metrics: list[str]) -> dict[str, list]:
    out = {k: [int(v) for v in rows[k]] for k in keys}
    for m in _present(rows, metrics):
        out[m] = [scaled(v, m) for v in rows[m]]
    return out


def _stacks(df: pd.DataFrame) -> list[str]:
    return sorted(df["stack"].unique(), key=lambda s: (stack_rank(s), s))


def _quantiles(values) -> dict[str, float | None] | None:
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    return {k: number(np.quantile(values, q)) for k, q in NULL_QUANTILES.items()}


def null_spread(null: pd.DataFrame) -> dict[str, dict]:
    """The null reference's spread per stack and scope: {stack: {"heads"|"layers": {metric:
    {q05, q25, q50, q75, q95}}}}, for the paper's two and the spectra (rotary s(d) and the
    folded forms are NaN for random Q, K)."""
    metrics = [m for m in (*METRICS, *SPECTRA_COLUMNS) if m in null.columns]
    out: dict[str, dict] = {}
    for stack in _stacks(null):
        of_stack = null[null["stack"] == stack]
        entry = {}
        for scope, name in (("head", "heads"), ("layer", "layers")):
            rows = of_stack[of_stack["scope"] == scope]
            found = {m: q for m in metrics if (q := _quantiles(rows[m])) is not None}
            if found:
                entry[name] = found
        out[stack] = entry
    return out


def null_from_models(models: pd.DataFrame) -> dict[str, dict[str, dict]]:
    """Without the null reference's files: its quartiles as the models table carries them
    (null_{m}_* over layers, null_head_{m}_* over heads), per slug and stack."""
    out: dict[str, dict[str, dict]] = {}
    for row in models.itertuples(index=False):
        row = row._asdict()
        entry = {}
        for scope, prefix in (("heads", "null_head_"), ("layers", "null_")):
            found = {}
            for m in (*METRICS, *SPECTRA_COLUMNS):
                q = {
                    k: number(row.get(f"{prefix}{m}_{s}"))
                    for k, s in (("q25", "q25"), ("q50", "median"), ("q75", "q75"))
                }
                if any(v is not None for v in q.values()):
                    found[m] = q
            if found:
                entry[scope] = found
        if entry:
            out.setdefault(row["slug"], {})[row["stack"]] = entry
    return out


def read_null(null_dir: str | Path | None, slugs: Iterable[str]) -> dict[str, dict]:
    """The spread of each model's null reference, from NULL_DIR/<slug>.parquet (`wqk null`),
    by slug; models without a file are left out."""
    if null_dir is None:
        return {}
    out = {}
    for slug in slugs:
        path = Path(null_dir) / f"{slug}.parquet"
        if path.is_file():
            null = pd.read_parquet(path)
            null["model"] = null["model"].str.removesuffix(NULL_SUFFIX)
            out[slug] = null_spread(null)
    return out


def index(models: pd.DataFrame) -> list[dict]:
    """One entry per model (in the models table's order): what it is, and per stack its
    objective, counts and the medians and quartiles of the paper's two scores."""
    out: dict[str, dict] = {}
    for row in models.itertuples(index=False):
        row = row._asdict()
        entry = out.setdefault(
            row["slug"],
            {
                "slug": row["slug"],
                "model": row["model"],
                "family": row["family"],
                "modality": row["modality"],
                "n_params": None if pd.isna(row["n_params"]) else int(row["n_params"]),
                "synthetic": bool(row["synthetic"]),
                "stacks": [],
            },
        )
        stack = {
            "stack": row["stack"],
            "objective": row["objective"],
            "n_layers": int(row["n_layers"]),
            "n_heads": int(row.get("n_heads_total") or 0),
        }
        stack |= {c: number(row.get(c)) for c in SUMMARY}
        entry["stacks"].append(stack)
    for entry in out.values():
        entry["stacks"].sort(key=lambda s: (stack_rank(s["stack"]), s["stack"]))
    return list(out.values())


def per_model(layers: pd.DataFrame, heads: pd.DataFrame, null: dict[str, dict]) -> dict[str, dict]:
    """slug -> {"slug", "stacks": {stack: {"layers": columns, "heads": columns, "null": spread}}}."""
    layer_metrics = explored(metric_columns(layers))
    head_metrics = explored(metric_columns(heads))
    by_slug_layers = dict(tuple(layers.groupby("slug", sort=True)))
    by_slug_heads = dict(tuple(heads.groupby("slug", sort=True)))
    out = {}
    for slug in sorted(set(by_slug_layers) | set(by_slug_heads)):
        lay = by_slug_layers.get(slug, layers.iloc[:0])
        hea = by_slug_heads.get(slug, heads.iloc[:0])
        stacks = {}
        for stack in _stacks(pd.concat([lay[["stack"]], hea[["stack"]]])):
            l_rows = lay[lay["stack"] == stack].sort_values("layer", kind="stable")
            h_rows = hea[hea["stack"] == stack].sort_values(["layer", "head"], kind="stable")
            stacks[stack] = {
                "layers": _columns(l_rows, ["layer"], layer_metrics),
                "heads": _columns(h_rows, ["layer", "head"], head_metrics),
                "null": null.get(slug, {}).get(stack, {}),
            }
        out[slug] = {"slug": slug, "stacks": stacks}
    return out


def rotary_offsets(columns: Iterable[str]) -> list[int]:
    return sorted(int(c.removeprefix(ROTARY_PREFIX)) for c in columns if c.startswith(ROTARY_PREFIX))
