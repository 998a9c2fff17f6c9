"""Fetch from the Hugging Face hub only what extraction needs.

`fetch_hub(repo_id)` returns a folder of our own, `<cache>/<slug>/<commit sha>/`, holding
config.json, the weights and a `.revision` file with the commit sha. For safetensors repos
(the default, qk_only=True) it reads each shard's header with HTTP range requests and then
only the byte ranges of the query/key tensors, written into one local model.safetensors:
a 7B model moves ~1/8 of its weights (fused qkv tensors whole), not all of it.
Whole files (pytorch_model.bin repos, qk_only=False) go through huggingface_hub into the
standard HF cache and are hard-linked (else symlinked) into our folder.

The HF cache snapshot is never written into; our folder is built under a temporary name and
renamed when complete, so a folder with `.revision` is always whole. An interrupted range
download resumes from its `.part` file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import logging
import os
import re
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from ... import slug
from ...errors import CorruptCheckpoint, MissingTensor, SourceUnavailable, WqkError

log = logging.getLogger(__name__)

TIMEOUT_S = float(os.environ.get("WQK_HUB_TIMEOUT", "10"))  # per request: offline fails in seconds
RETRIES = 3  # per byte range, on dropped connections and 5xx; resumes where it stopped
MAX_HEADER = 100 << 20  # a safetensors header larger than this is a corrupt file

_SHA = re.compile(r"^[0-9a-f]{40}$")
_QK_TOKENS = {"q", "k", "qk", "qkv", "kv", "query", "key", "wq", "wk", "wqkv", "querykey"}
_QK_COMPONENTS = {"c_attn", "in_proj", "in_proj_weight", "in_proj_bias"}


# ---------------------------------------------------------------- selection


def is_qk_tensor(name: str) -> bool:
    """Whether tensor `name` holds (part of) a query or key projection.

    Errs on the side of too much: fused qkv tensors are taken whole, as are q/k biases and
    q/k norms. A dotted component matches when one of its "_"-separated words is q, k, qk,
    qkv, kv, query, key, wq, wk or wqkv (q_proj, k_lin, query_key_value, to_q, attn_qkv,
    SelfAttention.q, Wqkv, kv_b_proj ...), or it is c_attn / in_proj* (GPT-2,
    nn.MultiheadAttention), or it is `linears.0`/`linears.1` (q, k of the annotated
    transformer's 4-linear attention).
    """
    parts = name.lower().split(".")
    for i, part in enumerate(parts):
        if part in _QK_COMPONENTS or _QK_TOKENS.intersection(part.split("_")):
            return True
        if part in ("linears", "linear") and i + 1 < len(parts) and parts[i + 1] in ("0", "1"):
            return True
        if part in ("linear_0", "linear_1"):
            return True
    return False


def parse_hub_id(source: str) -> tuple[str, str | None] | None:
    """`org/name[@revision]` (or a bare legacy name like `gpt2`) -> (repo_id, revision);
    None for anything that is not a hub id (local paths, `pypi:...`)."""
    if ":" in source or source.startswith((".", "/", "~")) or os.path.exists(source):
        return None
    m = re.fullmatch(r"([\w.-]+(?:/[\w.-]+)?)(?:@(\S+))?", source)
    return (m.group(1), m.group(2)) if m else None


# ---------------------------------------------------------------- estimate

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "float8_e4m3fn": 1}
_GATED = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gemma", "gemma2",
          "gemma3_text", "phi3", "olmo", "olmo2", "granite", "starcoder2"}  # 3-matrix MLPs
_FUSED = {"gpt2", "openai-gpt", "gpt_bigcode", "gpt_neox", "bloom", "falcon", "mpt", "phi3",
          "codegen", "chatglm", "dbrx", "modernbert"}  # q, k, v in one tensor: fetched whole


def _first(c: dict, *keys, default=None):
    return next((c[k] for k in keys if c.get(k) is not None), default)


def estimate_qk_bytes(config: dict) -> tuple[int, int]:
    """(bytes of the tensors `is_qk_tensor` selects, bytes of all parameters), from a
    config.json alone.

    Assumptions: weights stored in the config's `torch_dtype`/`dtype` (float32 if absent);
    fused-qkv architectures (`_FUSED`) move V with Q and K; MLPs have 3 matrices for the
    gated families (`_GATED`, T5 "gated-*") else 2, times the number of experts; embeddings
    counted once plus an untied LM head; biases, norms and position tables ignored (< 1%).
    Encoder-decoder decoders carry a cross-attention whose q/k are counted too. Composite
    configs (text_config, vision_config, encoder, decoder ...) are summed.
    """
    subs = [v for k, v in config.items() if isinstance(v, dict) and
            (k.endswith("_config") or k in ("encoder", "decoder"))]
    d = _first(config, "hidden_size", "d_model", "n_embd", "dim", "embed_dim")
    if d is None:
        qk = tot = 0
        for s in subs:
            s = {"torch_dtype": config.get("torch_dtype", config.get("dtype")), **s}
            a, b = estimate_qk_bytes(s)
            qk, tot = qk + a, tot + b
        return qk, tot
    mt = str(config.get("model_type", ""))
    nbytes = _DTYPE_BYTES.get(str(_first(config, "torch_dtype", "dtype", default="float32")), 4)
    h = int(_first(config, "num_attention_heads", "n_head", "num_heads", "n_heads",
                   "encoder_attention_heads", default=max(1, d // 64)))
    hkv = 1 if config.get("multi_query") else int(
        _first(config, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=h))
    hd = int(_first(config, "head_dim", "d_kv", "attention_head_size", default=d // h))
    ff = int(_first(config, "intermediate_size", "d_ff", "n_inner", "ffn_dim", "encoder_ffn_dim",
                    default=4 * d))
    gated = mt in _GATED or str(config.get("feed_forward_proj", "")).startswith("gated")
    mlp = (3 if gated else 2) * d * ff * int(_first(config, "num_local_experts", "num_experts",
                                                    default=1))
    q, k = d * h * hd, d * hkv * hd
    qk_self = q + k + (k if mt in _FUSED else 0)
    attn = q + 2 * k + h * hd * d
    if config.get("is_encoder_decoder"):
        n_enc = int(_first(config, "encoder_layers", "num_layers", default=0))
        n_dec = int(_first(config, "decoder_layers", "num_decoder_layers", "num_layers", default=0))
        cross_qk, cross = 2 * d * h * hd, 4 * d * h * hd
        qk = n_enc * qk_self + n_dec * (qk_self + cross_qk)
        layers = n_enc * (attn + mlp) + n_dec * (attn + cross + mlp)
    else:
        n = int(_first(config, "num_hidden_layers", "n_layer", "num_layers", "n_layers", default=0))
        qk, layers = n * qk_self, n * (attn + mlp)
    vocab = int(config.get("vocab_size") or 0)
    emb = vocab * d * (1 if config.get("tie_word_embeddings", True) else 2)
    return qk * nbytes, (layers + emb) * nbytes


# ---------------------------------------------------------------- errors


def _offline() -> bool:
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return constants.is_offline_mode() or env.strip().lower() in ("1", "true", "yes", "on")


def _transport_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import OfflineModeIsEnabled
    from huggingface_hub.utils import get_session

    http = importlib.import_module(type(get_session()).__module__.split(".")[0])  # httpx(2)
    return (http.TransportError, OfflineModeIsEnabled, ConnectionError, TimeoutError)


class _Unreachable(SourceUnavailable):
    pass


def _gated(repo_id: str, endpoint: str) -> SourceUnavailable:
    return SourceUnavailable(
        f"{repo_id} is gated or private: accept its licence at {endpoint}/{repo_id} "
        "and export HF_TOKEN=<a token with access>")


@contextlib.contextmanager
def _hub_errors(repo_id: str, revision: str | None, endpoint: str, *, files: bool = False):
    """huggingface_hub/httpx exceptions -> one-line SourceUnavailable. `files`: the repo
    is known to exist, so 401/403 means gated or private."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        yield
    except WqkError:
        raise
    except HfHubHTTPError as e:
        raise _from_http(e, repo_id, revision, endpoint, files) from e
    except LocalEntryNotFoundError as e:  # hf_hub_download: not cached, and the hub failed
        if isinstance(e.__cause__, HfHubHTTPError):  # e.g. a 403 it hid behind the cache
            raise _from_http(e.__cause__, repo_id, revision, endpoint, files) from e
        raise _Unreachable(_unreachable_msg(repo_id, endpoint, e)) from e
    except _transport_errors() as e:
        raise _Unreachable(_unreachable_msg(repo_id, endpoint, e)) from e


def _from_http(e, repo_id: str, revision: str | None, endpoint: str, files: bool) -> WqkError:
    from huggingface_hub.errors import (GatedRepoError, RemoteEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    status = getattr(getattr(e, "response", None), "status_code", None)
    if isinstance(e, GatedRepoError) or (files and status in (401, 403)) or status == 403:
        return _gated(repo_id, endpoint)
    if isinstance(e, RevisionNotFoundError):
        return SourceUnavailable(f"revision {revision!r} of {repo_id} not found on the hub: "
                                 "give an existing branch, tag or commit sha")
    if isinstance(e, RemoteEntryNotFoundError):
        return SourceUnavailable(f"a file of {repo_id} is missing on the hub at {revision}: "
                                 "pin another revision")
    if isinstance(e, RepositoryNotFoundError) or status in (401, 404):
        return SourceUnavailable(f"{repo_id} not found on the hub at {endpoint}: check the id, "
                                 "or export HF_TOKEN=<token> if it is private or gated")
    # 5xx and 429 are transient: _Unreachable makes the range reads retry them
    return _Unreachable(f"the hub answered HTTP {status} for {repo_id}: retry later, "
                        "or set HF_HUB_OFFLINE=1 with a filled cache")


def _unreachable_msg(repo_id: str, endpoint: str, e: BaseException) -> str:
    why = "HF_HUB_OFFLINE is set" if _offline() else type(e).__name__
    return (f"cannot reach the Hugging Face hub at {endpoint} for {repo_id} ({why}): set "
            "HF_HUB_OFFLINE=1 with a filled cache (run `wqk fetch` where the hub is reachable), "
            "or give a local folder")


# ---------------------------------------------------------------- the hub


@dataclass
class _Hub:
    repo_id: str
    endpoint: str
    token: str | None
    hf_cache_dir: str | None
    timeout: float

    def info(self, revision: str | None):
        from huggingface_hub import HfApi

        api = HfApi(endpoint=self.endpoint, token=self.token)
        with _hub_errors(self.repo_id, revision, self.endpoint):
            return api.model_info(self.repo_id, revision=revision, timeout=self.timeout)

    def download(self, filename: str, sha: str, local_only: bool = False) -> Path:
        """Whole file through huggingface_hub into the standard HF cache."""
        from huggingface_hub import hf_hub_download

        with _hub_errors(self.repo_id, sha, self.endpoint, files=True):
            return Path(hf_hub_download(
                self.repo_id, filename, revision=sha, cache_dir=self.hf_cache_dir,
                endpoint=self.endpoint, token=self.token, etag_timeout=self.timeout,
                local_files_only=local_only or _offline()))

    def stream(self, filename: str, sha: str, start: int, end: int):
        """Yield the bytes [start, end) of a file, via an HTTP range request."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(self.repo_id, filename, revision=sha, endpoint=self.endpoint)
        headers = build_hf_headers(token=self.token)
        headers.update({"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"})
        with _hub_errors(self.repo_id, sha, self.endpoint, files=True):
            with get_session().stream("GET", url, headers=headers, timeout=self.timeout) as r:
                if r.status_code >= 400:
                    r.read()
                    hf_raise_for_status(r)
                if r.status_code != 206 and not (r.status_code == 200 and start == 0 and
                                                 int(r.headers.get("Content-Length", -1)) == end):
                    raise SourceUnavailable(
                        f"{self.endpoint} ignored a byte-range request for {self.repo_id}/"
                        f"{filename} (HTTP {r.status_code}): fetch whole files with --all-weights")
                yield from r.iter_bytes()  # as received: a dropped connection loses nothing

    def read(self, filename: str, sha: str, start: int, end: int) -> bytes:
        data = b"".join(self.stream(filename, sha, start, end))
        if len(data) != end - start:
            raise _Unreachable(f"short read from the hub for {self.repo_id}/{filename}: rerun")
        return data


def _retrying(fn, what: str):
    for attempt in range(RETRIES + 1):
        try:
            return fn()
        except _Unreachable:
            if attempt == RETRIES:
                raise
            time.sleep(0.5 * 2**attempt)
            log.warning("retrying %s (%d/%d)", what, attempt + 1, RETRIES)


# ---------------------------------------------------------------- fetch


def cache_root(cache_dir=None) -> Path:
    return Path(cache_dir or os.environ.get("WQK_CACHE") or "~/.cache/wqk").expanduser()


def fetch_hub(repo_id: str, revision: str | None = None, cache_dir=None, *, qk_only: bool = True,
              progress: bool = True, endpoint: str | None = None, token: str | None = None,
              hf_cache_dir=None, timeout: float | None = None) -> Path:
    """A local folder with config.json, weights and `.revision` (the commit sha) for one hub
    model: `<cache_dir>/<slug>/<sha>/` (q/k tensors only) or `<sha>-all/` (whole files).

    cache_dir: our cache root ($WQK_CACHE, else ~/.cache/wqk). endpoint: $HF_ENDPOINT, else
    huggingface.co. token: None reads HF_TOKEN (or the stored login) via huggingface_hub.
    hf_cache_dir: the HF cache for whole files (default: huggingface_hub's).
    With HF_HUB_OFFLINE=1 only the caches are used. Raises SourceUnavailable.
    """
    from huggingface_hub import constants

    endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
    hf_cache_dir = hf_cache_dir or os.environ.get("HF_HUB_CACHE")  # read now, not at import
    hub = _Hub(repo_id, endpoint, token, str(hf_cache_dir) if hf_cache_dir else None,
               TIMEOUT_S if timeout is None else timeout)
    base = cache_root(cache_dir) / slug(repo_id)
    suffix = "" if qk_only else "-all"
    done = _cached(base, revision, suffix, use_refs=_offline())
    if done is not None:
        return done
    if _offline():
        return _from_hf_cache(hub, base, revision, suffix) or _raise_offline(
            repo_id, revision)
    try:
        info = hub.info(revision)
    except _Unreachable:
        got = _cached(base, revision, suffix, use_refs=True) or _from_hf_cache(
            hub, base, revision, suffix)
        if got is None:
            raise
        log.warning("hub unreachable: using the cached copy of %s", repo_id)
        return got
    sha = info.sha
    if revision != sha:
        _write_ref(base, revision or "main", sha)  # lets HF_HUB_OFFLINE=1 resolve it later
    done = _cached(base, sha, suffix)
    if done is not None:
        return done
    if getattr(info, "gated", False) and token is None:
        from huggingface_hub import get_token

        if get_token() is None:
            raise _gated(repo_id, endpoint)
    files = [s.rfilename for s in (info.siblings or [])]
    return _build(hub, base, sha, revision, suffix, files, qk_only, progress)


def _raise_offline(repo_id: str, revision: str | None):
    at = f"@{revision}" if revision else ""
    raise SourceUnavailable(
        f"{repo_id}{at} is not in the cache and HF_HUB_OFFLINE=1: run `wqk fetch {repo_id}{at}` "
        "where the hub is reachable (or fill the HF cache), or give a local folder")


def _ref_path(base: Path, revision: str) -> Path:
    return base / "refs" / slug(revision)


def _write_ref(base: Path, revision: str, sha: str) -> None:
    p = _ref_path(base, revision)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}")
    tmp.write_text(sha + "\n")
    os.replace(tmp, p)


def _cached(base: Path, revision: str | None, suffix: str, use_refs: bool = False) -> Path | None:
    """Our finished folder for a commit sha, or (use_refs: offline, or the hub unreachable)
    for a branch/tag we resolved before; online, branches are re-resolved."""
    if revision is None or not _SHA.match(revision):
        if not use_refs:
            return None
        ref = _ref_path(base, revision or "main")
        if not ref.exists():
            return None
        revision = ref.read_text().strip()
    for name in (f"{revision}{suffix}", f"{revision}-all"):  # whole files serve q/k too
        if (base / name / ".revision").exists():
            return base / name
    return None


def _from_hf_cache(hub: _Hub, base: Path, revision, suffix) -> Path | None:
    """Build our folder from an HF cache snapshot (filled by snapshot_download elsewhere)."""
    try:
        config = hub.download("config.json", revision or "main", local_only=True)
    except SourceUnavailable:
        return None
    sha = config.parent.name
    done = _cached(base, sha, suffix)
    if done is not None:
        return done
    files = sorted(p.name for p in config.parent.iterdir())
    try:
        return _build(hub, base, sha, revision, suffix, files, False, False, local_only=True)
    except SourceUnavailable:
        return None


def _weight_files(hub: _Hub, sha: str, files: list[str], qk_only: bool,
                  local_only: bool) -> tuple[str, list[str], list[str]]:
    """(kind "safetensors"|"bin", weight files to fetch, index files to keep)."""
    for kind, single, index in (("safetensors", "model.safetensors", "model.safetensors.index.json"),
                                ("bin", "pytorch_model.bin", "pytorch_model.bin.index.json")):
        if index in files:
            wmap = json.loads(hub.download(index, sha, local_only).read_text())["weight_map"]
            names = [n for n in wmap if is_qk_tensor(n)] if qk_only else list(wmap)
            return kind, sorted({wmap[n] for n in names}), [index]
        if single in files:
            return kind, [single], []
        roots = sorted(f for f in files if "/" not in f and f.endswith("." + kind))
        if kind == "safetensors" and roots:
            return kind, roots, []
    raise SourceUnavailable(f"{hub.repo_id}@{sha} has no safetensors or pytorch_model.bin weights "
                            "at its root: give a local folder with converted weights")


def _build(hub: _Hub, base: Path, sha: str, revision, suffix, files, qk_only, progress,
           local_only: bool = False) -> Path:
    if "config.json" not in files:
        raise SourceUnavailable(f"{hub.repo_id}@{sha} has no config.json: give a local folder "
                                "with config.json and weights")
    final = base / f"{sha}{suffix}"
    stage = base / f".{sha}{suffix}.partial"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{sha}{suffix}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two jobs fetching one model: the second waits
        if (final / ".revision").exists():
            return final
        stage.mkdir(exist_ok=True)
        config = hub.download("config.json", sha, local_only)
        kind, weights, indexes = _weight_files(hub, sha, files, qk_only, local_only)
        manifest = {"repo_id": hub.repo_id, "revision": revision, "sha": sha,
                    "endpoint": hub.endpoint, "source_files": weights}
        if qk_only and kind == "safetensors":
            manifest.update(_fetch_qk(hub, sha, weights, stage, progress), mode="qk-ranges")
        else:
            for name in indexes + weights:
                _link(hub.download(name, sha, local_only), stage / name)
            manifest["mode"] = "whole-files"
        shutil.copyfile(config, stage / "config.json")
        (stage / ".wqk-fetch.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        (stage / ".revision").write_text(sha + "\n")
        if final.exists():  # a stale, incomplete folder (no .revision)
            shutil.rmtree(final)
        os.replace(stage, final)
    return final


def _link(src: Path, dst: Path) -> None:
    src = src.resolve()
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)  # survives an HF cache cleanup
    except OSError:
        os.symlink(src, dst)


# ---------------------------------------------------------------- q/k byte ranges


@dataclass
class _Range:
    file: str
    start: int  # absolute byte offsets in the source file
    end: int
    out: int  # offset of `start` in our data section


def _header(hub: _Hub, sha: str, filename: str) -> tuple[dict, int]:
    """(header dict, byte offset where the data section starts) of a remote safetensors file."""
    raw = _retrying(lambda: hub.read(filename, sha, 0, 8), f"{filename} header")
    (n,) = struct.unpack("<Q", raw)
    if n > MAX_HEADER:
        raise CorruptCheckpoint(f"{hub.repo_id}@{sha}/{filename}: header of {n} bytes is not "
                                "safetensors: fetch with --all-weights")
    text = _retrying(lambda: hub.read(filename, sha, 8, 8 + n), f"{filename} header")
    return json.loads(text), 8 + n


def _plan(hub: _Hub, sha: str, shards: list[str]) -> tuple[bytes, list[_Range], int]:
    """Our file's header bytes, the coalesced source ranges in write order, data size."""
    out_header: dict = {}
    ranges: list[_Range] = []
    pos = 0
    for shard in shards:
        header, data_start = _header(hub, sha, shard)
        picked = sorted((info["data_offsets"], name, info) for name, info in header.items()
                        if name != "__metadata__" and is_qk_tensor(name))
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


def _fetch_qk(hub: _Hub, sha: str, shards: list[str], stage: Path, progress: bool) -> dict:
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
    _check_readable(out, hub.repo_id)
    n = len(json.loads(head[8:])) - 1
    return {"tensors": n, "qk_bytes": total, "requests": len(ranges)}


def _copy_range(hub: _Hub, sha: str, r: _Range, fh, head_len: int, bar) -> None:
    """Append the part of range r not yet in fh, retrying dropped connections in place."""
    for attempt in range(RETRIES + 1):
        done = fh.tell() - head_len - r.out  # bytes of this range already written
        if done >= r.end - r.start:
            return
        try:
            for chunk in hub.stream(r.file, sha, r.start + max(done, 0), r.end):
                fh.write(chunk)
                bar.update(len(chunk))
        except _Unreachable as e:
            if attempt == RETRIES:
                raise SourceUnavailable(f"download of {hub.repo_id} interrupted ({e}): rerun "
                                        "to resume from where it stopped") from e
            time.sleep(0.5 * 2**attempt)
            log.warning("retrying %s bytes %d-%d (%d/%d)", r.file, r.start, r.end, attempt + 1,
                        RETRIES)
    if fh.tell() - head_len - r.out < r.end - r.start:
        raise SourceUnavailable(f"download of {hub.repo_id} kept stopping short: rerun to resume")


def _check_readable(path: Path, repo_id: str) -> None:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            f.keys()
    except Exception as e:  # noqa: BLE001 - any parse failure means a bad file
        raise CorruptCheckpoint(f"{repo_id}: the fetched {path} does not parse ({e}): "
                                f"delete {path.parent} and rerun") from e
