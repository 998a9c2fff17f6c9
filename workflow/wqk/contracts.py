"""What the library, the rules and the figures agree on: stack names, objectives, the
Parquet schemas, the statistic over layers, device resolution. One place for each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

STACKS = ("encoder", "decoder", "cross")
STACK_ORDER = {s: i for i, s in enumerate(STACKS)}  # reading order, not alphabetical
SELF_STACKS = ("encoder", "decoder")  # self-attention; "cross" attends across stacks
OBJECTIVES = ("bidirectional", "autoregressive")
MODALITIES = ("text", "vision", "audio", "time series")
CROSS = "cross-attention"  # the objective column of a cross stack
NULL_SUFFIX = " (null)"  # model name of a null reference: "<model> (null)"

SCORE_FIELDS = ("symmetry", "directionality", "fro_norm", "E_r", "E_c")
METRICS = ("symmetry", "directionality")  # the paper's two scores


def stack_rank(stack: str) -> int:
    return STACK_ORDER.get(stack, len(STACKS))


@dataclass(frozen=True)
class ModelInfo:
    """The identity of a model that every per-model output records."""

    model: str
    source: str
    provenance: str
    model_type: str
    synthetic: bool


MODEL_COLUMNS = [
    ("model", pa.string()),
    ("provenance", pa.string()),
    ("model_type", pa.string()),
    ("synthetic", pa.bool_()),
]

# results/scores/<slug>.parquet and results/null/<slug>.parquet: one row per layer
# (scope "layer", head null) and one per head, sorted by stack, layer, head.
SCORES_SCHEMA = pa.schema(
    [
        *MODEL_COLUMNS,
        ("stack", pa.string()),
        *[(c, pa.int32()) for c in ("layer", "n_layers")],
        ("scope", pa.string()),  # "layer" (head is null) or "head"
        *[(c, pa.int32()) for c in ("head", "n_heads", "n_kv_heads", "d_q", "d_k", "head_dim")],
        *[(f, pa.float64()) for f in SCORE_FIELDS],
        ("reason", pa.string()),  # why a score is NaN, else null
        # what was scored (wqk.blocks.FORMS): "bilinear", or "qk_norm_gain_folded" (a QK-norm
        # model: its gains folded into Q_h, K_h, its per-token scaling left out); null: not known
        ("form", pa.string()),
    ]
)

# results/matrices/<slug>.parquet (`wqk extract`, `wqk score --matrices-out`): the per-head
# factors of every attention layer, one row group per (stack, layer). In a layer, one row
# per query head (factor "q", head 0..n_heads-1), then one per key head (factor "k", head
# 0..n_kv_heads-1): a key head is stored once, however many query heads share it; a q
# row's kv_head names its key head (head // (n_heads // n_kv_heads)). `weight` holds the
# head's rows of W_q or W_k, head_dim x d row-major (d = d_q for q, d_k for k), that is
# Q_h^T with query_h = Q_h^T x, as nn.Linear stores them: the raw little-endian bytes at
# the checkpoint's precision, named by `dtype` (float32, float16, or bfloat16 = the high
# half of a float32). numpy: np.frombuffer(weight, "<f4" or "<f2").reshape(head_dim, d);
# bfloat16: (np.frombuffer(weight, "<u2").astype(np.uint32) << 16).view(np.float32).
MATRICES_DTYPES = ("float32", "float16", "bfloat16")
MATRICES_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("source", pa.string()),
        *MODEL_COLUMNS[1:],
        ("stack", pa.string()),
        ("layer", pa.int32()),
        ("factor", pa.string()),  # "q" or "k"
        ("head", pa.int32()),  # query head (factor q) or key head (factor k)
        ("kv_head", pa.int32()),  # the key head a query head uses; a key head's own index
        *[(c, pa.int32()) for c in ("n_heads", "n_kv_heads", "d_q", "d_k", "head_dim")],
        ("dtype", pa.string()),  # the checkpoint's precision of this factor
        ("weight", pa.large_binary()),  # head_dim x d values, row-major, little-endian
        # the layer's rotary embedding as JSON {"inv_freq": [...], "layout": ..., "context": ...}
        # (wqk.blocks.Rope), null without one
        ("rope", pa.string()),
        ("form", pa.string()),  # what the factors score, as the scores' `form` (wqk.blocks.FORMS)
    ],
    metadata={
        b"wqk.matrices": b"one row per head: factor q (query heads), then k (each key head once) of a layer; "
        b"weight = the head's rows of W_q or W_k (Q_h^T), head_dim x d row-major, little-endian, in dtype"
    },
)
# the same with `storage` last, for checkpoints whose factors may be stored quantised (GGUF):
# what the factor was stored as ("Q5_0"), its `weight` then holding the dequantised float32
# values; null for a factor stored as floats
STORED_MATRICES_SCHEMA = MATRICES_SCHEMA.append(pa.field("storage", pa.string()))


def check_format(schema: pa.Schema, path) -> None:
    """A matrices Parquet (MATRICES_SCHEMA), or a WqkError naming the way to write one."""
    from .errors import WqkError

    if {"factor", "weight", "dtype"} <= set(schema.names):
        return
    raise WqkError(
        f"{path} is not a matrices Parquet (no factor/weight/dtype columns): "
        "write it with `wqk extract` or `wqk score SOURCE --matrices-out`"
    )


def quartiles(values) -> tuple[float, float, float]:
    """(median, q25, q75) of the finite values, numpy linear interpolation (as in the
    authors' notebooks); NaNs if there are none."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (np.nan, np.nan, np.nan)
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return (float(med), float(q25), float(q75))


def resolve_device(device="auto"):
    """A torch device: "auto" is CUDA when torch sees one, else CPU."""
    import torch

    from .errors import WqkError

    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise WqkError(f"--device {device!r} is not a device: give auto, cpu or cuda") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise WqkError(f"--device {device} was asked for, but torch sees no CUDA device: use --device auto or cpu")
    return dev


def quantised(storage) -> str:
    """ "quantised: Q5_0" for a model's or layer's `storage` (set only where q or k were stored in
    a quantised type: adapters.reader._storage), "" for float factors (None, NaN)."""
    return f"quantised: {storage}" if isinstance(storage, str) and storage else ""
