"""W_qk examples (paper Fig. 1): the top-left block of one layer's M = sum_h Q_h K_h^T.

data["encoder"], data["decoder"]: matrices Parquets (`wqk extract` or `wqk score
--matrices-out`) of one encoder and one decoder model, one layer of each read by `load`.
Params: layer (default 1, as in the paper; the last layer if a model has fewer), size
(default 50; all dims if d is smaller), encoder_stack / decoder_stack (which stack of
each file to show; default "encoder" / "decoder"). Blue for the encoder, purple for the
decoder.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import DOUBLE, new_figure, no_data, style

PANELS = (("encoder", "Blues"), ("decoder", "Purples"))
FRAME_COLUMNS = ["model", "synthetic", "stack", "layer", "head", "kv_head", "n_heads", "n_kv_heads", "d_q", "d_k",
                 "head_dim", "q", "k"]  # fmt: skip


def load(key: str, path, layer: int = 1, **params) -> pd.DataFrame:
    """The layer shown, one row per query head with its Q_h and its key head's K_h
    (flattened [d, head_dim], float32). Reads only that layer's row group: the file holds
    every layer, each key head once (wqk.matrices)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..matrices import check_format, table_blocks

    stack = params.get(f"{key}_stack", key)
    pf = pq.ParquetFile(path)
    check_format(pf.schema_arrow, path)
    index = [pf.read_row_group(i, columns=["stack", "layer"]) for i in range(pf.num_row_groups)]
    index = [set(zip(t["stack"].to_pylist(), t["layer"].to_pylist())) for t in index]
    layers = {v for keys in index for s, v in keys if s == stack}
    if not layers:
        return pd.DataFrame(columns=FRAME_COLUMNS)
    chosen = int(layer) if int(layer) in layers else max(layers)
    table = pa.concat_tables([pf.read_row_group(i) for i, keys in enumerate(index) if (stack, chosen) in keys])
    rows = []
    for info, blk in table_blocks(table, path):
        if (blk.stack, blk.layer) != (stack, chosen):
            continue
        q, k = blk.q.float().numpy(), blk.k.float().numpy()
        shape = dict(n_heads=q.shape[0], n_kv_heads=k.shape[0], d_q=q.shape[1], d_k=k.shape[1], head_dim=q.shape[2])
        for h in range(blk.n_heads):
            kv = blk.kv_head(h)
            rows.append(dict(model=info.model, synthetic=info.synthetic, stack=stack, layer=chosen, head=h,
                             kv_head=kv, **shape, q=q[h].reshape(-1), k=k[kv].reshape(-1)))  # fmt: skip
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def block(matrices: pd.DataFrame, stack: str, layer: int, size: int) -> tuple[np.ndarray, int]:
    """Top-left size x size block of M for (stack, layer); falls back to the last layer."""
    df = matrices[matrices["stack"] == stack]
    if df.empty:
        raise ValueError(f"no {stack} stack in the matrices of {matrices['model'].iloc[0]}")
    if layer not in set(df["layer"]):
        layer = int(df["layer"].max())
    df = df[df["layer"] == layer].sort_values("head")
    k = int(df["head_dim"].iloc[0])
    n_q, n_k = min(size, int(df["d_q"].iloc[0])), min(size, int(df["d_k"].iloc[0]))
    keys = {int(r.kv_head): np.asarray(r.k, dtype=np.float64).reshape(-1, k)[:n_k] for r in df.itertuples()}
    m = np.zeros((n_q, n_k))
    for r in df.itertuples():
        m += np.asarray(r.q, dtype=np.float64).reshape(-1, k)[:n_q] @ keys[int(r.kv_head)].T
    return m, layer


def draw(
    data: dict,
    layer: int = 1,
    size: int = 50,
    encoder_stack="encoder",
    decoder_stack="decoder",
    width=DOUBLE,
    height=3.0,
):
    stacks = {"encoder": encoder_stack, "decoder": decoder_stack}
    with style():
        fig, axes = new_figure(width, height, ncols=2)
        for ax, (key, cmap) in zip(axes[0], PANELS):
            df = data.get(key)
            if df is None or df.empty or stacks[key] not in set(df["stack"]):
                no_data(ax, f"no {key} matrices")
                ax.set_axis_off()
                continue
            m, shown = block(df, stacks[key], int(layer), int(size))
            im = ax.imshow(m, cmap=cmap, interpolation="nearest")
            model = df["model"].iloc[0] + (" (synthetic)" if bool(df["synthetic"].iloc[0]) else "")
            ax.set_title(f"{key}: {model}\nlayer {shown}, top-left {m.shape[0]}x{m.shape[1]} of $W_{{qk}}$", fontsize=7)
            ax.set_xlabel("key dimension")
            ax.set_ylabel("query dimension")
            fig.colorbar(im, ax=ax, shrink=0.8)
    return fig
