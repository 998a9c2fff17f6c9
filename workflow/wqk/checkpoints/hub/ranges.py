"""The q/k byte ranges of remote safetensors shards, fetched into one local model.safetensors.

Each shard's header is read with two range requests and parsed by formats.safetensors (the one
safetensors header parser); the query/key tensors' ranges are coalesced where adjacent and
streamed into `model.safetensors.part` after our own header. A `.part.json` sidecar names the
plan, so an interrupted fetch resumes from the bytes already written; a dropped connection is
retried in place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import CorruptCheckpoint, MissingTensor, SourceUnavailable
from ..formats.safetensors import header_length, parse_header, read_safetensors_header
from .client import Hub, Unreachable
from .select import is_qk_tensor

log = logging.getLogger(__name__)

RETRIES = 3  # per byte range, on dropped connections and 5xx; a range resumes where it stopped
_REMOTE_FIX = "fetch whole files with --all-weights"  # a shard on the hub that is not sound safetensors


def retrying(fn, what: str):
    """fn(), called again (after 0.5 s, 1 s, 2 s ...) while it raises Unreachable, RETRIES times at most."""
    for attempt in range(RETRIES + 1):
        try:
            return fn()
        except Unreachable:
            if attempt == RETRIES:
                raise
            time.sleep(0.5 * 2**attempt)
            log.warning("retrying %s (%d/%d)", what, attempt + 1, RETRIES)


@dataclass
class _Range:
    file: str
    start: int  # absolute byte offsets in the source file
    end: int
    out: int  # offset of `start` in our data section


def fetch_qk(hub: Hub, sha: str, shards: list[str], stage: Path, progress: bool) -> dict:
    """Write stage/model.safetensors with the q/k tensors of `shards` (files of the repo at commit
    `sha`); the manifest entries: tensors, qk_bytes, requests."""
    from tqdm.auto import tqdm

    head, ranges, total = _plan(hub, sha, shards)
    part, sidecar = stage / "model.safetensors.part", stage / "model.safetensors.part.json"
    plan_id = hashlib.sha256(head + json.dumps([r.__dict__ for r in ranges]).encode()).hexdigest()
    have = 0
    if part.exists() and sidecar.exists() and json.loads(sidecar.read_text()).get("plan") == plan_id:
        have = min(max(part.stat().st_size - len(head), 0), total)
    else:  # part first: a sidecar must never vouch for a stale part
        part.write_bytes(head)
        sidecar.write_text(json.dumps({"plan": plan_id, "sha": sha}))
    if have:
        log.info("resuming %s: %d of %d bytes already here", hub.repo_id, have, total)
    with open(part, "r+b") as fh, tqdm(total=total, initial=have, unit="B", unit_scale=True,
                                      unit_divisor=1024, desc=f"{hub.repo_id} q/k",
                                      disable=None if progress else True) as bar:
        fh.truncate(len(head) + have)  # drop a torn tail beyond what we account for
        fh.seek(len(head) + have)
        for r in ranges:
            _copy_range(hub, sha, r, fh, len(head), bar)
        fh.flush()
        os.fsync(fh.fileno())
        if fh.tell() != len(head) + total:
            raise CorruptCheckpoint(f"{hub.repo_id}: wrote {fh.tell()} bytes, expected "
                                    f"{len(head) + total}: delete {stage} and rerun")
    out = stage / "model.safetensors"
    os.replace(part, out)
    sidecar.unlink()
    try:
        n = len(read_safetensors_header(out))
    except CorruptCheckpoint as e:
        raise CorruptCheckpoint(f"{hub.repo_id}: the fetched file does not parse ({e}): "
                                f"delete {stage} and rerun") from e
    return {"tensors": n, "qk_bytes": total, "requests": len(ranges)}


def _remote_header(hub: Hub, sha: str, filename: str) -> tuple[dict, int]:
    """(tensor entries, byte offset where the data section starts) of a remote safetensors file."""
    where = f"{hub.repo_id}@{sha}/{filename}"
    first8 = retrying(lambda: hub.read(filename, sha, 0, 8), f"{filename} header")
    n = header_length(first8, where, fix=_REMOTE_FIX)
    raw = retrying(lambda: hub.read(filename, sha, 8, 8 + n), f"{filename} header")
    return parse_header(raw, where, fix=_REMOTE_FIX), 8 + n


def _plan(hub: Hub, sha: str, shards: list[str]) -> tuple[bytes, list[_Range], int]:
    """Our file's header bytes, the coalesced source ranges in write order, data size."""
    out_header: dict = {}
    ranges: list[_Range] = []
    pos = 0
    for shard in shards:
        header, data_start = _remote_header(hub, sha, shard)
        picked = sorted((info["data_offsets"], name, info) for name, info in header.items()
                        if is_qk_tensor(name))
        for (a, b), name, info in picked:
            out_header[name] = {"dtype": info["dtype"], "shape": info["shape"],
                                "data_offsets": [pos, pos + b - a]}
            last = ranges[-1] if ranges else None
            if last and last.file == shard and last.end == data_start + a:
                last.end = data_start + b  # adjacent in the source: one request
            else:
                ranges.append(_Range(shard, data_start + a, data_start + b, pos))
            pos += b - a
    if not out_header:
        raise MissingTensor(f"no query/key tensors found in {hub.repo_id}@{sha} ({', '.join(shards)}):"
                            " fetch with --all-weights and check the adapter's tensor names")
    out_header["__metadata__"] = {"format": "pt", "wqk_source": f"{hub.repo_id}@{sha}"}
    text = json.dumps(out_header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads its header to 8 bytes
    return struct.pack("<Q", len(text)) + text, ranges, pos


def _copy_range(hub: Hub, sha: str, r: _Range, fh, head_len: int, bar) -> None:
    """Append the part of range r not yet in fh, retrying dropped connections in place."""

    def rest() -> None:
        done = fh.tell() - head_len - r.out  # bytes of this range already written
        if done >= r.end - r.start:
            return
        for chunk in hub.stream(r.file, sha, r.start + max(done, 0), r.end):
            fh.write(chunk)
            bar.update(len(chunk))
        if fh.tell() - head_len - r.out < r.end - r.start:
            raise Unreachable(f"the hub stopped short in {r.file}")

    try:
        retrying(rest, f"{r.file} bytes {r.start}-{r.end}")
    except Unreachable as e:
        raise SourceUnavailable(f"download of {hub.repo_id} interrupted ({e}): rerun "
                                "to resume from where it stopped") from e
