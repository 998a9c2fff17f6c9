"""Per-head Q_h, K_h in Parquet (contracts.MATRICES_SCHEMA): one row group per layer, each
key head once, at the checkpoint's precision.

A layer's rows are its query heads (factor "q"), then its key heads (factor "k"), each the
head's rows of W_q or W_k ([head_dim, d], the layout of nn.Linear weights, so that writing
a checkpoint's factors copies nothing) as one binary value of raw bytes in `dtype`.
One value per head, not a list of floats: Parquet encodes a list with two level values per
float, which made writing a 2 GB checkpoint's 670 MB of q/k take 2.5 s instead of 1 s (and
byte-stream-split, which needs float lists, would save only another 8% on float32).
Compression (see write_options; measured on benchmarks/bench_workflow_path.py's LLaMA):
zstd level 1 takes ~20% off 16-bit weights (their exponent bytes), but only ~8% off
float32 ones for ~0.6 s of CPU per GB, so float32 weights are stored uncompressed.

Written as a stream (one layer in memory at a time) to a temporary name, then renamed:
`MatricesWriter` takes blocks as scoring consumes them (`wqk score --matrices-out`),
`write_matrices` a whole stream (`wqk extract`). `read_blocks` gives the blocks back,
each factor in its recorded dtype, K once per key head, as the checkpoint's store would,
with the layer's rotary embedding (column `rope`); the projections' biases and the norms'
gains are not stored: the folded forms (wqk.folded) need the checkpoint.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from .arrow import column, repeated
from .atomic import atomic_path
from .blocks import AttentionBlock, Rope
from .contracts import MATRICES_DTYPES, MATRICES_SCHEMA, STORED_MATRICES_SCHEMA, ModelInfo, check_format
from .errors import WqkError

DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
TORCH_DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}
assert set(TORCH_DTYPES) == set(MATRICES_DTYPES)

WRITE_OPTIONS = dict(
    # dictionaries for the repeated metadata, never for the weights (hashing every value
    # only to give up when the dictionary outgrows its page)
    use_dictionary=[c for c in STORED_MATRICES_SCHEMA.names if c != "weight"],
    # statistics let readers skip row groups by stack and layer; none for the weights
    write_statistics=["stack", "layer", "factor", "head"],
    # one value per batch: a page per head, so the writer buffers one head, not a layer
    # (134 MB less memory at hidden 4096, and faster)
    write_batch_size=1,
)


def write_options(dtype: torch.dtype) -> dict:
    """zstd (level 1) for 16-bit weights, which it makes ~20% smaller; none for float32,
    where it saves ~8% for ~0.6 s of CPU per GB written (a sixth of scoring's time)."""
    zstd = [c for c in STORED_MATRICES_SCHEMA.names if c != "weight" or dtype in (torch.float16, torch.bfloat16)]
    compression = {c: "zstd" if c in zstd else "none" for c in STORED_MATRICES_SCHEMA.names}
    return dict(WRITE_OPTIONS, compression=compression, compression_level=dict.fromkeys(zstd, 1))


def _head_rows(factor: torch.Tensor) -> torch.Tensor:
    """A factor [H, d, k] as its heads' weight rows [H, k, d], contiguous, at a stored
    precision (float32, float16, bfloat16; anything else as float32). For nn.Linear
    weights (views [H, d, k] of [H*k, d]) this is the weight itself, not a copy."""
    t = factor.detach().cpu()
    if t.dtype not in DTYPE_NAMES:
        t = t.to(torch.float32)
    return t.mT.contiguous()


def _binary(rows: torch.Tensor) -> pa.Array:
    """[H, k, d] -> H binary values, the bytes of each [k, d] (no copy)."""
    if sys.byteorder != "little":
        raise WqkError("matrices files hold little-endian values; this machine is big-endian")
    n, nbytes = rows.shape[0], rows[0].numel() * rows.element_size()
    data = rows.view(torch.uint8).numpy().reshape(-1)
    offsets = np.arange(n + 1, dtype=np.int64) * nbytes
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _rope_json(rope: Rope | None) -> str | None:
    if rope is None:
        return None
    return json.dumps({"inv_freq": list(rope.inv_freq), "layout": rope.layout, "context": rope.context})


def block_table(info: ModelInfo, block: AttentionBlock, stored: bool = False) -> pa.Table:
    """One layer's rows: its query heads, then its key heads (each once); with `storage`
    (STORED_MATRICES_SCHEMA) where the factors may be stored quantised."""
    qt, kt = _head_rows(block.q), _head_rows(block.k)
    h, h_kv = block.n_heads, block.n_kv_heads
    n = h + h_kv

    def const(value, typ):
        return repeated(value, n, typ)

    columns = {
        "model": const(info.model, pa.string()),
        "source": const(info.source, pa.string()),
        "provenance": const(info.provenance, pa.string()),
        "model_type": const(info.model_type, pa.string()),
        "synthetic": const(info.synthetic, pa.bool_()),
        "stack": const(block.stack, pa.string()),
        "layer": const(block.layer, pa.int32()),
        "factor": column(["q"] * h + ["k"] * h_kv, pa.string()),
        "head": column([*range(h), *range(h_kv)], pa.int32()),
        "kv_head": column([*(i // block.group_size for i in range(h)), *range(h_kv)], pa.int32()),
        "n_heads": const(h, pa.int32()),
        "n_kv_heads": const(h_kv, pa.int32()),
        "d_q": const(block.q.shape[1], pa.int32()),
        "d_k": const(block.k.shape[1], pa.int32()),
        "head_dim": const(block.q.shape[2], pa.int32()),
        "dtype": column([DTYPE_NAMES[qt.dtype]] * h + [DTYPE_NAMES[kt.dtype]] * h_kv, pa.string()),
        "weight": pa.chunked_array([_binary(qt), _binary(kt)], type=pa.large_binary()),
        "rope": const(_rope_json(block.rope), pa.string()),
        "form": const(block.form, pa.string()),
    }
    if stored:
        columns["storage"] = const(block.storage, pa.string())
    return pa.table(columns, schema=STORED_MATRICES_SCHEMA if stored else MATRICES_SCHEMA)


class MatricesWriter:
    """A matrices Parquet written one block at a time: `with MatricesWriter(out) as w:
    w.write(info, block)`. The file appears (atomically) when the `with` ends without an
    error. With background=True a thread writes each block (in order: the same bytes)
    while the caller scores it; `seconds` is the time spent writing."""

    def __init__(self, out: str | Path, background: bool = False, stored: bool = False):
        self.out = Path(out)
        self.background = background
        self.stored = stored  # a `storage` column (a checkpoint that may hold quantised factors: GGUF)
        self.schema = STORED_MATRICES_SCHEMA if stored else MATRICES_SCHEMA
        self.n = 0
        self.seconds = 0.0
        self._error: BaseException | None = None

    def __enter__(self) -> MatricesWriter:
        self._stack = ExitStack()
        self._tmp = self._stack.enter_context(atomic_path(self.out))
        self._writer: pq.ParquetWriter | None = None  # opened by the first block: its dtype decides
        if self.background:
            self._queue: queue.Queue = queue.Queue(maxsize=1)
            self._thread = threading.Thread(target=self._drain, name="wqk-matrices-writer", daemon=True)
            self._thread.start()
        return self

    def write(self, info: ModelInfo, block: AttentionBlock) -> None:
        """Write a block; in the background, return at once, once the previous block is
        written (so that a block is written while it is scored: no layer is held longer)."""
        if self.background:
            self._queue.join()
        if self._error is not None:
            raise self._error
        if self.background:
            self._queue.put((info, block))
        else:
            self._write(info, block)

    def tee(self, info: ModelInfo, blocks: Iterable[AttentionBlock]) -> Iterator[tuple[ModelInfo, AttentionBlock]]:
        """(info, block) of each block, written as it passes."""
        for block in blocks:
            self.write(info, block)
            yield info, block

    def _write(self, info: ModelInfo, block: AttentionBlock) -> None:
        t0 = time.perf_counter()
        table = block_table(info, block, self.stored)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._tmp, self.schema, **write_options(block.q.dtype))
        self._writer.write_table(table, row_group_size=table.num_rows)
        self.n += 1
        self.seconds += time.perf_counter() - t0

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._write(*item)
                except BaseException as e:  # raised in the caller's thread
                    self._error = e
            del item  # the block is released as soon as it is written
            self._queue.task_done()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self.background:
                self._queue.put(None)
                self._thread.join()
            if self._writer is None and exc_type is None:  # no blocks: an empty file
                self._writer = pq.ParquetWriter(self._tmp, self.schema, **write_options(torch.float32))
            if self._writer is not None:
                self._writer.close()
            if self._error is not None and exc_type is None:
                raise self._error
        except BaseException as e:
            self._stack.__exit__(type(e), e, e.__traceback__)  # removes the temporary file
            raise
        self._stack.__exit__(exc_type, exc, tb)  # renames it into place, or removes it after an error


def write_matrices(info: ModelInfo, blocks: Iterable[AttentionBlock], out: Path, stored: bool = False) -> int:
    """Stream blocks into `out`; returns the number of blocks written."""
    with MatricesWriter(out, stored=stored) as w:
        for block in blocks:
            w.write(info, block)
    return w.n


def _unreadable(path, e: BaseException) -> WqkError:
    reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return WqkError(
        f"{path} is not a readable matrices Parquet ({reason}): truncated or corrupt? "
        "write it again with `wqk extract` or `wqk score SOURCE --matrices-out`"
    )


def read_blocks(path: Path) -> Iterator[tuple[ModelInfo, AttentionBlock]]:
    """Blocks back from a matrices file, one row group (layer) at a time."""
    try:
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=4 << 20)  # half the memory of the defaults
    except (pa.ArrowException, OSError) as e:  # ArrowInvalid for a truncated file
        raise _unreadable(path, e) from None
    check_format(pf.schema_arrow, path)
    for i in range(pf.num_row_groups):
        try:
            table = pf.read_row_group(i)
        except (pa.ArrowException, OSError) as e:
            raise _unreadable(path, e) from None
        yield from table_blocks(table, path)


def table_blocks(table: pa.Table, path="matrices") -> Iterator[tuple[ModelInfo, AttentionBlock]]:
    """The blocks of a matrices table: one per run of rows with the same (stack, layer)."""
    stacks, layers = table.column("stack").to_pylist(), table.column("layer").to_pylist()
    start = 0
    for i in range(1, len(stacks) + 1):
        if i == len(stacks) or (stacks[i], layers[i]) != (stacks[start], layers[start]):
            yield _layer_block(table.slice(start, i - start), path)
            start = i


def _layer_block(t: pa.Table, path) -> tuple[ModelInfo, AttentionBlock]:
    first = {c: t.column(c)[0].as_py() for c in t.column_names if c != "weight"}
    info = ModelInfo(**{c: first[c] for c in ("model", "source", "provenance", "model_type", "synthetic")})
    where = f"{path}: {first['stack']} layer {first['layer']}"
    factor, head = t.column("factor").to_pylist(), t.column("head").to_pylist()
    dtypes = t.column("dtype").to_pylist()
    k = first["head_dim"]

    def tensor(name: str, n: int, d: int) -> torch.Tensor:
        rows = sorted((i for i, f in enumerate(factor) if f == name), key=lambda i: head[i])
        if [head[i] for i in rows] != list(range(n)):
            raise WqkError(f"{where}: factor {name} has heads {[head[i] for i in rows]}, expected 0..{n - 1}")
        names = {dtypes[i] for i in rows}
        if len(names) != 1 or not names <= set(TORCH_DTYPES):
            raise WqkError(f"{where}: factor {name} has dtype(s) {sorted(map(str, names))}; one of {MATRICES_DTYPES}")
        dtype = TORCH_DTYPES[names.pop()]
        col = t.column("weight")
        col = col.slice(rows[0], n) if rows == list(range(rows[0], rows[0] + n)) else col.take(rows)
        arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + n + 1]
        nbytes = k * d * dtype.itemsize
        if arr.null_count or (np.diff(offsets) != nbytes).any():
            raise WqkError(f"{where}: factor {name} values are not head_dim x d = {k} x {d} {dtype} each")
        with warnings.catch_warnings():  # Arrow's buffer, shared (not copied): nothing writes to it
            warnings.simplefilter("ignore", UserWarning)
            data = torch.frombuffer(arr.buffers()[2], dtype=torch.uint8, count=n * nbytes, offset=int(offsets[0]))
        return data.view(dtype).view(n, k, d).mT  # [n, d, k] views of the rows, as adapters give nn.Linear weights

    q = tensor("q", first["n_heads"], first["d_q"])
    kk = tensor("k", first["n_kv_heads"], first["d_k"])
    rope = json.loads(first["rope"]) if first.get("rope") else None
    rope = Rope(tuple(rope["inv_freq"]), rope["layout"], int(rope["context"])) if rope else None
    form = first.get("form") or "bilinear"  # files written before the column: plain forms
    block = AttentionBlock(first["stack"], first["layer"], q, kk, rope=rope, form=form, storage=first.get("storage"))
    return info, block
