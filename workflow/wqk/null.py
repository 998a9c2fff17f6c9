"""Null reference: the scores of random Gaussian Q, K with a model's shapes.

For every (stack, layer) of a model's scores, draw Q [n_heads, d_q, head_dim] and
K [n_kv_heads, d_k, head_dim] with i.i.d. N(0, 1) entries (key heads repeated to their
query heads by AttentionBlock, as for the real model) and score them with the same code.
Each layer's draw is seeded from (seed, stack, layer) alone, so a layer's null does not
depend on which other layers exist. Rows follow the scores Parquet contract, with
synthetic=True and model "<model> (null)".
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import torch

from .blocks import AttentionBlock
from .contracts import NULL_SUFFIX, ModelInfo
from .errors import WqkError
from .score_table import score_stream

SHAPE_COLUMNS = ("n_heads", "n_kv_heads", "d_q", "d_k", "head_dim")


def random_block(stack: str, layer: int, shape: dict, seed: int) -> AttentionBlock:
    key = [seed, zlib.crc32(stack.encode()), int(layer)]
    gen = torch.Generator().manual_seed(int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> 1))
    h, h_kv, d_q, d_k, k = (int(shape[c]) for c in SHAPE_COLUMNS)
    q = torch.randn(h, d_q, k, generator=gen)
    kk = torch.randn(h_kv, d_k, k, generator=gen)
    return AttentionBlock(stack=stack, layer=int(layer), q=q, k=kk)


def layer_shapes(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per (stack, layer) with the shape columns and n_layers."""
    missing = [c for c in ("model", "stack", "layer", "n_layers", *SHAPE_COLUMNS) if c not in scores]
    if missing:
        raise WqkError(f"scores lack column(s) {missing}: cannot build a null reference")
    cols = ["stack", "layer", "n_layers", *SHAPE_COLUMNS]
    shapes = scores[cols].drop_duplicates(["stack", "layer"]).sort_values(["stack", "layer"], kind="stable")
    return shapes.reset_index(drop=True)


def null_scores(scores: pd.DataFrame, seed: int = 0, device: str = "cpu", progress: bool = False) -> pd.DataFrame:
    """Scores-contract rows for random Q, K with the shapes of `scores` (one model)."""
    models = scores["model"].unique()
    if len(models) != 1:
        raise WqkError(f"a null reference is per model; the scores hold {len(models)} models: {list(models)[:5]}")
    info = ModelInfo(
        model=f"{models[0]}{NULL_SUFFIX}",
        source="null",
        provenance=f"null reference: N(0,1) Q, K with the shapes of {models[0]}, seed {seed}",
        model_type=str(scores["model_type"].iloc[0]) if "model_type" in scores else "",
        synthetic=True,
    )
    blocks = ((info, random_block(s["stack"], s["layer"], s, seed)) for s in layer_shapes(scores).to_dict("records"))
    return score_stream(blocks, device=device, progress=progress)
