"""W_qk examples (paper Fig. 1): the top-left block of one layer's M = sum_h Q_h K_h^T.

data["encoder"], data["decoder"]: matrices Parquets (`wqk extract`) of one encoder and one
decoder model. Params: layer (default 1, as in the paper; the last layer if a model has
fewer), size (default 50; all dims if d is smaller), encoder_stack / decoder_stack (which
stack of each file to show; default "encoder" / "decoder"). Blue for the encoder, purple
for the decoder.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import DOUBLE, new_figure, no_data, style

PANELS = (("encoder", "Blues"), ("decoder", "Purples"))


def load(key: str, path, layer: int = 1, **params) -> pd.DataFrame:
    """Read only the rows of the layer shown (the files hold every layer's Q_h, K_h)."""
    import pyarrow.parquet as pq

    stack = params.get(f"{key}_stack", key)
    index = pq.read_table(path, columns=["stack", "layer"]).to_pandas()
    layers = set(index.loc[index["stack"] == stack, "layer"].tolist())
    chosen = int(layer) if int(layer) in layers or not layers else max(layers)
    return pq.read_table(path, filters=[("stack", "=", stack), ("layer", "=", chosen)]).to_pandas()


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
