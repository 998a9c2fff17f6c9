"""The HTTP client of the hub package: `Hub` asks the Hugging Face hub for a repo's commit and
files, downloads whole files into the standard HF cache and streams byte ranges.

Every huggingface_hub/httpx failure leaves here as a one-line SourceUnavailable naming the repo
and the fix (gated, not found, missing revision); an unreachable hub, a dropped connection, 5xx
and 429 as `Unreachable`, which the cache may answer instead. 429 and 5xx of the API and of range
reads are retried here, each request on its own, waiting what `Retry-After` asks (MAX_WAIT_S at
most), else BACKOFF_S doubling (whole-file downloads: huggingface_hub retries them itself);
dropped connections are the range reads' to retry (they know where to resume). A commit id from
the hub is accepted only as 40 hex digits: it becomes a folder name.

Nothing the hub sends is taken on trust: a range answer must name the range asked for (status,
Content-Range, body length, X-Repo-Commit), else `BadAnswer`; a body must keep coming at
WQK_HUB_MIN_RATE bytes/s over every WQK_HUB_RATE_WINDOW seconds and end within
WQK_HUB_REQUEST_DEADLINE seconds, else `Stalled`; a whole file whose ETag is a sha256 (LFS) must
hash to it. Also here: whether huggingface_hub is in offline mode. huggingface_hub itself is
imported only when called.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import importlib
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import SourceUnavailable, WqkError
from ...ids import is_commit

log = logging.getLogger(__name__)

TIMEOUT_S = float(os.environ.get("WQK_HUB_TIMEOUT", "10"))  # per request: offline fails in seconds
RETRIES = 5  # per request, on 429 and 5xx
BACKOFF_S = 1.0  # first wait when the hub names none; doubles
MAX_WAIT_S = 60.0  # the longest wait, Retry-After included
sleep = time.sleep  # patched by tests
_SHA256 = re.compile(r"[0-9a-f]{64}")
# progress deadlines of one request's body: (env var, default, what it bounds)
DEADLINES = {
    "WQK_HUB_MIN_RATE": (16384.0, "bytes per second a body must keep up"),
    "WQK_HUB_RATE_WINDOW": (60.0, "seconds over which that rate is measured"),
    "WQK_HUB_REQUEST_DEADLINE": (3600.0, "seconds one request's body may take in all"),
}


class Unreachable(SourceUnavailable):
    """The hub did not answer, stopped short or answered 5xx/429: worth a retry, or the cache.

    status: the HTTP status of a 429/5xx, already retried here (RETRIES times); None for a
    connection that failed or dropped. retry_after: the seconds the hub asked us to wait."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


class Stalled(Unreachable):
    """The hub answered, then sent the body too slowly or stopped sending (a dropped connection
    in effect: the range reads retry it and resume where it stopped)."""


class BadAnswer(SourceUnavailable):
    """The hub (or a proxy or mirror in between) answered something other than what was asked:
    another byte range, a wrong length or checksum, another commit. Never retried or cached."""


def deadlines() -> dict[str, float]:
    """The DEADLINES, read from the environment now (tests set them small)."""
    out = {}
    for var, (default, what) in DEADLINES.items():
        text = os.environ.get(var, "").strip()
        try:
            out[var] = float(text) if text else default
            if not out[var] > 0:
                raise ValueError
        except ValueError:
            raise SourceUnavailable(
                f"{var}={text!r} is not a positive number ({what}): set it to one, or unset it for {default:g}"
            ) from None
    return out


class _Progress:
    """Raises Stalled when a body falls under the minimum rate over a window, or runs past the
    request's deadline; `what` names repo, file and range in the message."""

    def __init__(self, hub: Hub, what: str):
        d = deadlines()
        self.rate, self.window, self.deadline = (
            d["WQK_HUB_MIN_RATE"],
            d["WQK_HUB_RATE_WINDOW"],
            d["WQK_HUB_REQUEST_DEADLINE"],
        )
        self.hub, self.what = hub, what
        self.start = self.window_start = time.monotonic()
        self.window_bytes = 0

    def add(self, n: int) -> None:
        now = time.monotonic()
        self.window_bytes += n
        if now - self.start > self.deadline:
            self._stalled(f"the body took more than {self.deadline:g} s (WQK_HUB_REQUEST_DEADLINE)")
        elapsed = now - self.window_start
        if elapsed >= self.window:
            if self.window_bytes < self.rate * elapsed:
                self._stalled(
                    f"{self.window_bytes} bytes in {elapsed:.1f} s, under the minimum of {self.rate:g} bytes/s "
                    "(WQK_HUB_MIN_RATE over WQK_HUB_RATE_WINDOW s)"
                )
            self.window_start, self.window_bytes = now, 0

    def _stalled(self, why: str):
        raise Stalled(
            f"the hub at {self.hub.endpoint} answered for {self.what} but stalled: {why}; rerun to resume "
            "from where it stopped (the bytes fetched so far are kept), or set HF_HUB_OFFLINE=1 with a filled cache"
        )


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set, now or when huggingface_hub was imported."""
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return constants.is_offline_mode() or env.strip().lower() in ("1", "true", "yes", "on")


def _token_sent() -> str | None:
    """Where the token that huggingface_hub sends comes from (for messages; never the token)."""
    if (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or "").strip():
        return "HF_TOKEN"
    try:
        from huggingface_hub import get_token

        return "the stored hub login (hf auth login)" if get_token() else None
    except Exception:  # the token lookup must not hide the access error
        return None


def gated(repo_id: str, endpoint: str) -> SourceUnavailable:
    token = _token_sent()
    if token is None:
        return SourceUnavailable(
            f"{repo_id} is gated or private: accept its licence at {endpoint}/{repo_id} "
            "and export HF_TOKEN=<a token with access>"
        )
    return SourceUnavailable(
        f"{repo_id} is gated or private, and the token from {token} was sent but has no access to it: "
        f"accept its licence at {endpoint}/{repo_id} with that token's account, or check the token "
        "(its account, its read permission, a fine-grained token's repo list)"
    )


@dataclass
class Hub:
    """One repo on one hub endpoint, with the token, HF cache and timeout its requests use."""

    repo_id: str
    endpoint: str
    token: str | None
    hf_cache_dir: str | None
    timeout: float

    @classmethod
    def connect(
        cls,
        repo_id: str,
        endpoint: str | None = None,
        token: str | None = None,
        hf_cache_dir=None,
        timeout: float | None = None,
    ) -> Hub:
        """Defaults read now, not at import: $HF_ENDPOINT (else huggingface.co), $HF_HUB_CACHE
        (else huggingface_hub's), TIMEOUT_S; token None lets huggingface_hub read HF_TOKEN."""
        from huggingface_hub import constants

        endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
        hf_cache_dir = hf_cache_dir or os.environ.get("HF_HUB_CACHE")
        return cls(
            repo_id,
            endpoint,
            token,
            str(hf_cache_dir) if hf_cache_dir else None,
            TIMEOUT_S if timeout is None else timeout,
        )

    def info(self, revision: str | None):
        """The repo's model info at a revision (None: main): `.sha` (checked: 40 hex digits),
        `.siblings`, `.gated`."""
        from huggingface_hub import HfApi

        api = HfApi(endpoint=self.endpoint, token=self.token)

        def ask():
            with _hub_errors(self.repo_id, revision, self.endpoint):
                return api.model_info(self.repo_id, revision=revision, timeout=self.timeout)

        info = self._retrying(ask, f"the revision {revision or 'main'} of {self.repo_id}")
        if not is_commit(info.sha):
            raise SourceUnavailable(
                f"{self.repo_id}: the hub at {self.endpoint} sent {info.sha!r} as the commit of "
                f"{revision or 'main'}, not 40 hex digits: refusing it (check HF_ENDPOINT)"
            )
        return info

    def refs(self) -> dict[str, str]:
        """The repo's branches and tags, name -> commit sha (checked: 40 hex digits), as the hub
        lists them now (`GET /api/models/<repo>/refs`, what huggingface_hub's list_repo_refs asks,
        here with the timeout)."""
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = f"{self.endpoint}/api/models/{self.repo_id}/refs"

        def ask():
            with _hub_errors(self.repo_id, None, self.endpoint):
                r = get_session().get(url, headers=build_hf_headers(token=self.token), timeout=self.timeout)
                hf_raise_for_status(r)
                return r.json()

        answer = self._retrying(ask, f"the branches of {self.repo_id}")
        refs = {}
        for item in (answer.get("branches", []) + answer.get("tags", [])) if isinstance(answer, dict) else [None]:
            name, sha = (item.get("name"), item.get("targetCommit")) if isinstance(item, dict) else (None, None)
            if not isinstance(name, str) or not is_commit(sha):
                raise BadAnswer(
                    f"{self.repo_id}: the hub at {self.endpoint} listed its branches as something other than "
                    f"names and 40-hex commits ({str(item)[:120]}): check HF_ENDPOINT and any proxy or mirror"
                )
            refs.setdefault(name, sha)
        return refs

    def check_access(self, info) -> None:
        """SourceUnavailable now, before any file is asked for, for a gated repo and no token."""
        if getattr(info, "gated", False) and self.token is None:
            from huggingface_hub import get_token

            if get_token() is None:
                raise gated(self.repo_id, self.endpoint)

    def download(self, filename: str, sha: str, local_only: bool = False, force: bool = False) -> Path:
        """Whole file through huggingface_hub into the standard HF cache (force: its cached copy
        evicted first, then downloaded again). A file whose blob is named by a sha256 (the LFS ETag
        the hub publishes) is checked against it; one that fails is evicted and downloaded again
        once, then BadAnswer."""
        local = local_only or offline()
        if force and not local:
            with contextlib.suppress(SourceUnavailable):
                evict(self._download(filename, sha, local=True))
        path = self._download(filename, sha, local)
        if _sha256_mismatch(path) and not local:
            log.warning("%s/%s does not match its sha256: downloading it again", self.repo_id, filename)
            evict(path)
            path = self._download(filename, sha, local)
        got = _sha256_mismatch(path)
        if got:
            name = path.resolve().name
            evict(path)  # never served again from the HF cache
            raise BadAnswer(
                f"{self.repo_id}@{sha}/{filename} from {self.endpoint} has sha256 {got}, not the {name} "
                "the hub publishes for it: refusing it (removed from the HF cache); rerun, and if it "
                "persists check HF_ENDPOINT and any proxy or mirror"
            )
        return path

    def _download(self, filename: str, sha: str, local: bool) -> Path:
        from huggingface_hub import hf_hub_download

        with _hub_errors(self.repo_id, sha, self.endpoint, files=True):  # it retries 429/5xx itself
            try:
                return Path(
                    hf_hub_download(
                        self.repo_id,
                        filename,
                        revision=sha,
                        cache_dir=self.hf_cache_dir,
                        endpoint=self.endpoint,
                        token=self.token,
                        etag_timeout=self.timeout,
                        local_files_only=local,
                    )
                )
            except ValueError as e:  # e.g. an X-Repo-Commit it cannot use as a folder name
                raise BadAnswer(
                    f"huggingface_hub refused the answer of the hub at {self.endpoint} for {self.repo_id}/"
                    f"{filename} ({' '.join(str(e).split())[:200]}): check HF_ENDPOINT and any proxy or mirror"
                ) from None

    def stream(self, filename: str, sha: str, start: int, end: int):
        """Yield the bytes [start, end) of a file, via an HTTP range request (429/5xx retried
        before the first byte; redirects followed, without the token to another host)."""
        r = self._retrying(lambda: self._open(filename, sha, start, end), f"{self.repo_id}/{filename}")
        yield from self._body(r, filename, sha, start, end)

    def read(self, filename: str, sha: str, start: int, end: int) -> bytes:
        """The bytes [start, end) of a file; Unreachable when fewer came."""
        data = b"".join(self.stream(filename, sha, start, end))
        if len(data) != end - start:
            raise Unreachable(f"short read from the hub for {self.repo_id}/{filename}: rerun")
        return data

    def head(self, filename: str, sha: str, n: int) -> tuple[bytes, int | None]:
        """(the first n bytes of a file, or all of a shorter one; the file's size when the hub
        said it) in one request; Unreachable when the answer stopped short of either."""
        r = self._retrying(lambda: self._open(filename, sha, 0, n), f"{self.repo_id}/{filename}")
        size = _total_size(r.headers.get("Content-Range"))
        data = b"".join(self._body(r, filename, sha, 0, n))
        if size is None and r.status_code == 200:  # a whole file of at most n bytes
            size = len(data)
        if len(data) != (n if size is None else min(n, size)):
            raise Unreachable(f"short read from the hub for {self.repo_id}/{filename}: rerun")
        return data, size

    def _body(self, r, filename: str, sha: str, start: int, end: int):
        """The body of an answer `_open` checked, as received (a dropped connection loses nothing),
        never more than the range it names (else BadAnswer); Stalled when it comes too slowly."""
        want = _answered_length(r, start, end)
        what = f"{self.repo_id}/{filename} (bytes {start}-{end - 1})"
        progress, got = _Progress(self, what), 0
        try:
            with _hub_errors(self.repo_id, sha, self.endpoint, files=True):
                for chunk in r.iter_bytes():
                    got += len(chunk)
                    if got > want:
                        raise BadAnswer(
                            f"the hub at {self.endpoint} sent more than the {want} bytes it announced for {what}: "
                            "refusing them; check HF_ENDPOINT and any proxy or mirror"
                        )
                    progress.add(len(chunk))
                    yield chunk
        finally:
            r.close()

    def _open(self, filename: str, sha: str, start: int, end: int):
        """The response to a GET of the bytes [start, end), headers read, body not yet."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(self.repo_id, filename, revision=sha, endpoint=self.endpoint)
        headers = build_hf_headers(token=self.token)
        headers.update({"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"})
        with _hub_errors(self.repo_id, sha, self.endpoint, files=True):
            session = get_session()
            r = session.send(session.build_request("GET", url, headers=headers, timeout=self.timeout), stream=True)
            try:
                if r.status_code >= 400:
                    r.read()
                    hf_raise_for_status(r)
                if r.status_code != 206 and not (
                    r.status_code == 200 and start == 0 and 0 <= _content_length(r) <= end
                ):
                    raise SourceUnavailable(
                        f"{self.endpoint} ignored a byte-range request for {self.repo_id}/"
                        f"{filename} (HTTP {r.status_code}): fetch whole files with --all-weights"
                    )
                _check_answer(r, f"{self.repo_id}@{sha}/{filename}", self.endpoint, sha, start, end)
            except BaseException:
                r.close()
                raise
        return r

    def _retrying(self, fn, what: str):
        """fn(), called again while the hub answers 429 or 5xx, RETRIES times at most, after the
        wait the hub asks for (Retry-After, MAX_WAIT_S at most), else BACKOFF_S, 2 x BACKOFF_S ..."""
        for attempt in range(RETRIES + 1):
            try:
                return fn()
            except Unreachable as e:
                if e.status is None or attempt == RETRIES:
                    raise
                wait = min(MAX_WAIT_S, BACKOFF_S * 2**attempt if e.retry_after is None else e.retry_after)
                log.warning(
                    "the hub answered HTTP %d for %s: retrying in %g s (%d/%d)",
                    e.status,
                    what,
                    wait,
                    attempt + 1,
                    RETRIES,
                )
                sleep(wait)


# ---------------------------------------------------------------- errors


def _transport_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.errors import OfflineModeIsEnabled
    from huggingface_hub.utils import get_session

    http = importlib.import_module(type(get_session()).__module__.split(".")[0])  # httpx(2)
    return (http.TransportError, OfflineModeIsEnabled, ConnectionError, TimeoutError)


def _http_errors() -> tuple[type[BaseException], ...]:
    from huggingface_hub.utils import get_session

    http = importlib.import_module(type(get_session()).__module__.split(".")[0])
    return (http.HTTPError,)


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
        raise Unreachable(_unreachable_msg(repo_id, endpoint, e)) from e
    except _transport_errors() as e:
        if type(e).__name__ in ("ReadTimeout", "RemoteProtocolError"):  # it answered, then stopped
            raise Stalled(_stalled_msg(repo_id, endpoint, e)) from e
        raise Unreachable(_unreachable_msg(repo_id, endpoint, e)) from e
    except _http_errors() as e:
        if type(e).__name__ != "TooManyRedirects":
            raise
        raise BadAnswer(
            f"the hub at {endpoint} redirected a request for {repo_id} in a loop (too many redirects): "
            "check HF_ENDPOINT and any proxy or mirror"
        ) from None


def _from_http(e, repo_id: str, revision: str | None, endpoint: str, files: bool) -> WqkError:
    from huggingface_hub.errors import (
        GatedRepoError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    status = getattr(getattr(e, "response", None), "status_code", None)
    if isinstance(e, GatedRepoError) or (files and status in (401, 403)) or status == 403:
        return gated(repo_id, endpoint)
    if isinstance(e, RevisionNotFoundError):
        return SourceUnavailable(
            f"revision {revision!r} of {repo_id} not found on the hub: give an existing branch, tag or commit sha"
        )
    if isinstance(e, RemoteEntryNotFoundError):
        return SourceUnavailable(f"a file of {repo_id} is missing on the hub at {revision}: pin another revision")
    if isinstance(e, RepositoryNotFoundError) or status in (401, 404):
        token = _token_sent()
        return SourceUnavailable(
            f"{repo_id} not found on the hub at {endpoint}: check the id, "
            + (
                "or export HF_TOKEN=<token> if it is private or gated"
                if token is None
                else f"or, if it is private or gated, whether the token from {token} (it was sent) has access"
            )
        )
    retry = status == 429 or (status or 0) >= 500  # transient: Hub._retrying retries them
    return Unreachable(
        f"the hub answered HTTP {status} for {repo_id}: retry later, or set HF_HUB_OFFLINE=1 with a filled cache",
        status if retry else None,
        _retry_after(e) if retry else None,
    )


def _retry_after(e) -> float | None:
    """The seconds a 429/503 asks us to wait (Retry-After: seconds or an HTTP date), if it does."""
    value = (getattr(getattr(e, "response", None), "headers", None) or {}).get("Retry-After", "").strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time()) if when.tzinfo else None


def _content_length(r) -> int:
    try:
        return int(r.headers.get("Content-Length", -1))
    except ValueError:
        return -1


def _check_answer(r, where: str, endpoint: str, sha: str, start: int, end: int) -> None:
    """BadAnswer unless a 206 names the range asked for, [start, end) or up to the end of a shorter
    file, with a body of that length, and every hub answer on the way names the commit asked for."""
    for answer in (*r.history, r):
        commit = answer.headers.get("X-Repo-Commit")
        if commit is not None and commit != sha:
            raise BadAnswer(
                f"the hub at {endpoint} answered for {where} with X-Repo-Commit {commit!r}, not the commit asked "
                "for: refusing it; check HF_ENDPOINT and any proxy or mirror"
            )
    if r.status_code != 206:
        return  # a whole file of at most `end` bytes (start 0), checked by _open
    m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", (r.headers.get("Content-Range") or "").strip())
    size = int(m.group(3)) if m and m.group(3) != "*" else None
    last = end - 1 if size is None else min(end, size) - 1
    length = _content_length(r)
    if not m or (int(m.group(1)), int(m.group(2))) != (start, last) or length not in (-1, last + 1 - start):
        raise BadAnswer(
            f"the hub at {endpoint} answered a request for bytes {start}-{end - 1} of {where} with "
            f"Content-Range {r.headers.get('Content-Range')!r} and Content-Length {r.headers.get('Content-Length')!r}, "
            f"not bytes {start}-{last}: refusing it (nothing of it is kept); check HF_ENDPOINT and any proxy "
            "or mirror, or fetch whole files with --all-weights"
        )


def _answered_length(r, start: int, end: int) -> int:
    """The body length of an answer `_check_answer` accepted."""
    if r.status_code == 206:
        size = _total_size(r.headers.get("Content-Range"))
        return (end if size is None else min(end, size)) - start
    return _content_length(r) if _content_length(r) >= 0 else end


def evict(path: Path) -> None:
    """Remove a file from the HF cache: its snapshot entry and the blob it points to (a forced
    download alone leaves the entry pointing at the old blob)."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)


def _sha256_mismatch(path: Path) -> str | None:
    """The sha256 of a file in the HF cache when its blob is named by another sha256, else None."""
    blob = path.resolve()
    if not _SHA256.fullmatch(blob.name):
        return None
    h = hashlib.sha256()
    with open(blob, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return None if h.hexdigest() == blob.name else h.hexdigest()


def _total_size(content_range: str | None) -> int | None:
    """The file size in a Content-Range header ("bytes 0-99/1234"), if it names one."""
    m = re.fullmatch(r"bytes \d+-\d+/(\d+)", (content_range or "").strip())
    return int(m.group(1)) if m else None


def _stalled_msg(repo_id: str, endpoint: str, e: BaseException) -> str:
    return (
        f"the hub at {endpoint} answered for {repo_id} but stalled ({type(e).__name__}: it stopped sending): "
        "rerun to resume from where it stopped (the bytes fetched so far are kept); on a slow link raise "
        "WQK_HUB_TIMEOUT, or set HF_HUB_OFFLINE=1 with a filled cache"
    )


def _unreachable_msg(repo_id: str, endpoint: str, e: BaseException) -> str:
    why = "HF_HUB_OFFLINE is set" if offline() else type(e).__name__
    return (
        f"cannot reach the Hugging Face hub at {endpoint} for {repo_id} ({why}): set "
        "HF_HUB_OFFLINE=1 with a filled cache (run `wqk fetch` where the hub is reachable), "
        "or give a local folder"
    )
