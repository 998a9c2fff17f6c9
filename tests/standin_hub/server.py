"""A local HTTP server that speaks the part of the Hugging Face hub's API that this project and
the libraries it calls (huggingface_hub, transformers, datasets) use, for a tree of repos on disk.

    <root>/manifest.json             {"models": {repo_id: {"gated": false|"manual"}}, "datasets": {...},
                                      "aliases": {old_id: repo_id}}  (renamed repos: 307 to the new id);
                                     a model's entry may add what the listing says of it (listing.py)
    <root>/models/<repo_id>/...      the files of each model repo (its main branch)
    <root>/branches/models/<repo_id>/<branch>/...
                                     the files of its other branches, named in its manifest entry
                                     as "branches": [...] (a model published along training)
    <root>/datasets/<repo_id>/...    the files of each dataset repo
    <root>/static/...                plain files at /<path> of the second host (a dataset's own site)

What it speaks:
- `GET /api/{models,datasets}/<id>[/revision/<rev>]`: info with the commit sha, siblings, gated;
  a revision is main, a branch or the commit sha of either; `GET /api/models/<id>/refs`: the
  branches with their commits (what huggingface_hub's list_repo_refs reads);
  `GET .../tree/<rev>[/<path>]` (recursive, paginated by nothing) and `POST .../paths-info/<rev>`.
- `GET /api/models`: the model listing (filters, `expand`, pages linked by `Link: ...; rel="next"`,
  `listing_page_size` models at most per page; 401 for a token other than TOKEN): listing.py.
- `GET|HEAD /<id>/resolve/<rev>/<file>` (datasets under /datasets/): Range, ETag, X-Repo-Commit.
  Large files (LFS: weights, Parquet, archives) answer 302 to a second host, the CDN, which
  serves the bytes and records every Authorization header it is sent (it must get none). The
  second host also serves <root>/static: a download site that is not the hub (`datasets` reads
  any URL under HF_ENDPOINT as a hub path, so such a site must have a host of its own).
- Gated repos: files answer 401 without a token, 403 with a token other than TOKEN.
- `throttle`: every n-th request for a repo file answers 429 with `Retry-After: 1` once.
- `hostile`: a set of HOSTILE modes, each a way a broken proxy or mirror answers (see HOSTILE).
A repo's commit sha is the SHA-1 of its file names and contents: a changed file is a new commit.
`seen` records every request (method, path, range, whether a token came), `bytes_sent` the bytes
of every answer (headers not counted); `log_unknown` prints
requests the server does not speak, which is how a new library call shows up.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from time import sleep  # bound now: tests that patch time.sleep must not speed up a trickle
from urllib.parse import parse_qs, unquote, urlsplit

from . import listing

TOKEN = "hf_standin_token"  # the token that opens gated repos
LFS_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".parquet", ".gz", ".zst", ".arrow", ".msgpack", ".h5", ".ot")
KINDS = ("models", "datasets")
NESTING = 100_000  # levels of nested JSON arrays: past the recursion limit of Python's json
HOSTILE = {
    "wrong-range": "a data range (one not at the start of a file) from 4 bytes earlier, its Content-Range saying so",
    "trickle": "a data range one byte every `trickle_s` seconds",
    "short-body": "an LFS file's body cut at half its Content-Length, the connection closed",
    "corrupt-lfs": "an LFS file with one byte flipped, its ETag (the sha256) unchanged",
    "html-config": "config.json as an HTML page (a proxy's login or error page)",
    "nested-config": "config.json as JSON nested NESTING levels deep",
    "nested-index": "model.safetensors.index.json as JSON nested NESTING levels deep",
    "no-weight-map": "model.safetensors.index.json without its weight_map",
    "nested-header": "every .safetensors file a header of JSON nested NESTING levels deep",
    "redirect-loop": "LFS files redirected from the hub to the CDN and back, forever",
    "bad-commit": "X-Repo-Commit of every file not a commit id",
}


@dataclass
class Repo:
    kind: str  # "models" or "datasets"
    repo_id: str
    folder: Path
    gated: str | bool = False
    sha: str = ""
    files: dict[str, Path] = field(default_factory=dict)  # repo path -> file on disk
    digests: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # path -> size, git sha1, sha256
    meta: dict = field(default_factory=dict)  # the manifest entry: gated, and what the listing says of it
    listing: dict | None = None  # listing.facts_of, computed on the first listing that names the repo
    branches: dict[str, Repo] = field(default_factory=dict)  # branch name -> the repo at that branch

    def load(self) -> Repo:
        """Each file read once: its size and digests, and the commit sha over all of them."""
        h = hashlib.sha1()
        for p in sorted(q for q in self.folder.rglob("*") if q.is_file()):
            name, data = p.relative_to(self.folder).as_posix(), p.read_bytes()
            self.files[name] = p
            self.digests[name] = (len(data), hashlib.sha1(data).hexdigest(), hashlib.sha256(data).hexdigest())
            h.update(name.encode() + b"\0" + bytes.fromhex(self.digests[name][1]))
        self.sha = h.hexdigest()
        return self

    def etag(self, name: str) -> str:
        return self.digests[name][2]

    def at(self, rev: str | None) -> Repo | None:
        """The repo at a revision: main, a branch, or the commit of either (None: not one)."""
        if (rev or "main") in ("main", self.sha):
            return self
        return self.branches.get(rev) or next((b for b in self.branches.values() if b.sha == rev), None)


def load_repos(root: Path) -> tuple[dict[tuple[str, str], Repo], dict[str, str]]:
    manifest = json.loads((root / "manifest.json").read_text())
    repos = {}
    for kind in KINDS:
        for repo_id, meta in sorted(manifest.get(kind, {}).items()):
            gated = meta.get("gated", False)
            repo = repos[kind, repo_id] = Repo(kind, repo_id, root / kind / repo_id, gated, meta=meta).load()
            for name in meta.get("branches", []):
                repo.branches[name] = Repo(
                    kind, repo_id, root / "branches" / kind / repo_id / name, gated, meta=meta
                ).load()
    return repos, manifest.get("aliases", {})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int):
        super().__init__((host, port), _Handler)
        self.lock = threading.Lock()
        self.seen: list[dict] = []
        self.bytes_sent = 0
        self.host_name = host

    @property
    def url(self) -> str:
        return f"http://{self.host_name}:{self.server_address[1]}"

    def handle_error(self, request, client_address):
        """A client that hangs up on a kept-alive connection is not an error worth a traceback."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)

    def start(self) -> _Server:
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class StandInHub(_Server):
    """The hub at 127.0.0.1, its CDN (a second server) at localhost."""

    def __init__(self, root: Path, port: int = 0, cdn_port: int = 0, throttle: int = 0, log_unknown: bool = True):
        super().__init__("127.0.0.1", port)
        self.root = Path(root)
        self.repos, self.aliases = load_repos(self.root)
        self.cdn = CDN(self, cdn_port)
        self.throttle = throttle
        self.file_requests = 0
        self.throttled: set[str] = set()
        self.log_unknown = log_unknown
        self.hostile: set[str] = set()  # HOSTILE modes in force
        self.trickle_s = 0.5
        self.listing_page_size = listing.MAX_PAGE  # tests set it small: pages of a few models

    def start(self) -> StandInHub:
        self.cdn.start()
        return super().start()

    def stop(self) -> None:
        self.cdn.stop()
        super().stop()

    def repo(self, kind: str, repo_id: str) -> Repo | None:
        return self.repos.get((kind, repo_id))


class CDN(_Server):
    """Serves the LFS files the hub redirects to, at another host name; counts leaked tokens."""

    def __init__(self, hub: StandInHub, port: int = 0):
        super().__init__("localhost", port)
        self.hub = hub
        self.leaked: list[str] = []  # paths that came with an Authorization header


def hostile_bytes(modes: set[str], name: str, data: bytes) -> bytes:
    """A file's bytes as the hostile modes in force serve them."""
    nested = b"[" * NESTING + b"]" * NESTING
    if "html-config" in modes and name == "config.json":
        return b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>proxy login</body></html>\n"
    if "nested-config" in modes and name == "config.json":
        return nested
    if name.endswith(".index.json") and modes & {"nested-index", "no-weight-map"}:
        return nested if "nested-index" in modes else json.dumps({"metadata": {}}).encode()
    if "nested-header" in modes and name.endswith(".safetensors"):
        header = b'{"a":' + nested + b"}"
        return len(header).to_bytes(8, "little") + header
    if "corrupt-lfs" in modes and name.endswith(LFS_SUFFIXES) and data:
        return data[:-1] + bytes([data[-1] ^ 0xFF])
    return data


def _range(header: str | None, size: int) -> tuple[int, int] | None:
    m = re.fullmatch(r"bytes=(\d+)-(\d*)", header or "")
    if not m:
        return None
    a = int(m.group(1))
    return a, min(int(m.group(2) or size - 1), size - 1)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *a):  # quiet
        pass

    def do_HEAD(self):
        self._dispatch(head=True)

    def do_GET(self):
        self._dispatch(head=False)

    def do_POST(self):
        self._dispatch(head=False)

    # --- plumbing ---------------------------------------------------------------------

    def _dispatch(self, head: bool):
        self.head = head
        url = urlsplit(self.path)
        self.query = parse_qs(url.query)
        path = unquote(url.path)
        entry = {
            "method": self.command,
            "path": path,
            "range": self.headers.get("Range"),
            "auth": bool(self.headers.get("Authorization")),
        }
        with self.server.lock:
            self.server.seen.append(entry)
        body = b""
        if self.command == "POST":
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            if isinstance(self.server, CDN):
                self._cdn(path)
            else:
                self._hub(path, body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.head:
            self.wfile.write(body)
            self._count(len(body))

    def _count(self, n: int) -> None:
        with self.server.lock:
            self.server.bytes_sent += n

    def _json(self, obj, status: int = 200, headers: dict | None = None):
        self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, code: str, message: str):
        self._json({"error": message}, status, {"X-Error-Code": code, "X-Error-Message": message})

    def _bytes(self, data: bytes, headers: dict, name: str = ""):
        hub = self.server.hub if isinstance(self.server, CDN) else self.server
        modes = hub.hostile if name.endswith(LFS_SUFFIXES) else set()
        rng = _range(self.headers.get("Range"), len(data))
        headers = {"Accept-Ranges": "bytes", **headers}
        if rng is None:
            if "short-body" in modes:
                return self._short(200, data, headers)
            return self._send(200, data, headers)
        a, b = rng
        if a >= len(data):
            return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
        if "wrong-range" in modes and a >= 4:
            a, b = a - 4, b - 4
        headers |= {"Content-Range": f"bytes {a}-{b}/{len(data)}"}
        if "short-body" in modes:
            return self._short(206, data[a : b + 1], headers)
        if "trickle" in modes and a > 0:
            return self._trickle(data[a : b + 1], headers, hub.trickle_s)
        self._send(206, data[a : b + 1], headers)

    def _short(self, status: int, body: bytes, headers: dict):
        """Half the body of a full Content-Length, then the connection closed."""
        self.send_response(status)
        for k, v in (headers | {"Content-Length": str(len(body)), "Connection": "close"}).items():
            self.send_header(k, v)
        self.end_headers()
        if not self.head:
            self.wfile.write(body[: len(body) // 2])
            self._count(len(body) // 2)
        self.wfile.flush()
        self.close_connection = True

    def _trickle(self, body: bytes, headers: dict, every_s: float):
        """The body one byte every `every_s` seconds, for as long as the client listens."""
        self.send_response(206)
        for k, v in (headers | {"Content-Length": str(len(body))}).items():
            self.send_header(k, v)
        self.end_headers()
        for i in range(0 if self.head else len(body)):
            self.wfile.write(body[i : i + 1])
            self.wfile.flush()
            self._count(1)
            sleep(every_s)

    # --- the CDN ------------------------------------------------------------------------

    def _cdn(self, path: str):
        cdn: CDN = self.server  # type: ignore[assignment]
        if self.headers.get("Authorization"):
            with cdn.lock:
                cdn.leaked.append(path)
        static = cdn.hub.root / "static" / path.lstrip("/")
        if ".." not in path and static.is_file():
            data = static.read_bytes()
            return self._bytes(data, {"ETag": f'"{hashlib.sha256(data).hexdigest()}"'})
        m = re.fullmatch(r"/(models|datasets)/(.+)/([0-9a-f]{40})/(.+)", path)
        repo = m and cdn.hub.repo(m.group(1), m.group(2))
        repo = repo and repo.at(m.group(3))
        if not repo or m.group(3) != repo.sha or m.group(4) not in repo.files:
            return self._send(404, b"not found")
        name = m.group(4)
        if "redirect-loop" in cdn.hub.hostile:  # back to the hub, which sends us here again
            prefix = "" if repo.kind == "models" else "/datasets"
            return self._send(302, b"", {"Location": f"{cdn.hub.url}{prefix}/{repo.repo_id}/resolve/{repo.sha}/{name}"})
        data = hostile_bytes(cdn.hub.hostile, name, repo.files[name].read_bytes())
        self._bytes(data, {"ETag": f'"{repo.etag(name)}"'}, name)

    # --- the hub ------------------------------------------------------------------------

    def _hub(self, path: str, body: bytes):
        hub: StandInHub = self.server  # type: ignore[assignment]
        if path == "/api/agent-harnesses":  # huggingface_hub's user-agent registry, asked daily
            return self._json({"standardEnvVars": [], "harnesses": {}})
        if path == "/api/models":
            return self._listing(hub)
        refs = re.fullmatch(r"/api/(models|datasets)/(.+)/refs", path)
        if refs:
            return self._refs(hub, refs.group(1), refs.group(2))
        api = re.fullmatch(r"/api/(models|datasets)/(.+?)(?:/(revision|tree|paths-info)/([^/]+)(/.*)?)?", path)
        if api:
            return self._api(hub, api.group(1), api.group(2), api.group(3), api.group(4), api.group(5), body)
        res = re.fullmatch(r"/(?:(datasets)/)?(.+?)/resolve/([^/]+)/(.+)", path)
        if res:
            return self._resolve(
                hub, "datasets" if res.group(1) else "models", res.group(2), res.group(3), res.group(4)
            )
        if hub.log_unknown:
            print(f"stand-in hub: not served: {self.command} {self.path}", flush=True)
        self._error(404, "EntryNotFound", f"not served by the stand-in hub: {path}")

    def _listing(self, hub: StandInHub):
        auth = self.headers.get("Authorization")
        if auth is not None and auth != f"Bearer {TOKEN}":  # as the hub answers a token it does not know
            return self._error(401, "Unauthorized", "Invalid credentials in Authorization header")
        try:
            page, headers = listing.answer(hub, self.query)
        except listing.BadQuery as e:
            return self._error(400, "BadRequest", str(e))
        self._json(page, headers=headers)

    def _lookup(self, hub: StandInHub, kind: str, repo_id: str, rev: str | None) -> Repo | None:
        """The repo a request names at `rev` (main or its commit sha), or None once the answer is sent: 307 for a renamed
        model repo (bert-base-uncased -> google-bert/bert-base-uncased, the same URL under the
        new id, as the hub answers), 404 for an unknown repo or revision."""
        repo = hub.repo(kind, repo_id)
        if repo is None:
            new = hub.aliases.get(repo_id) if kind == "models" else None
            if new is not None:
                location = re.sub(rf"/{re.escape(repo_id)}(?=[/?]|$)", f"/{new}", self.path, count=1)
                return self._send(307, b"", {"Location": location})
            return self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}")
        at = repo.at(rev)
        if at is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return at

    def _refs(self, hub: StandInHub, kind: str, repo_id: str):
        repo = self._lookup(hub, kind, repo_id, None)
        if repo is None:
            return
        branches = {"main": repo, **repo.branches}
        return self._json(
            {
                "branches": [
                    {"name": name, "ref": f"refs/heads/{name}", "targetCommit": b.sha} for name, b in branches.items()
                ],
                "converts": [],
                "tags": [],
            }
        )

    def _api(self, hub: StandInHub, kind, repo_id, what, rev, sub, body):
        repo = self._lookup(hub, kind, repo_id, rev)
        if repo is None:
            return
        if what in (None, "revision"):
            return self._json(self._info(repo))
        if what == "tree":
            prefix = (sub or "").strip("/")
            recursive = self.query.get("recursive", ["false"])[0].lower() == "true"
            return self._json(self._tree(repo, prefix, recursive))
        paths = _posted_paths(body, self.headers.get("Content-Type", ""))
        return self._json([e for p in paths for e in self._tree(repo, p, False, exact=True)])

    def _info(self, repo: Repo) -> dict:
        info = {
            "_id": repo.sha[:24],
            "id": repo.repo_id,
            "sha": repo.sha,
            "private": False,
            "gated": repo.gated,
            "disabled": False,
            "downloads": int(repo.meta.get("downloads", 0)),
            "likes": int(repo.meta.get("likes", 0)),
            "tags": [],
            "lastModified": "2024-01-01T00:00:00.000Z",
            "createdAt": "2024-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": f} for f in sorted(repo.files)],
        }
        if repo.kind == "models":
            info["modelId"] = repo.repo_id
        else:
            info["cardData"] = {}
        return info

    def _entry(self, repo: Repo, name: str) -> dict:
        size, sha1, sha256 = repo.digests[name]
        entry = {"type": "file", "oid": sha1, "size": size, "path": name}
        if name.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"oid": sha256, "size": size, "pointerSize": 134}
        return entry

    def _tree(self, repo: Repo, prefix: str, recursive: bool, exact: bool = False) -> list[dict]:
        if exact and prefix in repo.files:
            return [self._entry(repo, prefix)]
        base = f"{prefix}/" if prefix else ""
        out, dirs = [], set()
        for name in sorted(repo.files):
            if not name.startswith(base):
                continue
            rest = name[len(base) :]
            if "/" in rest and not recursive:
                dirs.add(base + rest.split("/")[0])
                continue
            for i, _ in enumerate(rest.split("/")[:-1]):  # the folders on the way, when recursive
                dirs.add(base + "/".join(rest.split("/")[: i + 1]))
            out.append(self._entry(repo, name))
        if exact:
            return [{"type": "directory", "oid": repo.sha, "path": prefix}] if out or dirs else []
        return [{"type": "directory", "oid": repo.sha, "path": d} for d in sorted(dirs)] + out

    def _resolve(self, hub: StandInHub, kind, repo_id, rev, name):
        repo = self._lookup(hub, kind, repo_id, rev)
        if repo is None:
            return
        if repo.gated:
            auth = self.headers.get("Authorization")
            if not auth:
                return self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be "
                    "authenticated to access it. Please log in.",
                )
            if auth != f"Bearer {TOKEN}":
                return self._error(
                    403, "GatedRepo", f"Access to model {repo_id} is restricted and you are not in the authorized list."
                )
        if name not in repo.files:
            return self._error(404, "EntryNotFound", f"{name} does not exist on {rev}")
        key = f"{kind}/{repo_id}/{name}"
        with hub.lock:
            hub.file_requests += 1
            throttle = bool(hub.throttle) and hub.file_requests % hub.throttle == 0 and key not in hub.throttled
            if throttle:
                hub.throttled.add(key)
        if throttle:
            return self._json({"error": "Too Many Requests"}, 429, {"Retry-After": "1"})
        commit = "../../not-a-commit" if "bad-commit" in hub.hostile else repo.sha
        headers = {"X-Repo-Commit": commit, "ETag": f'"{repo.etag(name)}"'}
        if name.endswith(LFS_SUFFIXES):
            size = repo.digests[name][0]
            location = f"{hub.cdn.url}/{kind}/{repo_id}/{repo.sha}/{name}"
            return self._send(
                302, b"", headers | {"Location": location, "X-Linked-Size": str(size), "X-Linked-Etag": headers["ETag"]}
            )
        data = repo.files[name].read_bytes()
        served = hostile_bytes(hub.hostile, name, data)
        if served != data:  # the file as if the repo held it: the hub's ETag of a git file, its git blob sha1
            headers["ETag"] = f'"{hashlib.sha1(b"blob %d" % len(served) + bytes(1) + served).hexdigest()}"'
        self._bytes(served, headers, name)


def _posted_paths(body: bytes, content_type: str) -> list[str]:
    if "json" in content_type:
        paths = json.loads(body or b"{}").get("paths", [])
    else:
        paths = parse_qs(body.decode()).get("paths", [])
    return [paths] if isinstance(paths, str) else list(paths)
