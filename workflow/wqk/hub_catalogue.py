"""A catalogue of the hub's models (`wqk catalogue`): the hub's listing
(checkpoints/hub/listing.py), filtered, each model it lists written as one catalogue line, or as
a comment line `# <hub id>\t<reason>` saying why it is not one; none is left out unsaid.

A line, in the columns of config/catalogue/hub_popular.tsv: source and model_id the hub id;
revision the listed commit (pinned); model_type the listed config's; family the model_type (one
architecture record each); modality by model_type (MODALITY); figure the modality's
scores-against-parameters figure; one objective per self-attention stack the record can yield
(`Record.objectives`: a stack the checkpoint lacks is never read, as when the catalogue loader
fills them in); n_params the safetensors total (empty for pytorch_model.bin-only repos); notes
the downloads, pipeline tag and library, and "gated"; licence the model card's as the hub tags it
(`license:NAME`; empty where there is none, or where NAME is not one a catalogue cell can hold). Lines and comments in the order of the hub
ids, so the file depends on what the hub lists, not on the order it lists it in.

With `revisions` (a revision sweep, wqk.sweeps: `step{N}~8`, or a list of names), each model's
line is followed by a second one, its sweep: the `revisions` cell pinned against the repo's
branches, no figure key (a sweep is drawn along training); a model whose branches do not match
gets a comment line `# <hub id>@revisions\t<reason>` instead.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .catalogue import SCHEMA_PATH, check_rows
from .checkpoints.checkpoint import model_type_of
from .checkpoints.hub.listing import Listed, Query, list_models
from .errors import UnsupportedModelType
from .ids import slug

COLUMNS = [
    "slug", "model_id", "source", "model_type", "revision", "family", "modality", "n_params", "figure",
    "synthetic", "objective_encoder", "objective_decoder", "objective_cross", "paper_stacks", "notes", "licence",
]  # fmt: skip
AUDIO = {
    "data2vec-audio", "hubert", "musicgen", "musicgen_decoder", "speech_to_text", "speecht5", "unispeech",
    "unispeech-sat", "wav2vec2", "wavlm", "whisper",
}  # fmt: skip
VISION = {  # image models, and the image-text ones the paper counts as vision (GIT, Mllama)
    "beit", "clip", "data2vec-vision", "deit", "detr", "dinov2", "git", "imagegpt", "mask2former", "mllama",
    "sam", "siglip", "swin", "swinv2", "vit", "vit_mae",
}  # fmt: skip
FIGURE = {"text": "language", "vision": "vision", "audio": "audio", "time series": ""}  # no paper figure of its own
_UNSAFE = re.compile(r"[\t\r\n\"]")  # a cell is one line of tab-separated text without quotes


def modality(model_type: str) -> str:
    """The paper's modality of a model type: the hand-written sets, else what its derived
    record's forward read (its vision or audio tower, or its main input)."""
    if model_type in AUDIO or model_type in VISION:
        return "audio" if model_type in AUDIO else "vision"
    from .adapters import is_hand

    if is_hand(model_type):
        return "text"
    try:
        from .derive.store import cached
    except ImportError:  # the light env
        return "text"
    return cached(model_type).facts.get("modality", "text")


@dataclass(frozen=True)
class Filters:
    """The hub's query, and what only wqk can check: model_types (exact, any of them; one is
    also asked of the hub as a tag), min_downloads, the parameter range (a model without a
    safetensors count is a comment line then), limit (models taken, lines and comments)."""

    query: Query = field(default_factory=Query)
    model_types: tuple[str, ...] = ()
    min_downloads: int = 0
    limit: int | None = None
    revisions: str | None = None  # a sweep of each model (wqk.sweeps), pinned against its branches


@dataclass(frozen=True)
class Entry:
    """One listed model: its catalogue row, or the reason it has none."""

    repo_id: str
    row: dict | None = None
    reason: str | None = None
    sweep: dict | None = None  # with Filters.revisions: the line of its sweep ...
    sweep_reason: str | None = None  # ... or why it has none


def build(filters: Filters, listed: Iterable[Listed] | None = None, **hub) -> list[Entry]:
    """The entries of the models that pass `filters`, by hub id. listed: the listing (default:
    the hub's, asked with filters.query; hub: list_models' endpoint, token, timeout)."""
    if listed is None:
        query = filters.query
        if len(filters.model_types) == 1 and filters.model_types[0] not in query.tags:
            query = dataclasses.replace(query, tags=(*query.tags, filters.model_types[0]))
        listed = list_models(query, **hub)
    entries = _unique_slugs(sorted(_taken(filters, listed), key=lambda e: (e.repo_id.lower(), e.repo_id)))
    return [_swept(e, filters.revisions, **hub) for e in entries] if filters.revisions else entries


def _swept(e: Entry, revisions: str, **hub) -> Entry:
    """The entry with the line of its sweep (its branches asked of the hub), or the reason for none."""
    from .checkpoints.hub import repo_refs
    from .errors import WqkError
    from .sweeps import pin

    if e.row is None:
        return e
    try:
        cell = pin(revisions, repo_refs(e.repo_id, **hub), e.repo_id)
    except WqkError as error:
        return dataclasses.replace(e, sweep_reason=_clean(str(error)))
    sweep = {**e.row, "slug": "", "revision": "", "figure": "", "revisions": cell}
    return dataclasses.replace(e, sweep=sweep)


def _taken(filters: Filters, listed: Iterable[Listed]) -> Iterator[Entry]:
    if filters.limit == 0:
        return
    n = 0
    for model in listed:
        if model.downloads < filters.min_downloads:
            return  # the listing comes most downloaded first: the rest have fewer
        if not _passes(filters, model):
            continue
        yield entry(model, filters)
        n += 1
        if n == filters.limit:
            return  # before the next model: no page is asked for that is not read


def _passes(filters: Filters, model: Listed) -> bool:
    q = filters.query
    if filters.model_types and model_type_of(model.config) not in filters.model_types:
        return False
    if q.gated is not None and bool(model.gated) != q.gated:
        return False
    if model.n_params is None:
        return True  # a comment line, when a range is asked (entry)
    return (q.min_params is None or model.n_params >= q.min_params) and (
        q.max_params is None or model.n_params <= q.max_params
    )


def entry(model: Listed, filters: Filters = Filters()) -> Entry:
    """The catalogue row of one listed model, or the reason it cannot have one."""
    from .adapters import get_record

    def skip(reason: str) -> Entry:
        return Entry(model.repo_id, reason=_clean(reason))

    model_type = model_type_of(model.config)  # a timm checkpoint's: "timm:" + its architecture
    if not _source_ok(model.repo_id):
        return skip(f"the hub id {model.repo_id!r} is not one a catalogue source can name")
    if not isinstance(model_type, str) or not model_type:
        return skip(
            "no model_type in the config the hub lists (no config.json, or neither a transformers nor a timm model)"
        )
    try:  # the hand-written record, else one derived from transformers' forward (or the reason there is none)
        record = get_record(model_type, model.repo_id, model.config)
    except UnsupportedModelType as e:
        return skip(str(e))
    if model.sha is None:
        return skip("the hub listed no commit sha to pin")
    q = filters.query
    if model.n_params is None and (q.min_params is not None or q.max_params is not None):
        return skip("no safetensors parameter count on the hub: the parameter range cannot be checked")
    objectives = record.objectives
    kind = modality(model_type)
    row = {
        "slug": slug(model.repo_id),
        "model_id": model.repo_id,
        "source": model.repo_id,
        "model_type": model_type,
        "revision": model.sha,
        "family": model_type,
        "modality": kind,
        "n_params": "" if model.n_params is None else str(model.n_params),
        "figure": FIGURE[kind],
        "synthetic": "False",
        **{f"objective_{s}": objectives.get(s, "") for s in ("encoder", "decoder", "cross")},
        "paper_stacks": "",
        "notes": _clean(_notes(model)),
        "licence": model.licence if model.licence and _schema_pattern("licence").fullmatch(model.licence) else "",
    }
    return Entry(model.repo_id, row=row)


def _notes(model: Listed) -> str:
    parts = [f"hub listing: {model.downloads} downloads"]
    parts += [
        f"{what} {value}" for what, value in (("pipeline", model.pipeline_tag), ("library", model.library)) if value
    ]
    return " | ".join(parts + (["gated"] if model.gated else []))


def _clean(text: str) -> str:
    return " ".join(_UNSAFE.sub(" ", text).split())


def _source_ok(repo_id: str) -> bool:
    return "/" in repo_id and _schema_pattern("source").fullmatch(repo_id) is not None


@functools.cache
def _schema_pattern(column: str) -> re.Pattern:
    """The catalogue schema's pattern of a column's cells."""
    import yaml

    return re.compile(yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))["properties"][column]["pattern"])


def _unique_slugs(entries: list[Entry]) -> list[Entry]:
    """Two hub ids with one slug (ids that differ in case only): the second a comment line."""
    seen: dict[str, str] = {}
    out = []
    for e in entries:
        if e.row is not None and e.row["slug"] in seen:
            e = Entry(e.repo_id, reason=f"its slug {e.row['slug']} is also that of {seen[e.row['slug']]}")
        elif e.row is not None:
            seen[e.row["slug"]] = e.repo_id
        out.append(e)
    return out


def render(entries: list[Entry], preamble: Iterable[str] = ()) -> str:
    """The catalogue file: preamble comment lines, the header, then each entry by hub id (a row,
    or `# <hub id>\t<reason>`). The rows are checked as the catalogue loader checks them."""
    swept = any(e.sweep is not None or e.sweep_reason for e in entries)
    columns = [*COLUMNS, "revisions"] if swept else COLUMNS
    rows = [r for e in entries for r in (e.row, e.sweep) if r is not None]
    cells = [(n, [r.get(c, "") for c in columns]) for n, r in enumerate(rows, start=2)]
    check_rows(columns, cells, "wqk catalogue")
    lines = [f"# {_clean(p)}" for p in preamble] + ["\t".join(columns)]
    for e in entries:
        if e.row is None:
            lines.append(f"# {e.repo_id}\t{e.reason}")
            continue
        lines.append("\t".join(e.row.get(c, "") for c in columns))
        if e.sweep is not None:
            lines.append("\t".join(e.sweep[c] for c in columns))
        elif e.sweep_reason:
            lines.append(f"# {e.repo_id}@revisions\t{e.sweep_reason}")
    return "\n".join(lines) + "\n"
