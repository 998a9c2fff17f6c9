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
    every layer, each key head once (wqk.matrices). Decoded with numpy, not wqk.matrices:
    figures run in the light env, without torch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..contracts import check_format

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
    heads = [r for r in table.to_pylist() if (r["stack"], r["layer"]) == (stack, chosen)]
    keys = {r["head"]: factor(r, path) for r in heads if r["factor"] == "k"}
    rows = []
    for r in sorted((r for r in heads if r["factor"] == "q"), key=lambda r: r["head"]):
        shape = {c: r[c] for c in ("n_heads", "n_kv_heads", "d_q", "d_k", "head_dim")}
        rows.append(dict(model=r["model"], synthetic=r["synthetic"], stack=stack, layer=chosen, head=r["head"],
                         kv_head=r["kv_head"], **shape, q=factor(r, path).reshape(-1),
                         k=keys[r["kv_head"]].reshape(-1)))  # fmt: skip
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def factor(row: dict, path) -> np.ndarray:
    """One head's Q_h or K_h, [d, head_dim] float32, from its row of a matrices file (the
    head's rows of W_q or W_k, head_dim x d, little-endian, in the row's dtype)."""
    from ..errors import WqkError

    d = row["d_q"] if row["factor"] == "q" else row["d_k"]
    width = {"float32": 4, "float16": 2, "bfloat16": 2}.get(row["dtype"])
    if width is None or len(row["weight"]) != row["head_dim"] * d * width:
        raise WqkError(
            f"{path}: {row['stack']} layer {row['layer']}: {row['factor']} head {row['head']} is not "
            f"head_dim x d = {row['head_dim']} x {d} values of float32, float16 or bfloat16"
        )
    if row["dtype"] == "bfloat16":  # the upper half of a float32: exact
        values = (np.frombuffer(row["weight"], "<u2").astype("<u4") << 16).view("<f4")
    else:
        values = np.frombuffer(row["weight"], "<f4" if width == 4 else "<f2").astype(np.float32)
    return values.reshape(row["head_dim"], d).T


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
