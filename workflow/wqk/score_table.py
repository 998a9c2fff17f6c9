"""Scores of a stream of attention blocks as one tidy table (the scores Parquet contract).

The table is built with pyarrow from numpy buffers, so `wqk score` never imports pandas:
pyarrow's conversion of Python values imports it (a quarter of a second, a tenth of
scoring a 2 GB model on 2 cores) only to check whether they are pandas objects.
`score_stream` gives the same rows as a pandas DataFrame for in-process use.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .arrow import column
from .atomic import atomic_path
from .blocks import AttentionBlock
from .contracts import SCORES_SCHEMA, ModelInfo, stack_rank
from .metric_catalogue import LIST_COLUMNS, PAPER, order_columns, select
from .metric_registry import measure_block, measure_with_authors
from .progress import bar

if TYPE_CHECKING:
    import pandas as pd

SCHEMA = SCORES_SCHEMA
COLUMNS = SCHEMA.names
METHOD_KEY = b"wqk.method"  # schema metadata of a table not scored by the exact method
# after the contract's columns where some block's factors were stored quantised (a GGUF):
# what they were stored as, "Q5_0" or "q Q4_K, k Q6_K"; null in a row stored as floats
STORAGE = "storage"
LIST = pa.list_(pa.float64())


def _rows(info: ModelInfo, block: AttentionBlock, scores: dict, heads: list) -> list[dict]:
    base = {
        "model": info.model,
        "provenance": info.provenance,
        "model_type": info.model_type,
        "synthetic": bool(info.synthetic),
        "stack": block.stack,
        "layer": block.layer,
        "scope": "head" if heads[0] is not None else "layer",
        "n_heads": block.n_heads,
        "n_kv_heads": block.n_kv_heads,
        "d_q": block.q.shape[1],
        "d_k": block.k.shape[1],
        "head_dim": block.q.shape[2],
        "form": block.form,
    }
    if block.storage is not None:
        base[STORAGE] = block.storage
    columns = [c for c in scores if c != "reason"]
    return [
        {**base, "head": h, **{c: _value(c, scores[c][i]) for c in columns}, "reason": scores["reason"][i]}
        for i, h in enumerate(heads)
    ]


def _value(column: str, value):
    """A row's value of a metric column: a float, or its row of floats (LIST_COLUMNS)."""
    return value if column in LIST_COLUMNS else float(value)


def score_table(
    items: Iterable[tuple[ModelInfo, AttentionBlock]],
    device="cpu",
    n_std: float = 2.0,
    progress: bool = True,
    method: str = "exact",
    metrics="default",
    rotary_offsets=None,
) -> pa.Table:
    """Per-layer and per-head scores of every block, sorted by stack, layer, head.
    device: a torch device or its name, already resolved ("auto" is wqk.scoring's to resolve).
    progress: a bar on a terminal (the rules in wqk.progress); False: never.
    metrics: what wqk.metric_registry.select takes ("default": the cheap ones); their
    columns follow the contract's, NaN where a block has none (e.g. no rotary embedding).
    rotary_offsets: the offsets of rotary_symmetry (None: powers of two below the context).
    method "authors" (blocks from wqk.authors): the paper's two only, directionality 0
    where it would be NaN, and the method recorded in the table's schema metadata
    (b"wqk.method"); "exact" adds none."""
    chosen = PAPER if method == "authors" else select(metrics)
    rows: list[dict] = []
    for info, block in bar(items, enabled=progress, desc="scoring layers", unit="layer"):
        per_head, per_layer = measure_block(
            block, chosen, device, n_std, zero_directionality=method == "authors", rotary_offsets=rotary_offsets,
            seed_key=info.model,
        )  # fmt: skip
        rows += _block_rows(info, block, per_head, per_layer)
    table = to_table(rows)
    return table if method == "exact" else with_method(table, method)


def score_tables_with_authors(
    items: Iterable[tuple[ModelInfo, AttentionBlock]],
    placements,
    device="cpu",
    n_std: float = 2.0,
    progress: bool = True,
    metrics="default",
    rotary_offsets=None,
) -> tuple[pa.Table, pa.Table]:
    """`score_table` of the exact method, and in the same pass, from the same factors, the
    authors' method's table (wqk.authors.placements: where their code filed each block, in
    which order of its query heads; a block it did not read has no rows)."""
    chosen = select(metrics)
    rows: list[dict] = []
    authors: list[dict] = []
    for info, block in bar(items, enabled=progress, desc="scoring layers", unit="layer"):
        placed = placements(block)
        if placed is None:
            per_head, per_layer = measure_block(
                block, chosen, device, n_std, rotary_offsets=rotary_offsets, seed_key=info.model
            )
        else:
            (per_head, per_layer), (a_head, a_layer) = measure_with_authors(
                block, placed.order, chosen, device, n_std, rotary_offsets
            )
            filed = dataclasses.replace(block, stack=placed.stack, heads=placed.order)
            authors += _block_rows(info, filed, a_head, a_layer)
        rows += _block_rows(info, block, per_head, per_layer)
    return to_table(rows), with_method(to_table(authors), "authors")


def _block_rows(info: ModelInfo, block: AttentionBlock, per_head: dict, per_layer: dict) -> list[dict]:
    return _rows(info, block, per_layer, [None]) + _rows(
        info, block, per_head, list(block.heads or range(block.n_heads))
    )


def with_method(table: pa.Table, method: str) -> pa.Table:
    """A table scored by another method than the exact one, so marked (b"wqk.method")."""
    return table.replace_schema_metadata({METHOD_KEY: method.encode()})


def to_table(rows: list[dict]) -> pa.Table:
    layers: dict[str, set[int]] = {}
    for r in rows:
        layers.setdefault(r["stack"], set()).add(r["layer"])
    rows = sorted(
        rows,
        key=lambda r: (stack_rank(r["stack"]), r["stack"], r["layer"], r["head"] is not None, r["head"] or 0),
    )
    schema = scores_schema({c for r in rows for c in r})
    columns = {c: [r.get(c) for r in rows] for c in schema.names if c != "n_layers"}
    for c in schema.names[len(COLUMNS) :]:  # a metric a block has not: NaN, as in the contract's
        if c not in {STORAGE, *LIST_COLUMNS}:  # (a list column's: null)
            columns[c] = [np.nan if v is None else v for v in columns[c]]
    columns["n_layers"] = [len(layers[s]) for s in columns["stack"]]
    return _table(columns, schema)


def scores_schema(columns) -> pa.Schema:
    """The contract's columns, then the metric columns among `columns` (float64; a list of
    float64 for LIST_COLUMNS), in the catalogue's order (wqk.metric_catalogue.order_columns)."""
    extra = order_columns([c for c in columns if c not in {*COLUMNS, STORAGE}])
    storage = [(STORAGE, pa.string())] if STORAGE in columns else []
    return pa.schema([*SCHEMA, *storage, *[(c, LIST if c in LIST_COLUMNS else pa.float64()) for c in extra]])


def _table(columns: dict[str, list], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.Table.from_arrays([column(columns[f.name], f.type) for f in schema], schema=schema)


def _from_frame(df: pd.DataFrame) -> pa.Table:
    """A DataFrame with the contract's columns as a table, in its row order. NaN scores stay
    NaN (pyarrow's own conversion would turn them into nulls)."""
    import pandas as pd

    schema = scores_schema(df.columns)
    columns = {}
    for f in schema:
        if f.name == "form" and "form" not in df:  # a frame from before the column: not known
            columns[f.name] = [None] * len(df)
            continue
        values = df[f.name].tolist()
        plain = f.type in (pa.float64(), LIST)  # (a list cell is None or an array, never NaN)
        columns[f.name] = values if plain else [None if pd.isna(v) else v for v in values]
    return _table(columns, schema)


def score_stream(items: Iterable[tuple[ModelInfo, AttentionBlock]], **options) -> pd.DataFrame:
    """`score_table` (same options) as a pandas DataFrame, head as nullable Int32."""
    return to_frame(score_table(items, **options))


def to_frame(table: pa.Table) -> pd.DataFrame:
    df = table.to_pandas()
    df["head"] = df["head"].astype("Int32")
    method = (table.schema.metadata or {}).get(METHOD_KEY)
    if method is not None:
        df.attrs["method"] = method.decode()
    return df


def write_scores(scores: pa.Table | pd.DataFrame, out: Path) -> None:
    """Scores (a table or a DataFrame with the contract's columns) to Parquet, atomically."""
    if not isinstance(scores, pa.Table):
        scores = _from_frame(scores)
    with atomic_path(out) as tmp:
        pq.write_table(scores, tmp, compression="zstd")


def layer_table(scores: pa.Table | pd.DataFrame) -> str:
    """Per-layer scores as text, with the median over layers of each stack at the bottom; a
    stack whose form is not the plain bilinear one (QK-norm: gains folded) says so in its title."""
    if not isinstance(scores, pa.Table):
        scores = _from_frame(scores)
    rows = [r for r in scores.to_pylist() if r["scope"] == "layer"]
    parts = []
    for stack in dict.fromkeys(r["stack"] for r in rows):
        mine = [r for r in rows if r["stack"] == stack]
        lines = [("layer", "symmetry", "directionality")]
        lines += [(str(r["layer"]), _num(r["symmetry"]), _num(r["directionality"])) for r in mine]
        lines.append(("median", *(_num(_median([r[f] for r in mine])) for f in ("symmetry", "directionality"))))
        widths = [max(len(line[i]) for line in lines) for i in range(3)]
        text = "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in lines)
        form = mine[0].get("form") or "bilinear"
        note = "" if form == "bilinear" else f"  (form: {form}, README.md: What is computed)"
        parts.append(f"{mine[0]['model']}  [{stack}]{note}\n{text}")
    return "\n\n".join(parts)


def _median(values: list[float | None]) -> float:
    defined = [v for v in values if v is not None and v == v]  # NaN: zero or non-square M
    return statistics.median(defined) if defined else float("nan")


def _num(x: float | None) -> str:
    return "NaN" if x is None or x != x else f"{x:+.4f}"
