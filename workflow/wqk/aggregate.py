"""Scores of many models -> per-model, per-group, per-layer and per-head tables.

The paper's statistic is the median and interquartile range over LAYERS (scope="layer"
rows of the scores Parquet); the same over HEADS is our extension (columns `head_*`).
Quantiles are numpy's (linear interpolation, wqk.contracts.quartiles); NaN scores (zero or
non-square forms, see wqk.metrics) are left out and counted. Models are joined to their
catalogue line (wqk.catalogue) by model_id, else by slug.

Metrics beyond the paper's two (spectra, rotary-aware symmetry, folded forms: whatever the
metric registry of `wqk score` appended) are every float64 column of a scores frame outside
wqk.contracts.SCORES_SCHEMA (`metric_columns`). They are carried after the paper's columns,
which keep their names and order whichever others are present. In the models table, {m}_*
over layers and head_{m}_* over heads for each such metric whose layer (head) rows are not
all NaN; null_{m}_* and null_head_{m}_* likewise from the null reference. The long tables
carry every one present; the groups table carries the paper's two and, where they were
computed, the follow-up papers' families (the quartiles of the per-model head medians,
head_{m}_*, and the shares of the head types: type_I_plus, type_II, type_I_minus).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .atomic import atomic_path
from .catalogue import CatalogueError, check_catalogue, read_catalogue
from .contracts import CROSS, METRICS, NULL_SUFFIX, SCORES_SCHEMA, quartiles, stack_rank
from .errors import WqkError
from .ids import slug as make_slug
from .metric_catalogue import FOLLOW_UP_COLUMNS, LIST_COLUMNS, order_columns
from .sweeps import SWEEP_COLUMNS

__all__ = [
    "CatalogueError",
    "aggregate",
    "check_catalogue",
    "metric_columns",
    "read_catalogue",
    "read_scores",
    "write_outputs",
]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- metric columns
# Columns aggregation adds to scores rows (annotate, the long tables): never metrics.
_ANNOTATIONS = ("slug", "family", "modality", "n_params", "figure", "paper_stacks", "objective", "relative_depth")
_NOT_METRICS = frozenset(SCORES_SCHEMA.names) | frozenset(_ANNOTATIONS) | frozenset(SWEEP_COLUMNS)


def metric_columns(df: pd.DataFrame) -> list[str]:
    """The metric columns of a scores frame (or of a long table of aggregate): the paper's
    `symmetry`, `directionality`, then every float64 column that is neither in
    wqk.contracts.SCORES_SCHEMA nor added by aggregation (spectra, rotary_symmetry_d*, folded
    forms: what the metric registry of `wqk score` appended), in the one order of scores files
    and tables (wqk.metric_catalogue.order_columns), whichever file came first."""
    extra = [c for c in df.columns if c not in _NOT_METRICS and c not in METRICS and df[c].dtype == np.float64]
    return [*METRICS, *order_columns(extra)]


def extra_metrics(df: pd.DataFrame) -> list[str]:
    """metric_columns beyond the paper's two."""
    return [m for m in metric_columns(df) if m not in METRICS]


def _not_all_nan(df: pd.DataFrame, metrics: list[str]) -> list[str]:
    return [m for m in metrics if np.isfinite(df[m].to_numpy(np.float64)).any()]


# ---------------------------------------------------------------- statistics
def summarise(df: pd.DataFrame, by: list[str], metrics=METRICS, prefix: str = "") -> pd.DataFrame:
    """Median and quartiles of each metric per group: columns {prefix}{metric}_{median,q25,q75}."""
    rows = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        for m in metrics:
            med, q25, q75 = quartiles(g[m])
            row |= {f"{prefix}{m}_median": med, f"{prefix}{m}_q25": q25, f"{prefix}{m}_q75": q75}
        rows.append(row)
    cols = list(by) + [f"{prefix}{m}_{s}" for m in metrics for s in ("median", "q25", "q75")]
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------- inputs
def read_scores(paths) -> pd.DataFrame:
    """The scores files as one frame. Read as Arrow tables and converted to pandas once: the
    same frame as concatenating each file's pandas frame (columns in order of appearance, a
    column one file lacks as missing values), at half the time for thousands of files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for p in paths:
        try:
            tables.append(pq.read_table(p))
        except FileNotFoundError as e:
            raise WqkError(f"scores file {p} not found: run `wqk score` for that model first") from e
    if not tables:
        raise WqkError("no scores files given (--scores A.parquet B.parquet ...)")
    df = pa.concat_tables(tables, promote_options="default").to_pandas()
    need = {"model", "stack", "layer", "n_layers", "scope", "head", "symmetry", "directionality"}
    missing = need - set(df.columns)
    if missing:
        raise WqkError(f"scores files lack column(s) {sorted(missing)}: are they `wqk score` outputs?")
    return df


def _catalogue_row_of(models: list[str], cat: pd.DataFrame) -> dict[str, int]:
    """Map each scores `model` to its catalogue row: by model_id, else by slug."""
    by_id = {m: i for i, m in enumerate(cat["model_id"])}
    by_slug = {s: i for i, s in enumerate(cat["slug"])}
    out, unknown = {}, []
    for m in models:
        i = by_id.get(m, by_slug.get(make_slug(m), by_slug.get(m)))
        if i is None:
            unknown.append(m)
        else:
            out[m] = i
    if unknown:
        raise CatalogueError(f"model(s) {unknown} have scores but no catalogue line: add them to the catalogue")
    return out


def annotate(scores: pd.DataFrame, cat: pd.DataFrame) -> pd.DataFrame:
    """Scores joined with the catalogue: slug, family, modality, n_params, figure, paper_stacks,
    objective."""
    cat = check_catalogue(cat)
    rows = _catalogue_row_of(sorted(scores["model"].unique()), cat)
    idx = scores["model"].map(rows)
    out = scores.copy()
    info = cat.iloc[idx.to_numpy()].reset_index(drop=True)
    for c in ("slug", "family", "modality", "n_params", "figure", "paper_stacks"):
        out[c] = info[c].to_numpy()
    for c in _swept_columns(cat):
        out[c] = info[c].to_numpy()
    from_scores = out["synthetic"].astype(bool).to_numpy() if "synthetic" in out else False
    out["synthetic"] = info["synthetic"].to_numpy(bool) | from_scores
    objective = np.empty(len(out), dtype=object)
    for stack in out["stack"].unique():
        col = f"objective_{stack}"
        sel = (out["stack"] == stack).to_numpy()
        vals = info[col].to_numpy()[sel] if col in info else np.full(sel.sum(), "")
        objective[sel] = vals
    empty = objective == ""
    objective[empty & (out["stack"] == "cross").to_numpy()] = CROSS
    empty = objective == ""
    if empty.any():
        bad = sorted(set(zip(out["model"][empty], out["stack"][empty])))
        log.warning("no objective in the catalogue for %s: marked 'unknown'", bad)
        objective[empty] = "unknown"
    out["objective"] = objective
    return out


def _swept_columns(df: pd.DataFrame) -> list[str]:
    """`sweep` and `step` where the catalogue has them (a revision sweep's, wqk.sweeps)."""
    return [c for c in SWEEP_COLUMNS if c in df.columns]


# ---------------------------------------------------------------- tables
def _sort(df: pd.DataFrame, keys=("model", "stack")) -> pd.DataFrame:
    keys = [k for k in keys if k in df.columns]
    order = df[keys].copy()
    if "stack" in order:  # encoder, decoder, cross: reading order, not alphabetical
        order.insert(keys.index("stack"), "_stack_rank", order["stack"].map(stack_rank))
    idx = order.sort_values(list(order.columns), kind="stable").index
    return df.loc[idx].reset_index(drop=True)


_META = ["objective", "modality", "family", "n_params", "synthetic"]


def _long_table(ann: pd.DataFrame, scope: str, keys: list[str]) -> pd.DataFrame:
    """Rows of one scope with relative depth layer / (n_layers - 1), in reading order."""
    rows = ann[ann["scope"] == scope].copy()
    n = rows["n_layers"].astype(int)
    rows["relative_depth"] = np.where(n > 1, rows["layer"].astype(float) / (n - 1).clip(lower=1), 0.0)
    cols = [*keys, "n_layers", "relative_depth", "symmetry", "directionality", *_META, *extra_metrics(ann)]
    if scope == "head":  # a list per head (qk_spectra's sigma^2); the layer rows have none
        cols += [c for c in order_columns(LIST_COLUMNS) if c in rows]
    rows = rows[["model", "slug", *cols[1:]]].astype({k: "int32" for k in (*keys[2:], "n_layers")})
    return _sort(rows, keys)


def layer_table(ann: pd.DataFrame) -> pd.DataFrame:
    """Long table of per-layer scores."""
    return _long_table(ann, "layer", ["model", "stack", "layer"])


def head_table(ann: pd.DataFrame) -> pd.DataFrame:
    """Long table of per-head scores."""
    return _long_table(ann, "head", ["model", "stack", "layer", "head"])


def model_table(ann: pd.DataFrame, null: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per model x stack: quartiles over layers (paper) and over heads (head_*)."""
    keys = ["model", "stack"]
    meta_cols = ["slug", "family", "objective", "modality", "n_params", "figure", "paper_stacks", "synthetic"]
    meta_cols[1:1] = _swept_columns(ann)
    lay = ann[ann["scope"] == "layer"]
    meta = lay.groupby(keys, sort=True)[meta_cols].first().reset_index()
    # the figures mark these rows among thousands of others (wqk.figures._density)
    paper = [stack in str(stacks).split(",") for stack, stacks in zip(meta["stack"], meta["paper_stacks"])]
    meta.insert(meta.columns.get_loc("paper_stacks"), "in_paper", paper)
    meta = meta.drop(columns="paper_stacks")
    counts = lay.groupby(keys, sort=True).agg(
        n_layers=("layer", "nunique"), n_layers_nan=("symmetry", lambda s: int(s.isna().sum()))
    )
    out = meta.merge(counts.reset_index(), on=keys)
    out = out.merge(summarise(lay, keys), on=keys)
    heads = ann[ann["scope"] == "head"]
    head_stats = summarise(heads, keys, prefix="head_")
    n_heads = heads.groupby(keys, sort=True).size().rename("n_heads_total").reset_index()
    out = out.merge(n_heads, on=keys, how="left").merge(head_stats, on=keys, how="left")
    if null is not None:
        out = out.merge(null_columns(null), on=keys, how="left")
    # beyond the paper: after every column above, so that those keep their order
    extra = extra_metrics(ann)
    if lay_extra := _not_all_nan(lay, extra):
        out = out.merge(summarise(lay, keys, lay_extra), on=keys, how="left")
    if head_extra := _not_all_nan(heads, extra):
        out = out.merge(summarise(heads, keys, head_extra, prefix="head_"), on=keys, how="left")
    if null is not None and not (extra_null := null_extra_columns(null)).empty:
        out = out.merge(extra_null, on=keys, how="left")
    if "storage" in lay:  # quantised factors (a GGUF): what they were stored as, per model and stack
        stored = lay.groupby(keys, sort=True)["storage"].agg(lambda s: ", ".join(sorted(set(s.dropna()))) or None)
        out = out.merge(stored.reset_index(), on=keys, how="left")
    out["n_heads_total"] = out["n_heads_total"].fillna(0).astype("int64")
    out = out.astype({"n_layers": "int32", "n_layers_nan": "int32", "synthetic": bool})
    first = ["model", "slug", "family", "stack", "objective", "modality", "n_params", "synthetic", "n_layers"]
    first[2:2] = _swept_columns(ann)
    rest = [c for c in out.columns if c not in first]
    return _sort(out[first + rest])


def _null_rows(null_scores: pd.DataFrame, scope: str) -> pd.DataFrame:
    rows = null_scores[null_scores["scope"] == scope].copy()
    rows["model"] = rows["model"].str.removesuffix(NULL_SUFFIX)
    return rows


def null_columns(null_scores: pd.DataFrame) -> pd.DataFrame:
    """null_{metric}_{median,q25,q75} per (model, stack) from `wqk null` outputs."""
    return summarise(_null_rows(null_scores, "layer"), ["model", "stack"], prefix="null_")


def null_extra_columns(null_scores: pd.DataFrame) -> pd.DataFrame:
    """The null reference of the metrics beyond the paper's: null_{m}_* over layers and
    null_head_{m}_* over heads, for each whose null rows of that scope are not all NaN
    (e.g. the spectra of random Q, K; rotary and folded forms are NaN there). Only the
    (model, stack) keys when there is none."""
    keys = ["model", "stack"]
    extra = extra_metrics(null_scores)
    out = _null_rows(null_scores, "layer")[keys].drop_duplicates().sort_values(keys).reset_index(drop=True)
    for scope, prefix in (("layer", "null_"), ("head", "null_head_")):
        rows = _null_rows(null_scores, scope)
        if metrics := _not_all_nan(rows, extra):
            out = out.merge(summarise(rows, keys, metrics, prefix=prefix), on=keys, how="outer")
    return out if len(out.columns) > len(keys) else pd.DataFrame(columns=keys)


HEAD_TYPES = {"type_I_plus": 1.0, "type_II": 0.0, "type_I_minus": -1.0}  # wqk.bilinear_forms' head_type


def group_table(models: pd.DataFrame, layers: pd.DataFrame, heads: pd.DataFrame | None = None) -> pd.DataFrame:
    """Objective x modality x stack (x synthetic): counts, quartiles of the per-model medians
    (columns {metric}_*) and of all layers pooled (columns layers_{metric}_*); then, where
    computed, the follow-up families' per-model head medians (head_{m}_*) and the shares of
    the head types among the group's heads."""
    keys = ["objective", "modality", "stack", "synthetic"]
    per_model = models.rename(columns={f"{m}_median": m for m in METRICS})
    stats = summarise(per_model, keys)
    n = models.groupby(keys, sort=True).size().rename("n_models").reset_index()
    pooled = summarise(layers, keys, prefix="layers_")
    nl = layers.groupby(keys, sort=True).size().rename("n_layers").reset_index()
    out = n.merge(nl, on=keys).merge(stats, on=keys).merge(pooled, on=keys)
    follow = [f"head_{c}" for c in FOLLOW_UP_COLUMNS if f"head_{c}_median" in models]
    if follow:
        medians = models.rename(columns={f"{c}_median": c for c in follow})
        out = out.merge(summarise(medians, keys, follow), on=keys, how="left")
    if heads is not None and "head_type" in heads:
        typed = heads[heads["head_type"].notna()]
        shares = typed.groupby(keys, sort=True)["head_type"].agg(
            **{name: (lambda s, v=v: float((s == v).mean())) for name, v in HEAD_TYPES.items()}
        )
        out = out.merge(shares.reset_index(), on=keys, how="left")
    return out.sort_values(keys, kind="stable").reset_index(drop=True)


def aggregate(scores: pd.DataFrame, cat: pd.DataFrame, null: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    ann = annotate(scores, cat)
    models = model_table(ann, null)
    layers = layer_table(ann)
    heads = head_table(ann)
    return {"models": models, "groups": group_table(models, layers, heads), "layers": layers, "heads": heads}


# ---------------------------------------------------------------- writing
def write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Parquet without pandas' index or timestamps, written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp, compression="zstd")


def write_csv(df: pd.DataFrame, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.6g", lineterminator="\n")


def write_outputs(tables: dict[str, pd.DataFrame], out_dir: str | os.PathLike) -> list[Path]:
    out_dir = Path(out_dir)
    written = []
    for name in ("models", "groups", "layers", "heads"):
        write_parquet(tables[name], out_dir / f"{name}.parquet")
        written.append(out_dir / f"{name}.parquet")
        if name in ("models", "groups"):
            write_csv(tables[name], out_dir / f"{name}.csv")
            written.append(out_dir / f"{name}.csv")
    return written
