"""Arrow arrays from Python values, assembled from numpy buffers.

`pa.array` on any Python list (numpy arrays too) imports pandas to check whether the values
are pandas objects: half a second of a 2-core machine's time, in every scoring job that
builds a scores, null or matrices table. `column` builds the same arrays without it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_NUMPY = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float64(): np.float64}


def column(values, typ: pa.DataType) -> pa.Array:
    """An Arrow array of `typ` (string, bool, int32, int64, float64, list of float64) from
    Python values (None for null)."""
    values = list(values)
    n = len(values)
    valid = np.array([v is not None for v in values], dtype=bool)
    nulls = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if typ == pa.string():
        data = [v.encode() if v is not None else b"" for v in values]
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(b) for b in data], out=offsets[1:])
        return pa.Array.from_buffers(typ, n, [nulls, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])
    if typ == pa.list_(pa.float64()):  # each value a sequence of floats (a numpy row too)
        items = [np.asarray(v, dtype=np.float64).ravel() for v in values if v is not None]
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(v) if v is not None else 0 for v in values], out=offsets[1:])
        flat = np.concatenate(items) if items else np.zeros(0)
        child = pa.Array.from_buffers(pa.float64(), len(flat), [None, pa.py_buffer(flat)])
        return pa.Array.from_buffers(typ, n, [nulls, pa.py_buffer(offsets)], children=[child])
    if typ == pa.bool_():
        bits = np.packbits(np.array([bool(v) for v in values], dtype=bool), bitorder="little")
        return pa.Array.from_buffers(typ, n, [nulls, pa.py_buffer(bits)])
    data = np.array([v if v is not None else 0 for v in values], dtype=_NUMPY[typ])
    return pa.Array.from_buffers(typ, n, [nulls, pa.py_buffer(data)])


def repeated(value, n: int, typ: pa.DataType) -> pa.Array:
    """`value` n times."""
    return column([value] * n, typ)
