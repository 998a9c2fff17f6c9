"""`GET /api/models` of the stand-in hub: the model listing as the hub serves it to
huggingface_hub's `list_models` (hf_api.py) and to `wqk catalogue`.

Query: `author` (the namespace), `search` (a substring of the id, any case), `filter` (tags,
each required; repeatable), `pipeline_tag`, `library`, `gated` (true/false), `num_parameters`
("min:6B,max:128B": the safetensors count; a model without one never matches), `sort` (downloads,
likes, createdAt, lastModified, id) with `direction` (-1, the default: descending; ties by id),
`limit` (the page size, at most the hub's `listing_page_size`), `cursor` (where the next page
starts), `expand` or `expand[]` (repeatable: only those properties, with `id` and `_id`; an unknown
one is a 400, as on the hub). Without `expand`: the hub's default fields. A page that is not the
last carries `Link: <.../api/models?...&cursor=...>; rel="next"`.

What each repo says about itself, from its files and its manifest entry (every key optional):
    downloads, likes (0), pipeline_tag (else from its config's architecture), library_name
    ("transformers" where config.json exists), tags (added to those derived: the library, the
    weight formats, the config's model_type, the pipeline tag).
`config` is the subset of config.json the hub lists (architectures, model_type, auto_map,
quantization_config), `safetensors` the parameters per dtype read from the shards' headers.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import urlencode

EXPANDABLE = {  # huggingface_hub's ExpandModelProperty_T: what the hub accepts
    "author", "baseModels", "cardData", "childrenModelCount", "config", "createdAt", "disabled", "downloads",
    "downloadsAllTime", "evalResults", "gated", "gguf", "inference", "inferenceProviderMapping", "lastModified",
    "library_name", "likes", "mask_token", "model-index", "pipeline_tag", "private", "resourceGroup",
    "safetensors", "sha", "siblings", "spaces", "tags", "transformersInfo", "trendingScore", "usedStorage",
    "widgetData",
}  # fmt: skip
DEFAULT_FIELDS = ("likes", "trendingScore", "private", "downloads", "tags", "pipeline_tag", "library_name", "createdAt")
CONFIG_KEYS = ("architectures", "model_type", "auto_map", "quantization_config")
SORTS = {"downloads", "likes", "createdAt", "lastModified", "id", "trendingScore"}
MAX_PAGE = 1000
DATE = "2024-01-01T00:00:00.000Z"
# the pipeline tag the hub infers from a transformers architecture, by the class name's ending
PIPELINES = (
    ("ForCausalLM", "text-generation"),
    ("LMHeadModel", "text-generation"),
    ("ForMaskedLM", "fill-mask"),
    ("ForCTC", "automatic-speech-recognition"),
    ("ForSpeechSeq2Seq", "automatic-speech-recognition"),
    ("ForImageClassification", "image-classification"),
    ("ForObjectDetection", "object-detection"),
    ("ForUniversalSegmentation", "image-segmentation"),
    ("ForSequenceClassification", "text-classification"),
    ("ForConditionalGeneration", "text2text-generation"),
    ("MTModel", "translation"),
    ("Model", "feature-extraction"),
)
_SUFFIX = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


class BadQuery(ValueError):
    """A query the hub answers 400 (the message is the hub's `error`)."""


def answer(hub, query: dict[str, list[str]]) -> tuple[list, dict]:
    """(the page, its headers) for a query as parse_qs reads it; BadQuery for a 400."""
    expand = query.get("expand", []) + query.get("expand[]", [])
    unknown = [e for e in expand if e not in EXPANDABLE]
    if unknown:
        raise BadQuery(f'"expand" must be one of {sorted(EXPANDABLE)}: not {unknown}')
    models = sorted((r for (kind, _), r in hub.repos.items() if kind == "models"), key=lambda r: r.repo_id)
    models = [r for r in models if _matches(r, query)]
    models = _sorted(models, _one(query, "sort"), _one(query, "direction") or "-1")
    start = _cursor(_one(query, "cursor"))
    size = min(_int(_one(query, "limit"), "limit") or MAX_PAGE, MAX_PAGE, hub.listing_page_size)
    page = models[start : start + size]
    headers = {}
    if start + size < len(models):
        rest = [(k, v) for k in query for v in query[k] if k != "cursor"]
        url = f"{hub.url}/api/models?{urlencode(rest + [('cursor', _encode(start + size))])}"
        headers["Link"] = f'<{url}>; rel="next"'
    return [_item(r, expand) for r in page], headers


def _one(query: dict, key: str) -> str | None:
    values = query.get(key)
    return values[-1] if values else None


def _int(text: str | None, what: str) -> int | None:
    if text is None:
        return None
    if not re.fullmatch(r"\d+", text):
        raise BadQuery(f'"{what}" must be a number')
    return int(text)


def _encode(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode().rstrip("=")


def _cursor(text: str | None) -> int:
    if text is None:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))["offset"])
    except (ValueError, KeyError, TypeError):
        raise BadQuery("invalid cursor") from None


def parameters(text: str) -> tuple[int | None, int | None]:
    """num_parameters "min:6B,max:128B" (either part optional) as (min, max)."""
    bounds: dict[str, int] = {}
    for part in text.split(","):
        m = re.fullmatch(r"(min|max):(\d+(?:\.\d+)?)([KMBT]?)", part.strip())
        if not m:
            raise BadQuery(f'"num_parameters" must read min:<n>,max:<n> (n as 6B, 350M or digits): not {text!r}')
        bounds[m.group(1)] = int(float(m.group(2)) * _SUFFIX.get(m.group(3), 1))
    return bounds.get("min"), bounds.get("max")


def _matches(repo, query: dict) -> bool:
    facts = facts_of(repo)
    author, search = _one(query, "author"), _one(query, "search")
    if author is not None and repo.repo_id.partition("/")[0].lower() != author.lower():
        return False
    if search is not None and search.lower() not in repo.repo_id.lower():
        return False
    if not set(query.get("filter", [])) <= set(facts["tags"]):
        return False
    for key, have in (("pipeline_tag", facts["pipeline_tag"]), ("library", facts["library_name"])):
        if _one(query, key) is not None and _one(query, key) != have:
            return False
    gated = _one(query, "gated")
    if gated is not None and gated.lower() != ("true" if repo.gated else "false"):
        return False
    if _one(query, "num_parameters") is not None:
        low, high = parameters(_one(query, "num_parameters"))
        total = (facts["safetensors"] or {}).get("total")
        if total is None or (low is not None and total < low) or (high is not None and total > high):
            return False
    return True


def _sorted(models: list, key: str | None, direction: str) -> list:
    if key is None:
        return models
    if key not in SORTS:
        raise BadQuery(f'"sort" must be one of {sorted(SORTS)}')
    if direction not in ("1", "-1"):
        raise BadQuery('"direction" must be 1 or -1')
    sign = -1 if direction == "-1" else 1

    def rank(repo):
        value = repo.repo_id if key == "id" else _fields(repo).get(key) or 0
        return (sign * value if isinstance(value, int) else 0, repo.repo_id)

    out = sorted(models, key=rank)
    return out[::-1] if key == "id" and sign < 0 else out


def facts_of(repo) -> dict:
    """What the listing says of a repo (computed once per repo: headers read, config parsed)."""
    if repo.listing is None:
        meta = repo.meta
        config = json.loads(repo.files["config.json"].read_bytes()) if "config.json" in repo.files else None
        config = config if isinstance(config, dict) else None
        library = meta.get("library_name", "transformers" if config is not None else None)
        pipeline = meta.get("pipeline_tag") or _pipeline(config)
        formats = [t for t, ext in (("safetensors", ".safetensors"), ("pytorch", ".bin")) if _has(repo, ext)]
        tags = [library, *formats, (config or {}).get("model_type"), pipeline, *meta.get("tags", [])]
        repo.listing = {
            "config": None if config is None else {k: config[k] for k in CONFIG_KEYS if k in config},
            "safetensors": _safetensors(repo),
            "library_name": library,
            "pipeline_tag": pipeline,
            "tags": list(dict.fromkeys(t for t in tags if isinstance(t, str) and t)),
        }
    return repo.listing


def _has(repo, ext: str) -> bool:
    return any(name.endswith(ext) for name in repo.files)


def _pipeline(config: dict | None) -> str | None:
    architectures = (config or {}).get("architectures") or []
    name = architectures[0] if architectures and isinstance(architectures[0], str) else ""
    return next((tag for suffix, tag in PIPELINES if name.endswith(suffix)), None)


def _safetensors(repo) -> dict | None:
    """{"parameters": {dtype: count}, "total": count} over the repo's .safetensors files, or None."""
    counts: dict[str, int] = {}
    for name in sorted(n for n in repo.files if n.endswith(".safetensors")):
        with open(repo.files[name], "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        for key, entry in header.items():
            if key != "__metadata__":
                n = 1
                for d in entry["shape"]:
                    n *= d
                counts[entry["dtype"]] = counts.get(entry["dtype"], 0) + n
    return {"parameters": dict(sorted(counts.items())), "total": sum(counts.values())} if counts else None


def _fields(repo) -> dict:
    facts = facts_of(repo)
    return {
        "author": repo.repo_id.partition("/")[0] if "/" in repo.repo_id else None,
        "config": facts["config"],
        "createdAt": DATE,
        "disabled": False,
        "downloads": int(repo.meta.get("downloads", 0)),
        "gated": repo.gated,
        "lastModified": DATE,
        "library_name": facts["library_name"],
        "likes": int(repo.meta.get("likes", 0)),
        "pipeline_tag": facts["pipeline_tag"],
        "private": False,
        "safetensors": facts["safetensors"],
        "sha": repo.sha,
        "siblings": [{"rfilename": f} for f in sorted(repo.files)],
        "tags": facts["tags"],
        "trendingScore": 0,
    }


def _item(repo, expand: list[str]) -> dict:
    """One model of a page: the expanded properties the repo has (the hub leaves out those it
    has none of, e.g. `safetensors` of a pytorch_model.bin repo), else the default fields."""
    fields = _fields(repo)
    wanted = expand or [*DEFAULT_FIELDS, "modelId"]
    out = {"_id": repo.sha[:24], "id": repo.repo_id}
    for key in wanted:
        value = repo.repo_id if key == "modelId" else fields.get(key)
        if value is not None:
            out[key] = value
    return out
