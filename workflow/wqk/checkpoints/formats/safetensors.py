"""safetensors: the header parser (also used by the hub's byte-range fetch) and the store.

Every store checks its files when it is built (headers, sizes), so a truncated download fails
at open time with CorruptCheckpoint naming the file, not halfway through an extraction.
Torch is imported only when a tensor is read.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ...errors import CorruptCheckpoint
from . import FileStore, missing_tensor

_LFS_POINTER = b"version https://git-lfs"
HEADER_LIMIT = 100_000_000  # bytes of header JSON the safetensors library accepts; more is a corrupt file
REDOWNLOAD = "re-download it (a truncated or interrupted download?)"  # the fix for a local file
_ST_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


def read_safetensors_header(path: Path) -> dict:
    """The header of a local .safetensors file, checked against the file size; CorruptCheckpoint if not sound."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        n = header_length(fh.read(len(_LFS_POINTER)), str(path), size)
        fh.seek(8)
        raw = fh.read(n)
    return parse_header(raw, str(path), size - 8 - n)


def header_length(head: bytes, where: str, size: int | None = None, fix: str = REDOWNLOAD) -> int:
    """The length n of the header JSON that follows the first 8 bytes of a safetensors file.

    head: the file's first 8 bytes, or 23 (enough to tell a whole git-lfs pointer from a prefix of one).
    size: the file size when known (a local file), checked against n; where: the file named in errors.
    """
    if len(head) >= 8 and _LFS_POINTER.startswith(head[: len(_LFS_POINTER)]):
        raise CorruptCheckpoint(
            f"{where} is a git-lfs pointer, not the weights; run `git lfs pull` or fetch via the hub"
        )
    if len(head) < 8:
        raise CorruptCheckpoint(f"{where} is {len(head)} bytes, too short for a safetensors header; {fix}")
    (n,) = struct.unpack("<Q", head[:8])
    if size is not None and n > size - 8:
        raise CorruptCheckpoint(f"{where}: header length {n} exceeds the file size {size}; {fix}")
    if not 2 <= n <= HEADER_LIMIT:
        raise CorruptCheckpoint(f"{where}: a header of {n} bytes is not safetensors; {fix}")
    return n


def parse_header(raw: bytes, where: str, data_len: int | None = None, fix: str = REDOWNLOAD) -> dict:
    """The tensor entries (name -> dtype, shape, data_offsets; no __metadata__) of the header JSON `raw`.

    Checks the JSON, each entry's offsets and that it spans numel * itemsize bytes for a known dtype;
    data_len (the bytes after the header, when known) bounds the offsets. CorruptCheckpoint naming
    `where` and the fix when any check fails.
    """
    try:
        header = json.loads(raw)
        if not isinstance(header, dict):
            raise ValueError("header is not a JSON object")
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptCheckpoint(f"{where}: safetensors header is not valid JSON ({e}); {fix}") from None
    except RecursionError:  # JSON nested past Python's recursion limit: no safetensors header does that
        raise CorruptCheckpoint(
            f"{where}: safetensors header is JSON nested too deeply to be a header; {fix}"
        ) from None
    header.pop("__metadata__", None)
    for name, info in header.items():
        try:
            begin, end = (int(x) for x in info["data_offsets"])
            shape = [int(x) for x in info["shape"]]
            dtype = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            raise CorruptCheckpoint(f"{where}: header entry for tensor {name!r} is malformed; {fix}") from None
        if not 0 <= begin <= end:
            raise CorruptCheckpoint(f"{where}: tensor {name!r} has bad data offsets [{begin}, {end}]; {fix}")
        if data_len is not None and end > data_len:
            raise CorruptCheckpoint(
                f"{where}: tensor {name!r} ends at data byte {end} but the file holds only {data_len} data bytes; {fix}"
            )
        numel = 1
        for s in shape:
            numel *= s
        if dtype in _ST_ITEMSIZE and end - begin != numel * _ST_ITEMSIZE[dtype]:
            raise CorruptCheckpoint(
                f"{where}: tensor {name!r} ({dtype} {shape}) spans {end - begin} bytes, "
                f"expected {numel * _ST_ITEMSIZE[dtype]}; {fix}"
            )
    return header


class SafetensorsStore(FileStore):
    """One or more .safetensors files (shards); tensors read lazily with safe_open.

    weight_map (tensor -> file, from model.safetensors.index.json) decides which shard
    serves a name; without it each file's header does, and a name in two files is an error.
    """

    def __init__(self, files: list[Path], weight_map: dict[str, Path] | None = None):
        self.files = [Path(f) for f in files]
        self._where: dict[str, Path] = {}
        headers = {f: read_safetensors_header(f) for f in self.files}
        if weight_map is not None:
            for name, f in weight_map.items():
                f = Path(f)
                if f not in headers:
                    raise CorruptCheckpoint(
                        f"index names {f} for tensor {name!r}, but that file is not among the shards"
                    )
                if name not in headers[f]:
                    raise CorruptCheckpoint(
                        f"index places tensor {name!r} in {f}, but that shard does not hold it; "
                        "the shards and the index are from different revisions: re-download"
                    )
                self._where[name] = f
        else:
            for f, header in headers.items():
                for name in header:
                    if name in self._where:
                        raise CorruptCheckpoint(
                            f"tensor {name!r} is in both {self._where[name]} and {f}; "
                            "keep one checkpoint per folder (or add a model.safetensors.index.json)"
                        )
                    self._where[name] = f

    def get(self, name: str):
        f = self._where.get(name)
        if f is None:
            raise missing_tensor(name, self.files, len(self._where))
        import torch
        from safetensors import safe_open

        try:
            with safe_open(str(f), framework="pt") as fh:
                t = fh.get_tensor(name)
        except Exception as e:  # safetensors raises its own SafetensorError for corrupt files
            raise CorruptCheckpoint(f"{f}: cannot read tensor {name!r} ({e}); re-download the file") from None
        # the stored precision (scoring converts where it computes); other dtypes as float32
        return t if t.dtype in (torch.float32, torch.float16, torch.bfloat16) else t.to(torch.float32)
