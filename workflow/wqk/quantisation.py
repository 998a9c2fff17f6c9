"""What quantisation does to the structure: a float checkpoint's q/k quantised with each type the
`gguf` package can write, dequantised, and scored, per layer, beside the spread of the null.

    quantisation_table(source)   one row per (stack, layer, quant type)

Each factor is quantised as llama.cpp quantises an nn.Linear weight [out, in]: in blocks along
the input axis (d), so a type whose block does not divide d is left out for that model (its
rows say why). The change a type makes (d_symmetry, d_directionality: quantised minus float) is
set beside the null's spread: the standard deviation of the same score over NULL_DRAWS random
Gaussian forms of the layer's shapes (wqk.null.random_block), the size of the differences
between two random forms of that shape. |change| / spread well below 1: the quantisation moves
the score by less than one random form differs from another.
"""

from __future__ import annotations

import dataclasses
import zlib
from functools import cache

import numpy as np
import pandas as pd
import torch

from .blocks import AttentionBlock
from .metrics import score_block
from .null import random_block

NULL_DRAWS = 16
COLUMNS = [
    "model", "provenance", "stack", "layer", "quant_type", "bits_per_weight",
    "symmetry_float", "symmetry", "d_symmetry", "null_symmetry_std",
    "directionality_float", "directionality", "d_directionality", "null_directionality_std",
    "reason",
]  # fmt: skip


@cache
def writable_types() -> tuple[str, ...]:
    """The GGML types the installed gguf package can quantise to (and back), float types excluded."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    probe = np.linspace(-1, 1, 256 * 4, dtype=np.float32).reshape(4, 256)
    out = []
    for t in GGMLQuantizationType:
        if t.name in ("F32", "F16", "F64", "I8", "I16", "I32", "I64"):
            continue
        try:
            dequantize(quantize(probe, t), t)
        except (NotImplementedError, ValueError, AssertionError):
            continue
        out.append(t.name)
    return tuple(out)


def bits_per_weight(name: str) -> float:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[name]]
    return size * 8 / block


def _block_size(name: str) -> int:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    return GGML_QUANT_SIZES[GGMLQuantizationType[name]][0]


def quantised(factor: torch.Tensor, name: str) -> torch.Tensor:
    """A block's factor [H, d, k] quantised to GGML type `name` and back, as its nn.Linear
    weight [H*k, d] is: in blocks along d."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    h, d, k = factor.shape
    rows = factor.permute(0, 2, 1).reshape(h * k, d).to(torch.float32).numpy()
    t = GGMLQuantizationType[name]
    back = dequantize(quantize(rows, t), t).reshape(h, k, d)
    return torch.from_numpy(np.ascontiguousarray(back)).permute(0, 2, 1)


def _layer(block: AttentionBlock) -> tuple[float, float]:
    _, layer = score_block(block)
    return float(layer["symmetry"][0]), float(layer["directionality"][0])


def _null_spread(block: AttentionBlock, seed: int) -> tuple[float, float]:
    shape = dict(
        n_heads=block.n_heads, n_kv_heads=block.n_kv_heads, d_q=block.q.shape[1], d_k=block.k.shape[1],
        head_dim=block.q.shape[2],
    )  # fmt: skip
    draws = []
    for i in range(NULL_DRAWS):
        s = zlib.crc32(f"quantisation:{seed}:{block.stack}:{block.layer}:{i}".encode())
        draws.append(_layer(random_block(block.stack, block.layer, shape, s)))
    sym, dire = np.array(draws).T
    return float(sym.std(ddof=1)), float(dire.std(ddof=1))


def quantisation_table(
    source, types: tuple[str, ...] | None = None, seed: int = 0, name: str | None = None
) -> pd.DataFrame:
    """Per layer and quant type of a float checkpoint: its scores quantised, the float ones, the
    change, and the null's spread (module docstring)."""
    from .adapters import open_source

    types = tuple(types or writable_types())
    info, blocks = open_source(source, name)
    rows = []
    for block in blocks:
        if block.storage is not None:
            raise ValueError(f"{info.model}: its factors are stored as {block.storage}; give the float checkpoint")
        block = dataclasses.replace(block, q=block.q.float(), k=block.k.float())
        sym0, dir0 = _layer(block)
        null_sym, null_dir = _null_spread(block, seed)
        d_q, d_k = block.q.shape[1], block.k.shape[1]
        for t in types:
            base = dict(
                model=info.model, provenance=info.provenance, stack=block.stack, layer=block.layer, quant_type=t,
                bits_per_weight=bits_per_weight(t), symmetry_float=sym0, directionality_float=dir0,
                null_symmetry_std=null_sym, null_directionality_std=null_dir,
            )  # fmt: skip
            if d_q % _block_size(t) or d_k % _block_size(t):
                rows.append({**base, "reason": f"its blocks of {_block_size(t)} do not divide d = {d_q}, {d_k}"})
                continue
            q_block = dataclasses.replace(block, q=quantised(block.q, t), k=quantised(block.k, t))
            sym, dire = _layer(q_block)
            rows.append({**base, "symmetry": sym, "d_symmetry": sym - sym0, "directionality": dire,
                         "d_directionality": dire - dir0, "reason": None})  # fmt: skip
    df = pd.DataFrame(rows).reindex(columns=COLUMNS)
    return df.sort_values(["stack", "layer", "bits_per_weight", "quant_type"], kind="stable").reset_index(drop=True)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per model, stack and quant type: median |change| over layers and the median null spread."""
    ok = df[df["reason"].isna()].copy()
    ok["abs_d_symmetry"], ok["abs_d_directionality"] = ok["d_symmetry"].abs(), ok["d_directionality"].abs()
    g = ok.groupby(["model", "stack", "quant_type", "bits_per_weight"], sort=True)
    out = g.agg(
        n_layers=("layer", "nunique"),
        abs_d_symmetry_median=("abs_d_symmetry", "median"),
        abs_d_symmetry_max=("abs_d_symmetry", "max"),
        null_symmetry_std=("null_symmetry_std", "median"),
        abs_d_directionality_median=("abs_d_directionality", "median"),
        abs_d_directionality_max=("abs_d_directionality", "max"),
        null_directionality_std=("null_directionality_std", "median"),
    ).reset_index()
    out["symmetry_change_over_null"] = out["abs_d_symmetry_median"] / out["null_symmetry_std"]
    out["directionality_change_over_null"] = out["abs_d_directionality_median"] / out["null_directionality_std"]
    return out.sort_values(["model", "stack", "bits_per_weight", "quant_type"], kind="stable").reset_index(drop=True)
