"""Null reference: the scores of random Gaussian Q, K with a model's shapes.

For some layers of every stack of a model's scores, draw K [n_kv_heads, d_k, head_dim] and query
heads Q [., d_q, head_dim] with i.i.d. N(0, 1) entries, each query head paired with its key head
as in the real model, and score them with the same code. Each layer's draw is seeded from
(seed, stack, layer) alone, so a layer's null does not depend on which other layers exist or
are drawn.

What is drawn is what the null's statistics need (its medians and quantiles over layers and
over heads), not a copy of the whole model:
- layers: random layers of one shape are i.i.d., so a stack's null draws `n_draws(n)` of its
  n layers, a quarter of them (rounded up), at least 1 and at most 8 (never more than n),
  evenly spread over depth from the first to the last (a stack whose shape changes with depth
  gets its shapes about in proportion);
- heads: every key head, and per key head `query_heads` of its query heads (at least one, at
  most its group): with grouped-query attention, enough for HEAD_DRAWS head rows per stack, not
  all of them (`all_layers` draws every query head of every layer). The layer row stays exact
  in distribution: the layer form sums the query heads of each key head, and a sum of p i.i.d.
  Gaussian heads is one Gaussian head times sqrt(p), whose scores (scale-free) are those of any
  other number of heads summed.
The null thus costs at most about a quarter of scoring a stack of 8 layers or more, and one
layer of a shallower one; the aggregate takes the median and quartiles of the drawn layers and
heads per model and stack (aggregate.null_columns). Rows follow the scores Parquet contract,
with synthetic=True, model "<model> (null)", and n_layers and n_heads the model's (not the
numbers drawn).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import torch

from .arrow import column
from .blocks import AttentionBlock
from .contracts import NULL_SUFFIX, ModelInfo, stack_rank
from .errors import WqkError
from .metric_catalogue import metrics_of_columns
from .progress import bar
from .score_table import score_table, to_frame

if TYPE_CHECKING:
    import pandas as pd

SHAPE_COLUMNS = ("n_heads", "n_kv_heads", "d_q", "d_k", "head_dim")
DRAW_FRACTION = 4  # a quarter of a stack's layers ...
MIN_DRAWS, MAX_DRAWS = 1, 8  # ... at least 1, at most 8
HEAD_DRAWS = 16  # query heads per stack that a grouped-query null draws, at least


def n_draws(n_layers: int) -> int:
    """How many of a stack's n_layers layers the null draws."""
    return min(n_layers, max(MIN_DRAWS, min(MAX_DRAWS, -(-n_layers // DRAW_FRACTION))))


def drawn_layers(layers: list[int], all_layers: bool = False) -> list[int]:
    """The layers drawn among a stack's (sorted) layers: n_draws of them, evenly spread."""
    if all_layers or len(layers) <= 1:
        return list(layers)
    picks = np.round(np.linspace(0, len(layers) - 1, n_draws(len(layers)))).astype(int)
    return [layers[i] for i in picks]


def query_heads(shape: dict, drawn: int, all_heads: bool = False) -> int:
    """Query heads drawn per key head in each of a stack's `drawn` layers: enough for
    HEAD_DRAWS head rows in the stack, at most the model's group (all of them: all_heads)."""
    group = int(shape["n_heads"]) // int(shape["n_kv_heads"])
    if all_heads:
        return group
    return min(group, max(1, -(-HEAD_DRAWS // (int(shape["n_kv_heads"]) * drawn))))


def random_block(stack: str, layer: int, shape: dict, seed: int, per_key_head: int | None = None) -> AttentionBlock:
    """One layer's random factors: every key head and `per_key_head` query heads of each (all
    of its group: None), numbered 0, 1, ... in the order of their key heads."""
    key = [seed, zlib.crc32(stack.encode()), int(layer)]
    gen = torch.Generator().manual_seed(int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> 1))
    h, h_kv, d_q, d_k, k = (int(shape[c]) for c in SHAPE_COLUMNS)
    p = h // h_kv if per_key_head is None else per_key_head
    # drawn as nn.Linear weights [heads, k, d] are stored: scoring takes them as they are
    q = torch.randn(h_kv * p, k, d_q, generator=gen).mT
    kk = torch.randn(h_kv, k, d_k, generator=gen).mT
    return AttentionBlock(stack=stack, layer=int(layer), q=q, k=kk)


def _columns(scores, names) -> dict[str, list]:
    """Columns of a scores table (pyarrow) or DataFrame as lists, without importing pandas."""
    have = scores.column_names if isinstance(scores, pa.Table) else list(scores.columns)
    missing = [c for c in names if c not in have]
    if missing:
        raise WqkError(f"scores lack column(s) {missing}: cannot build a null reference")
    if isinstance(scores, pa.Table):
        return {c: scores.column(c).to_pylist() for c in names}
    return {c: scores[c].tolist() for c in names}


def layer_shapes(scores) -> list[dict]:
    """One record per (stack, layer) with the shape columns and n_layers, sorted."""
    cols = _columns(scores, ("model", "stack", "layer", "n_layers", *SHAPE_COLUMNS))
    shapes = {}
    for i, key in enumerate(zip(cols["stack"], cols["layer"])):
        if key not in shapes:
            shapes[key] = {c: cols[c][i] for c in ("stack", "layer", "n_layers", *SHAPE_COLUMNS)}
    return [shapes[key] for key in sorted(shapes)]


def null_table(
    scores, seed: int = 0, device: str = "cpu", progress: bool = False, all_layers: bool = False, metrics=None
) -> pa.Table:
    """Scores-contract rows (a pyarrow table) for random Q, K with the shapes of `scores`
    (one model's scores: a pyarrow table or a DataFrame). metrics: as score_table takes
    them; None: those whose columns `scores` holds (random blocks have no rotary embedding,
    gain or bias: those metrics give nothing). all_layers: every layer and every query head."""
    have = scores.column_names if isinstance(scores, pa.Table) else list(scores.columns)
    if metrics is None:
        metrics = metrics_of_columns(have)
    models = sorted(set(_columns(scores, ("model",))["model"]))
    if len(models) != 1:
        raise WqkError(f"a null reference is per model; the scores hold {len(models)} models: {models[:5]}")
    model_type = _columns(scores, ("model_type",))["model_type"][0] if "model_type" in have else ""
    info = ModelInfo(
        model=f"{models[0]}{NULL_SUFFIX}",
        source="null",
        provenance=f"null reference: N(0,1) Q, K with the shapes of {models[0]}, seed {seed}",
        model_type=str(model_type),
        synthetic=True,
    )
    shapes = layer_shapes(scores)
    stacks: dict[str, list[dict]] = {}
    for s in shapes:
        stacks.setdefault(s["stack"], []).append(s)
    chosen = []  # (shape, query heads per key head)
    for rows in stacks.values():
        by_layer = {int(r["layer"]): r for r in rows}
        layers = drawn_layers(sorted(by_layer), all_layers)
        chosen += [(by_layer[layer], query_heads(by_layer[layer], len(layers), all_layers)) for layer in layers]
    chosen.sort(key=lambda c: (stack_rank(c[0]["stack"]), c[0]["stack"], int(c[0]["layer"])))  # the scores' row order
    # one layer at a time, each drawn here: score_table never calls back into this module
    tables = [
        score_table(
            [(info, random_block(s["stack"], s["layer"], s, seed, p))], device=device, progress=False, metrics=metrics
        )
        for s, p in bar(chosen, enabled=progress, desc="null reference", unit="layer")
    ]
    table = pa.concat_tables(tables) if tables else score_table([], device=device, progress=False, metrics=metrics)
    # n_layers and n_heads are the model's: the null draws some of its layers and heads
    depth = {}
    for s in shapes:  # the scores' own n_layers, else the number of layers they hold
        depth[s["stack"]] = s["n_layers"] if s["n_layers"] is not None else len(stacks[s["stack"]])
    heads = {(s["stack"], int(s["layer"])): int(s["n_heads"]) for s in shapes}
    places = list(zip(table.column("stack").to_pylist(), table.column("layer").to_pylist()))
    for name, values in (("n_layers", [depth[st] for st, _ in places]), ("n_heads", [heads[p] for p in places])):
        table = table.set_column(table.schema.get_field_index(name), name, column(values, pa.int32()))
    return table


def null_scores(scores: pd.DataFrame, **options) -> pd.DataFrame:
    """`null_table` (same options) as a DataFrame (head as nullable Int32)."""
    return to_frame(null_table(scores, **options))
