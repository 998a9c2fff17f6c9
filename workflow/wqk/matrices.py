"""Per-head Q_h, K_h in Parquet: one row per (stack, layer, head), one row group per layer.

Written as a stream (one layer in memory at a time) to a temporary name, then renamed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from .atomic import atomic_path
from .blocks import AttentionBlock
from .contracts import ModelInfo

SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("source", pa.string()),
        ("provenance", pa.string()),
        ("model_type", pa.string()),
        ("synthetic", pa.bool_()),
        ("stack", pa.string()),
        ("layer", pa.int32()),
        ("head", pa.int32()),
        ("kv_head", pa.int32()),
        ("n_heads", pa.int32()),
        ("n_kv_heads", pa.int32()),
        ("d_q", pa.int32()),
        ("d_k", pa.int32()),
        ("head_dim", pa.int32()),
        ("q", pa.list_(pa.float32())),
        ("k", pa.list_(pa.float32())),
    ]
)


def _list_array(per_head: torch.Tensor) -> pa.ListArray:
    """[H, d, k] -> list<float32> column with one flattened [d, k] per row."""
    flat = per_head.detach().to(torch.float32).contiguous().numpy().reshape(per_head.shape[0], -1)
    offsets = np.arange(flat.shape[0] + 1, dtype=np.int32) * flat.shape[1]
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat.ravel()))


def block_table(info: ModelInfo, block: AttentionBlock) -> pa.Table:
    h = block.n_heads
    heads = np.arange(h, dtype=np.int32)

    def const(value, typ):
        return pa.array([value] * h, type=typ)

    columns = {
        "model": const(info.model, pa.string()),
        "source": const(info.source, pa.string()),
        "provenance": const(info.provenance, pa.string()),
        "model_type": const(info.model_type, pa.string()),
        "synthetic": const(info.synthetic, pa.bool_()),
        "stack": const(block.stack, pa.string()),
        "layer": const(block.layer, pa.int32()),
        "head": pa.array(heads),
        "kv_head": pa.array(heads // block.group_size),
        "n_heads": const(h, pa.int32()),
        "n_kv_heads": const(block.n_kv_heads, pa.int32()),
        "d_q": const(block.q.shape[1], pa.int32()),
        "d_k": const(block.k.shape[1], pa.int32()),
        "head_dim": const(block.q.shape[2], pa.int32()),
        "q": _list_array(block.q),
        "k": _list_array(block.k_per_query_head()),
    }
    return pa.table(columns, schema=SCHEMA)


def write_matrices(info: ModelInfo, blocks: Iterable[AttentionBlock], out: Path) -> int:
    """Stream blocks into `out`; returns the number of blocks written."""
    n = 0
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, SCHEMA, compression="zstd", write_statistics=False) as w:
        for block in blocks:
            w.write_table(block_table(info, block), row_group_size=block.n_heads)
            n += 1
    return n


def read_blocks(path: Path) -> Iterator[tuple[ModelInfo, AttentionBlock]]:
    """Blocks back from a matrices file, one row group (layer) at a time."""
    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i)
        row = {c: t.column(c)[0].as_py() for c in ("model", "source", "provenance", "model_type", "synthetic")}
        info = ModelInfo(**row)
        h, h_kv = t.column("n_heads")[0].as_py(), t.column("n_kv_heads")[0].as_py()
        d_q, d_k, k = (t.column(c)[0].as_py() for c in ("d_q", "d_k", "head_dim"))
        q = t.column("q").combine_chunks().values.to_numpy().reshape(h, d_q, k)
        k_rep = t.column("k").combine_chunks().values.to_numpy().reshape(h, d_k, k)
        first_of_group = np.arange(h_kv) * (h // h_kv)
        block = AttentionBlock(
            t.column("stack")[0].as_py(),
            t.column("layer")[0].as_py(),
            torch.from_numpy(q.copy()),
            torch.from_numpy(k_rep[first_of_group].copy()),
        )
        yield info, block
