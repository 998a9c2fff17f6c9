"""Null reference: the scores of random Gaussian Q, K with a model's shapes.

For some layers of every stack of a model's scores, draw Q [n_heads, d_q, head_dim] and
K [n_kv_heads, d_k, head_dim] with i.i.d. N(0, 1) entries (each query head paired with its
key head, as in the real model) and score them with the same code. Each layer's draw is
seeded from (seed, stack, layer) alone, so a layer's null does not depend on which other
layers exist or are drawn.

Random layers of one shape are i.i.d., so a deep stack needs no draw per layer: the null
draws `n_draws(n)` of a stack's n layers, a quarter of them (rounded up), at least 2 and
at most 8 (never more than n), evenly spread over depth from the first to the last (a
stack whose shape changes with depth gets its shapes about in proportion). It costs at
most about a quarter of scoring a stack of 8 layers or more, and the aggregate only takes
the median and quartiles of the drawn layers per model and stack (aggregate.null_columns).
`all_layers=True` draws every layer. Rows follow the scores Parquet contract, with
synthetic=True, model "<model> (null)", and n_layers the model's (not the number drawn).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import torch

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
MIN_DRAWS, MAX_DRAWS = 2, 8  # ... at least 2, at most 8


def n_draws(n_layers: int) -> int:
    """How many of a stack's n_layers layers the null draws."""
    return min(n_layers, max(MIN_DRAWS, min(MAX_DRAWS, -(-n_layers // DRAW_FRACTION))))


def drawn_layers(layers: list[int], all_layers: bool = False) -> list[int]:
    """The layers drawn among a stack's (sorted) layers: n_draws of them, evenly spread."""
    if all_layers or len(layers) <= 1:
        return list(layers)
    picks = np.round(np.linspace(0, len(layers) - 1, n_draws(len(layers)))).astype(int)
    return [layers[i] for i in picks]


def random_block(stack: str, layer: int, shape: dict, seed: int) -> AttentionBlock:
    key = [seed, zlib.crc32(stack.encode()), int(layer)]
    gen = torch.Generator().manual_seed(int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> 1))
    h, h_kv, d_q, d_k, k = (int(shape[c]) for c in SHAPE_COLUMNS)
    # drawn as nn.Linear weights [heads, k, d] are stored: scoring takes them as they are
    q = torch.randn(h, k, d_q, generator=gen).mT
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
    gain or bias: those metrics give nothing)."""
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
    chosen = []
    for rows in stacks.values():
        by_layer = {int(r["layer"]): r for r in rows}
        chosen += [by_layer[layer] for layer in drawn_layers(sorted(by_layer), all_layers)]
    chosen.sort(key=lambda s: (stack_rank(s["stack"]), s["stack"], int(s["layer"])))  # the scores' row order
    # one layer at a time, each drawn here: score_table never calls back into this module
    tables = [
        score_table(
            [(info, random_block(s["stack"], s["layer"], s, seed))], device=device, progress=False, metrics=metrics
        )
        for s in bar(chosen, enabled=progress, desc="null reference", unit="layer")
    ]
    table = pa.concat_tables(tables) if tables else score_table([], device=device, progress=False, metrics=metrics)
    # n_layers is the model's: the null draws some of its layers, at their own depths
    depth = {}
    for s in shapes:  # the scores' own n_layers, else the number of layers they hold
        depth[s["stack"]] = s["n_layers"] if s["n_layers"] is not None else len(stacks[s["stack"]])
    n_layers = pa.array([int(depth[s]) for s in table.column("stack").to_pylist()], type=pa.int32())
    return table.set_column(table.schema.get_field_index("n_layers"), "n_layers", n_layers)


def null_scores(scores: pd.DataFrame, **options) -> pd.DataFrame:
    """`null_table` (same options) as a DataFrame (head as nullable Int32)."""
    return to_frame(null_table(scores, **options))
