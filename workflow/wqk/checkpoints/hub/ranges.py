"""The q/k byte ranges of remote safetensors shards, fetched into one local model.safetensors,
or of one remote GGUF file, fetched into a GGUF file of its own (fetch_gguf).

Each shard's header is read with one range request for its first HEADER_PROBE bytes (a second
only for a longer header) and parsed by formats.safetensors (the one safetensors header parser);
the query/key tensors' ranges are coalesced where adjacent and downloaded WORKERS at a time,
each written at its own offset of `model.safetensors.part` after our own header. A `.part.json`
sidecar names the plan, how many bytes of each range are written and their xxh3, so an interrupted
fetch resumes each range where it stopped; a dropped connection or a stall is retried in place.
The sidecar only vouches for bytes on disk: the part is fsynced before each record, and a resume
re-reads each recorded prefix and re-fetches a range whose xxh3 no longer matches (a power loss
that kept the record but not the data).

A GGUF's header (metadata, tokenizer, tensor table) is read by ranges of growing size from its
start, parsed by formats.gguf (which also writes the new header: the metadata as stored, only
the picked tensors); the tensors the record reads (q/k, their biases and norms, the pre-norm
gain: under their HF names, as for safetensors) are then fetched like a shard's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import xxhash

from ...errors import CorruptCheckpoint, MissingTensor, SourceUnavailable
from ...progress import bar as progress_bar
from ..formats import gguf as gguf_format
from ..formats.safetensors import header_length, parse_header, read_safetensors_header
from .client import Hub, Stalled, Unreachable
from .select import Factory, Pick, is_qk_tensor, selection_key, tensor_picker

log = logging.getLogger(__name__)

RETRIES = 3  # per byte range, on dropped connections; a range resumes where it stopped
WORKERS = 4  # byte ranges downloaded at once
HEADER_PROBE = 64 * 1024  # bytes asked for to read a shard's header: most headers fit
GGUF_BLOCK_MAX = 1 << 20  # the largest range read for a GGUF header (they double from HEADER_PROBE)
RECORD_EVERY = 16 << 20  # bytes of one range between two records of its progress in the sidecar
_REMOTE_FIX = "fetch whole files with --all-weights"  # a shard on the hub that is not sound safetensors


class Interrupted(SourceUnavailable):
    """A fetch stopped part way (dropped connections, stalls, retried in vain): its staging folder
    is kept, and a rerun resumes from the bytes it vouches for."""


def retrying(fn, what: str):
    """fn(), called again (after 0.5 s, 1 s, 2 s ...) while it raises Unreachable for a dropped
    connection, RETRIES times at most (the client has retried 429/5xx already)."""
    for attempt in range(RETRIES + 1):
        try:
            return fn()
        except Unreachable as e:
            if attempt == RETRIES or e.status is not None:
                raise
            time.sleep(0.5 * 2**attempt)
            log.warning("retrying %s (%d/%d)", what, attempt + 1, RETRIES)


@dataclass
class _Range:
    file: str
    start: int  # absolute byte offsets in the source file
    end: int
    out: int  # offset of `start` in our data section


def fetch_qk(hub: Hub, sha: str, shards: list[str], stage: Path, progress: bool, pick: Pick = is_qk_tensor) -> dict:
    """Write stage/model.safetensors with the tensors of `shards` (files of the repo at commit
    `sha`) that `pick` takes; the manifest entries: tensors, qk_bytes, requests, selection."""
    head, ranges, total = _plan(hub, sha, shards, pick)
    out = _fetch_ranges(hub, sha, head, ranges, total, stage / "model.safetensors", progress)
    try:
        n = len(read_safetensors_header(out))
    except CorruptCheckpoint as e:
        raise CorruptCheckpoint(
            f"{hub.repo_id}: the fetched file does not parse ({e}): delete {stage} and rerun"
        ) from e
    return {"tensors": n, "qk_bytes": total, "requests": len(ranges), "selection": selection_key(pick)}


def fetch_gguf(hub: Hub, sha: str, filename: str, out: Path, progress: bool, tensors: Factory | None = None) -> dict:
    """Write `out`, a GGUF file with the metadata of the repo's GGUF `filename` (at commit `sha`)
    and the tensors the record of its architecture reads (tensors(config) on their HF names,
    else the name heuristic); the manifest entries as fetch_qk's, plus header_bytes."""
    where = f"{hub.repo_id}@{sha}/{filename}"
    remote = _RemoteFile(hub, sha, filename)
    header = gguf_format.read_header(remote, where, keep_meta=True)
    for t in header.tensors.values():
        if remote.size is not None and t.offset + t.nbytes > remote.size:
            raise CorruptCheckpoint(
                f"{where}: tensor {t.name!r} needs bytes up to {t.offset + t.nbytes} but the file has "
                f"{remote.size}: the file on the hub is truncated; report it to the repository's owner"
            )
    hf = gguf_format.hf_names(header.tensors)
    gguf_format.check_attention(hf, where)
    pick = tensor_picker(gguf_format.config_of(header, where), tensors)
    of_gguf = {g: h for h, g in hf.items()}
    names = sorted((n for n in header.tensors if pick(of_gguf.get(n, n))), key=lambda n: header.tensors[n].offset)
    head, offsets = gguf_format.compact_header(header, names)
    ranges: list[_Range] = []
    for name in names:
        t, at = header.tensors[name], offsets[name]
        last = ranges[-1] if ranges else None
        if last and t.offset >= last.end and t.offset - last.start == at - last.out:
            last.end = t.offset + t.nbytes  # the next tensor of the file, at the same gap: one request
        else:
            ranges.append(_Range(filename, t.offset, t.offset + t.nbytes, at))
    total = max(offsets[n] + header.tensors[n].nbytes for n in names)
    _fetch_ranges(hub, sha, head, ranges, total, out, progress)
    try:
        gguf_format.GgufStore(out)
    except CorruptCheckpoint as e:
        raise CorruptCheckpoint(f"{hub.repo_id}: the fetched file does not parse ({e}): delete {out} and rerun") from e
    return {
        "tensors": len(names),
        "qk_bytes": total,
        "requests": len(ranges),
        "header_bytes": remote.fetched,
        "selection": selection_key(pick),
    }


class _RemoteFile:
    """The start of a remote file as a binary file-like object for a header parser: read()
    asks the hub for the next range, HEADER_PROBE bytes first, each range twice the last, at most
    GGUF_BLOCK_MAX: a header (mostly the tokenizer: megabytes) costs a few requests and at most
    GGUF_BLOCK_MAX bytes past its end."""

    def __init__(self, hub: Hub, sha: str, filename: str):
        self.hub, self.sha, self.filename = hub, sha, filename
        first, self.size = retrying(lambda: hub.head(filename, sha, HEADER_PROBE), f"{filename} header")
        self.data, self.pos, self.block = bytearray(first), 0, HEADER_PROBE
        self.ended = len(first) < HEADER_PROBE or (self.size is not None and len(first) >= self.size)

    @property
    def fetched(self) -> int:
        return len(self.data)

    def read(self, n: int) -> bytes:
        while self.pos + n > len(self.data) and not self.ended:
            self.block = min(self.block * 2, GGUF_BLOCK_MAX)
            start = len(self.data)
            end = start + max(self.block, self.pos + n - start)
            if self.size is not None:
                end = min(end, self.size)
            got = retrying(
                lambda a=start, b=end: self.hub.read(self.filename, self.sha, a, b), f"{self.filename} header"
            )
            self.data += got
            self.ended = len(got) < end - start or (self.size is not None and len(self.data) >= self.size)
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += len(out)
        return out


def _fetch_ranges(hub: Hub, sha: str, head: bytes, ranges: list[_Range], total: int, out: Path, progress: bool) -> Path:
    """Write `out`: `head`, then each range at its offset after it, resumable (a `.part` file and
    its `.part.json` sidecar beside `out`); `out` appears only when every byte is in."""
    stage = out.parent
    part, sidecar = out.with_name(out.name + ".part"), out.with_name(out.name + ".part.json")
    plan_id = hashlib.sha256(head + json.dumps([r.__dict__ for r in ranges]).encode()).hexdigest()
    done, sums = _written(part, sidecar, plan_id, len(head) + total, ranges, len(head))
    if done is None:  # sidecar gone first, then the part: a sidecar must never vouch for a stale part
        sidecar.unlink(missing_ok=True)
        part.write_bytes(head)
        done, sums = [0] * len(ranges), [xxhash.xxh3_64() for _ in ranges]
    elif sum(done):
        log.info("resuming %s: %d of %d bytes already here", hub.repo_id, sum(done), total)
    with (
        open(part, "r+b") as fh,
        progress_bar(
            total=total,
            initial=sum(done),
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=f"{hub.repo_id} q/k",
            enabled=progress,
        ) as bar,
    ):
        fh.truncate(len(head) + total)  # the ranges land at their own offsets
        os.pwrite(fh.fileno(), head, 0)  # a power loss may have lost it too
        book = _Book(fh.fileno(), len(head), ranges, done, sums, sidecar, {"plan": plan_id, "sha": sha}, bar)
        book.record()
        _copy_all(hub, sha, book)
        os.fsync(fh.fileno())
    os.replace(part, out)
    sidecar.unlink()
    fsync_dir(stage)
    return out


def _written(
    part: Path, sidecar: Path, plan_id: str, size: int, ranges: list[_Range], head_len: int
) -> tuple[list[int] | None, list]:
    """(bytes of each range already in `part`, their xxh3 states), from the sidecar of an
    interrupted fetch of the same plan (per range; or, from an older sequential fetch, the part's
    size); (None, []): start afresh. A range whose recorded xxh3 does not match the bytes in the
    part starts again from its first byte."""
    try:
        record = json.loads(sidecar.read_text())
        have = part.stat().st_size
    except (OSError, ValueError, RecursionError):
        return None, []
    if not isinstance(record, dict) or record.get("plan") != plan_id:
        return None, []
    if "done" not in record:  # written one range after the other, up to the part's size
        data = have - (size - sum(r.end - r.start for r in ranges))
        done = [min(max(data - r.out, 0), r.end - r.start) for r in ranges]
        recorded = [None] * len(ranges)  # written before records held checksums: taken as they are
    else:
        done, recorded = record["done"], record.get("xxh3", [None] * len(ranges))
        if have != size or not isinstance(done, list) or len(done) != len(ranges):
            return None, []
        if not all(isinstance(d, int) and 0 <= d <= r.end - r.start for d, r in zip(done, ranges)):
            return None, []
        if not isinstance(recorded, list) or len(recorded) != len(ranges):
            return None, []
    sums = [xxhash.xxh3_64() for _ in ranges]
    with open(part, "rb") as fh:
        for i, r in enumerate(ranges):
            fh.seek(head_len + r.out)
            left = done[i]
            while left > 0:
                chunk = fh.read(min(left, 1 << 22))
                if not chunk:
                    break
                sums[i].update(chunk)
                left -= len(chunk)
            if left or (recorded[i] is not None and sums[i].hexdigest() != recorded[i]):
                log.warning(
                    "%s bytes %d-%d: the bytes on disk are not the ones recorded: fetching them again",
                    r.file,
                    r.start,
                    r.end - 1,
                )
                done[i], sums[i] = 0, xxhash.xxh3_64()
    return done, sums


def _remote_header(hub: Hub, sha: str, filename: str) -> tuple[dict, int]:
    """(tensor entries, byte offset where the data section starts) of a remote safetensors file."""
    where = f"{hub.repo_id}@{sha}/{filename}"
    first, size = retrying(lambda: hub.head(filename, sha, HEADER_PROBE), f"{filename} header")
    n = header_length(first, where, fix=_REMOTE_FIX)
    raw = first[8 : 8 + n]
    if len(raw) < n and (size is None or size >= 8 + n):  # a header longer than the probe
        raw += retrying(lambda: hub.read(filename, sha, len(first), 8 + n), f"{filename} header")
    data_len = None if size is None else size - 8 - n
    if data_len is not None and data_len < 0:
        raise CorruptCheckpoint(f"{where}: header length {n} exceeds the file size {size}; {_REMOTE_FIX}")
    return parse_header(raw, where, data_len, fix=_REMOTE_FIX), 8 + n


def _plan(hub: Hub, sha: str, shards: list[str], pick: Pick = is_qk_tensor) -> tuple[bytes, list[_Range], int]:
    """Our file's header bytes, the coalesced source ranges in write order, data size; the plan
    (hence the resume sidecar's plan id) changes with the selection."""
    out_header: dict = {}
    ranges: list[_Range] = []
    pos = 0
    for shard in shards:
        header, data_start = _remote_header(hub, sha, shard)
        picked = sorted((info["data_offsets"], name, info) for name, info in header.items() if pick(name))
        for (a, b), name, info in picked:
            out_header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [pos, pos + b - a]}
            last = ranges[-1] if ranges else None
            if last and last.file == shard and last.end == data_start + a:
                last.end = data_start + b  # adjacent in the source: one request
            else:
                ranges.append(_Range(shard, data_start + a, data_start + b, pos))
            pos += b - a
    if not out_header:
        raise MissingTensor(
            f"no query/key tensors found in {hub.repo_id}@{sha} ({', '.join(shards)}; selection "
            f"{selection_key(pick)}): fetch with --all-weights and check the record's tensor names"
        )
    out_header["__metadata__"] = {"format": "pt", "wqk_source": f"{hub.repo_id}@{sha}"}
    text = json.dumps(out_header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads its header to 8 bytes
    return struct.pack("<Q", len(text)) + text, ranges, pos


class _Book:
    """The part file's ranges: writes each chunk at its offset, counts what each range has (and
    its xxh3), and records both in the sidecar as ranges finish and every RECORD_EVERY bytes: the
    counts taken, the part fsynced, then the sidecar written, fsynced and renamed into place. A
    count grows only after its bytes are written, so a record never vouches for missing bytes."""

    def __init__(self, fd, head_len, ranges: list[_Range], done: list[int], sums: list, sidecar: Path, meta, bar):
        self.fd, self.head_len, self.ranges, self.done, self.sums = fd, head_len, ranges, done, sums
        self.sidecar, self.meta, self.bar = sidecar, meta, bar
        self.lock = threading.Lock()  # done and sums of all ranges, the bar
        self.record_lock = threading.Lock()  # one record at a time
        self.stop = threading.Event()  # a range failed: the others stop at their next chunk

    def missing(self, i: int) -> int:
        r = self.ranges[i]
        return r.end - r.start - self.done[i]

    def write(self, i: int, chunk: bytes) -> None:
        offset = self.head_len + self.ranges[i].out + self.done[i]
        view = memoryview(chunk)[: self.missing(i)]  # never past the range, whatever the server sends
        chunk = view
        while view:
            n = os.pwrite(self.fd, view, offset)
            view, offset = view[n:], offset + n
        with self.lock:  # only this range's worker changes done[i]; record() reads all at once
            before = self.done[i]
            self.sums[i].update(chunk)
            self.done[i] += len(chunk)
            self.bar.update(len(chunk))
        if before // RECORD_EVERY != self.done[i] // RECORD_EVERY:
            self.record()

    def record(self) -> None:
        with self.record_lock:
            with self.lock:
                state = self.meta | {"done": list(self.done), "xxh3": [h.hexdigest() for h in self.sums]}
            os.fsync(self.fd)  # the bytes this record vouches for are on disk before it is
            tmp = self.sidecar.with_name(self.sidecar.name + ".tmp")
            with open(tmp, "w") as fh:
                fh.write(json.dumps(state))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.sidecar)
            fsync_dir(self.sidecar.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename or new file in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_all(hub: Hub, sha: str, book: _Book) -> None:
    """Every range not yet complete, WORKERS at a time; the first failure (in plan order) raised
    once the running ranges have stopped and recorded how far they got."""
    todo = [i for i in range(len(book.ranges)) if book.missing(i) > 0]
    if not todo:
        return
    with ThreadPoolExecutor(min(WORKERS, len(todo)), thread_name_prefix="wqk-range") as pool:
        futures = [pool.submit(_copy_range, hub, sha, book, i) for i in todo]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        finally:  # a failure, or KeyboardInterrupt: start no more ranges, stop the running ones
            book.stop.set()
            for f in futures:
                f.cancel()
    book.record()
    for f in futures:
        if not f.cancelled() and f.exception() is not None:
            raise f.exception()
    if any(book.missing(i) for i in todo):  # cancelled ranges: only after another failed
        raise Interrupted(f"download of {hub.repo_id} interrupted: rerun to resume from where it stopped")


def _copy_range(hub: Hub, sha: str, book: _Book, i: int) -> None:
    """Write the part of range i not yet in the part file, retrying dropped connections in place."""
    r = book.ranges[i]

    def rest() -> None:
        if book.stop.is_set() or book.missing(i) <= 0:
            return
        for chunk in hub.stream(r.file, sha, r.end - book.missing(i), r.end):
            book.write(i, chunk)
            if book.stop.is_set():
                return
        if book.missing(i) > 0:
            raise Unreachable(f"the hub stopped short in {r.file}")

    try:
        retrying(rest, f"{r.file} bytes {r.start}-{r.end}")
    except Stalled as e:  # its message names the range and says how to resume
        book.stop.set()
        raise Interrupted(str(e)) from e
    except Unreachable as e:
        book.stop.set()
        raise Interrupted(f"download of {hub.repo_id} interrupted ({e}): rerun to resume from where it stopped") from e
    finally:
        book.record()
