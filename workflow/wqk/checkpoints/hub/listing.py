"""The hub's model listing, `GET /api/models`: the models that match a query, most downloaded
first, each with what a catalogue line needs (`expand`: the commit, the listed config, the
safetensors parameter count, downloads, gating, pipeline tag, library, tags: the licence).

The pages are huggingface_hub's (`list_models` builds the same query and follows the same
`Link: <...>; rel="next"` header), asked for here so that each request has a timeout
(`list_models` sets none: a hub that stops answering would hang the listing) and the first one
fails in seconds when the hub cannot be reached (a later page is retried on a dropped
connection, as huggingface_hub retries, and every page on 429 and 5xx). Errors leave as one-line
SourceUnavailable naming HF_ENDPOINT, HF_TOKEN or the filter at fault.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from ...errors import SourceUnavailable, WqkError
from ...ids import is_commit
from .client import Hub, Unreachable, _token_sent, _transport_errors, offline

log = logging.getLogger(__name__)

EXPAND = ["sha", "config", "safetensors", "downloads", "gated", "pipeline_tag", "library_name", "tags"]
LICENCE_TAG = "license:"  # the hub's tag of the model card's `license:`
_SUFFIXES = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K"))


@dataclass(frozen=True)
class Listed:
    """One model of the listing. config: the hub's subset of config.json (architectures,
    model_type, ...; {} when the repo has none); n_params: the safetensors total (None: no
    safetensors weights); gated: False, "auto" or "manual"; sha: None unless 40 hex digits;
    licence: the model card's `license:` as the hub tags it (apache-2.0, mit, llama3.1, other...),
    None when it has none."""

    repo_id: str
    sha: str | None
    config: dict
    n_params: int | None
    downloads: int
    gated: bool | str
    pipeline_tag: str | None
    library: str | None
    licence: str | None = None


@dataclass(frozen=True)
class Query:
    """What the hub filters (each None: any). tags: every one required (the hub's `filter`:
    a library, a model_type, a language...). gated: True only gated models, False none.
    min_params, max_params: the safetensors count (`num_parameters`)."""

    author: str | None = None
    search: str | None = None
    pipeline_tag: str | None = None
    tags: tuple[str, ...] = ()
    gated: bool | None = None
    min_params: int | None = None
    max_params: int | None = None

    def params(self) -> dict:
        """The query string as huggingface_hub's list_models writes it (sort=downloads: its
        default direction, descending)."""
        out: dict = {"sort": "downloads", "expand": EXPAND}
        for key in ("author", "search", "pipeline_tag"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.tags:
            out["filter"] = list(self.tags)
        if self.gated is not None:
            out["gated"] = "true" if self.gated else "false"
        bounds = [f"{k}:{_count(v)}" for k, v in (("min", self.min_params), ("max", self.max_params)) if v is not None]
        if bounds:
            out["num_parameters"] = ",".join(bounds)
        return out


def _count(n: int) -> str:
    """A parameter count as the hub's num_parameters writes it: 6B, 350M, else the digits."""
    for size, suffix in _SUFFIXES:
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def list_models(
    query: Query, *, endpoint: str | None = None, token: str | None = None, timeout: float | None = None
) -> Iterator[Listed]:
    """The models the hub lists for `query`, most downloaded first, page after page as they are
    consumed (stopping early asks for no further page). endpoint: $HF_ENDPOINT, else
    huggingface.co; token: None lets huggingface_hub read HF_TOKEN (or the stored login);
    timeout: seconds per request (WQK_HUB_TIMEOUT). Raises SourceUnavailable."""
    hub = Hub.connect("the model listing", endpoint, token, timeout=timeout)
    if offline():
        raise SourceUnavailable(
            f"listing the models of the hub at {hub.endpoint} needs the hub and HF_HUB_OFFLINE=1 is set: "
            "unset it where the hub is reachable"
        )
    url, params, pages = f"{hub.endpoint}/api/models", query.params(), 0
    while url is not None:
        page, url = _page(hub, url, params, first=pages == 0)
        pages, params = pages + 1, None  # the next page's link carries the query
        yield from map(_listed, page)
    log.debug("the hub listed %d page(s)", pages)


def _page(hub: Hub, url: str, params: dict | None, first: bool) -> tuple[list[dict], str | None]:
    """One page and the next page's URL (None: the last page)."""
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff

    # the first request is not retried on a failed connection: no network fails in seconds
    retry = {"retry_on_exceptions": ()} if first else {}
    with _listing_errors(hub.endpoint):
        r = http_backoff(
            "GET", url, params=params, headers=build_hf_headers(token=hub.token), timeout=hub.timeout, **retry
        )
        hf_raise_for_status(r)
        try:
            page = r.json()
        except ValueError:
            page = None
    if not isinstance(page, list) or not all(isinstance(i, dict) and isinstance(i.get("id"), str) for i in page):
        raise SourceUnavailable(
            f"the hub at {hub.endpoint} answered the model listing ({url}) with something other than a list of "
            "models: check HF_ENDPOINT and any proxy or mirror"
        )
    return page, r.links.get("next", {}).get("url")


def _listed(item: dict) -> Listed:
    """A listed model from its JSON (the fields of huggingface_hub's ModelInfo, as the hub spells
    them), each value of an unexpected type read as absent."""
    safetensors = item.get("safetensors")
    total = safetensors.get("total") if isinstance(safetensors, dict) else None
    sha, config, downloads = item.get("sha"), item.get("config"), item.get("downloads")
    return Listed(
        repo_id=item["id"],
        sha=sha if is_commit(sha) else None,
        config=config if isinstance(config, dict) else {},
        n_params=total if isinstance(total, int) and total > 0 else None,
        downloads=downloads if isinstance(downloads, int) else 0,
        gated=item.get("gated") if item.get("gated") in ("auto", "manual") else False,
        pipeline_tag=_text(item.get("pipeline_tag")),
        library=_text(item.get("library_name")),
        licence=_licence(item.get("tags")),
    )


def _licence(tags) -> str | None:
    """The first `license:NAME` tag's NAME (the hub tags a model card's licence so)."""
    if not isinstance(tags, list):
        return None
    return next((t[len(LICENCE_TAG) :] for t in tags if isinstance(t, str) and t.startswith(LICENCE_TAG)), None) or None


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


@contextlib.contextmanager
def _listing_errors(endpoint: str):
    """huggingface_hub/httpx exceptions of one listing request -> one-line SourceUnavailable."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        yield
    except WqkError:
        raise
    except HfHubHTTPError as e:
        raise _from_status(e, endpoint) from e
    except _transport_errors() as e:
        raise Unreachable(
            f"cannot reach the Hugging Face hub at {endpoint} for the model listing ({type(e).__name__}): "
            "check the network and HF_ENDPOINT, then rerun"
        ) from e


def _from_status(e, endpoint: str) -> WqkError:
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status in (401, 403):
        token = _token_sent()
        sent = f"the token from {token}" if token else "no token"
        return SourceUnavailable(
            f"the hub at {endpoint} refused the model listing (HTTP {status}) with {sent}: check HF_TOKEN "
            "(listing public models needs none: unset it to list without one)"
        )
    if status == 400:
        why = " ".join(str(getattr(e, "server_message", "") or "").split())[:300]
        return SourceUnavailable(
            f"the hub at {endpoint} refused the listing's query (HTTP 400{': ' + why if why else ''}): check the filters"
        )
    if status == 404:
        return SourceUnavailable(
            f"the hub at {endpoint} has no model listing (/api/models answered 404): check HF_ENDPOINT"
        )
    return Unreachable(
        f"the hub at {endpoint} answered HTTP {status} for the model listing (retried): retry later", status
    )
