"""Scores of a stream of attention blocks as one tidy table (the scores Parquet contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd
from tqdm import tqdm

from .atomic import atomic_path
from .blocks import AttentionBlock
from .matrices import ModelInfo
from .scores import FIELDS, resolve_device, score_block

COLUMNS = [
    "model", "provenance", "model_type", "synthetic", "stack", "layer", "n_layers", "scope", "head",
    "n_heads", "n_kv_heads", "d_q", "d_k", "head_dim", *FIELDS, "reason",
]  # fmt: skip


def _rows(info: ModelInfo, block: AttentionBlock, scores: dict, heads: list) -> list[dict]:
    base = {
        "model": info.model,
        "provenance": info.provenance,
        "model_type": info.model_type,
        "synthetic": info.synthetic,
        "stack": block.stack,
        "layer": block.layer,
        "scope": "head" if heads[0] is not None else "layer",
        "n_heads": block.n_heads,
        "n_kv_heads": block.n_kv_heads,
        "d_q": block.q.shape[1],
        "d_k": block.k.shape[1],
        "head_dim": block.q.shape[2],
    }
    return [
        {**base, "head": h, **{f: float(scores[f][i]) for f in FIELDS}, "reason": scores["reason"][i]}
        for i, h in enumerate(heads)
    ]


def score_stream(
    items: Iterable[tuple[ModelInfo, AttentionBlock]],
    device: str = "auto",
    n_std: float = 2.0,
    progress: bool = True,
) -> pd.DataFrame:
    dev = resolve_device(device)
    rows: list[dict] = []
    for info, block in tqdm(items, desc="scoring layers", unit="layer", disable=not progress):
        per_head, per_layer = score_block(block, dev, n_std)
        rows += _rows(info, block, per_layer, [None])
        rows += _rows(info, block, per_head, list(range(block.n_heads)))
    return to_frame(rows)


def to_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "n_layers"])
    n_layers = df.groupby("stack")["layer"].transform("nunique") if len(df) else df["layer"]
    df.insert(COLUMNS.index("n_layers"), "n_layers", n_layers.astype("int32"))
    for c in ("layer", "n_heads", "n_kv_heads", "d_q", "d_k", "head_dim"):
        df[c] = df[c].astype("int32")
    df["head"] = df["head"].astype("Int32")
    df["synthetic"] = df["synthetic"].astype(bool)
    order = {"encoder": 0, "decoder": 1, "cross": 2}
    df = df.sort_values(
        ["stack", "layer", "head"], key=lambda s: s.map(order) if s.name == "stack" else s,
        na_position="first",
    )  # fmt: skip
    return df.reset_index(drop=True)


def write_scores(df: pd.DataFrame, out: Path) -> None:
    with atomic_path(out) as tmp:
        df.to_parquet(tmp, index=False, compression="zstd")


def layer_table(df: pd.DataFrame) -> str:
    """Per-layer scores as text, with the median over layers of each stack at the bottom."""
    layers = df[df["scope"] == "layer"]
    parts = []
    for stack, g in layers.groupby("stack", sort=False):
        t = g[["layer", "symmetry", "directionality"]].copy()
        t["layer"] = t["layer"].astype(str)
        med = pd.DataFrame([{"layer": "median", "symmetry": g["symmetry"].median(),
                             "directionality": g["directionality"].median()}])  # fmt: skip
        t = pd.concat([t, med], ignore_index=True)
        parts.append(f"{g['model'].iloc[0]}  [{stack}]\n" + t.to_string(index=False, float_format="{:+.4f}".format))
    return "\n\n".join(parts)
