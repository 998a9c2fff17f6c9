"""The model catalogue (config/catalogue/*.tsv): one loader and one set of checks, used by
the workflow at parse time (workflow/rules/common.smk), by aggregation and by the tests.

One line per checkpoint, tab-separated, "#" lines are comments; the columns, their types
and defaults are those of workflow/schemas/catalogue.schema.yaml. Every error names the
file, the line and the column. Where a row's model_type is known (a `tiny:` source, or the
optional `model_type` column), its objectives are checked against that architecture's record.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import jsonschema
import yaml

from .checkpoints.source import parse_source
from .contracts import STACKS
from .errors import WqkError
from .ids import slug as make_slug
from .sweeps import SWEEP_COLUMNS, Pattern, SweepError
from .sweeps import expand as expand_sweep
from .sweeps import parse as parse_revisions

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "catalogue.schema.yaml"
NO_OBJECTIVE = {"empty", "none", "-", "n/a"}  # spellings of "no such stack"
# optional columns kept in the rows only where the file has them, so that a catalogue without
# them loads (and is written to results/catalogue.tsv) exactly as before they existed; a
# `revisions` column is never kept: its lines are expanded, with `sweep` and `step` (wqk.sweeps)
ONLY_IF_GIVEN = {"model_type", "licence", "file", "revisions", *SWEEP_COLUMNS}


class CatalogueError(WqkError):
    pass


def _schema(path: Path | None = None) -> dict:
    return yaml.safe_load(Path(path or SCHEMA_PATH).read_text(encoding="utf-8"))


def _cell(value: str, spec: dict):
    """A TSV cell as the JSON type its schema property expects (left as text when it is not:
    the schema then names the bad cell)."""
    types = spec.get("type", "string")
    types = types if isinstance(types, list) else [types]
    if value == "" and "null" in types:
        return None
    if "integer" in types:
        try:
            return int(value)
        except ValueError:
            try:  # 1e8 or 100000000.0 from a DataFrame
                return int(float(value)) if float(value).is_integer() else value
            except ValueError:
                return value
    if "boolean" in types:
        return {"true": True, "false": False}.get(value.lower(), value)
    return value


def check_rows(
    header: list[str],
    rows: list[tuple[int, list[str]]],
    origin: str,
    schema_path=None,
    header_line: int = 1,
    sweep_patterns: bool = False,
) -> list[dict]:
    """Validated rows from a header (on line `header_line`) and (line number, cells) pairs:
    defaults filled, slugs derived, columns in schema order, lists of revisions expanded
    (wqk.sweeps). Raises CatalogueError naming origin, line and column. sweep_patterns: a
    pattern of revisions is left as one row, not refused (what `wqk pin` expands)."""
    schema = _schema(schema_path)
    props = schema["properties"]
    unknown = [c for c in header if c not in props]
    if unknown:
        raise CatalogueError(
            f"{origin}, line {header_line} (header): unknown column(s) {unknown}; allowed: {sorted(props)}"
        )
    missing = [c for c in schema["required"] if c not in header]
    if missing:
        raise CatalogueError(f"{origin}, line {header_line} (header): missing column(s) {missing}")
    validator = jsonschema.Draft202012Validator(schema)
    out, slugs, ids = [], {}, {}
    for lineno, cells in rows:
        where = f"{origin}, line {lineno}"
        if len(cells) != len(header):
            raise CatalogueError(f"{where}: {len(cells)} tab-separated cells, the header has {len(header)}")
        row = _typed_row(dict(zip(header, cells)), props)
        errors = sorted(validator.iter_errors(row), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            column = f"column '{e.path[0]}'" if e.path else "row"
            raise CatalogueError(f"{where}, {column}: {e.message}")
        for key, spec in props.items():
            row.setdefault(key, spec.get("default"))
        _check_row(row, where)
        kept = [k for k in props if k not in ONLY_IF_GIVEN or k in header]
        if "revisions" in header:
            kept = [k for k in props if k in kept + list(SWEEP_COLUMNS) and k != "revisions"]
        for line in _swept(row, where, sweep_patterns):
            line["slug"] = line["slug"] or make_slug(line["model_id"])
            for key, seen in (("slug", slugs), ("model_id", ids)):
                if line[key] in seen:
                    raise CatalogueError(f"{where}: duplicate {key} '{line[key]}' (also on line {seen[line[key]]})")
                seen[line[key]] = lineno
            out.append({k: line[k] for k in kept})
    return out


def _swept(row: dict, where: str, patterns_allowed: bool = False) -> list[dict]:
    """The row, or the rows of its revisions when it names several (wqk.sweeps)."""
    try:
        revisions = parse_revisions(row["revisions"])
    except SweepError as e:
        raise CatalogueError(f"{where}, column 'revisions': {e}") from None
    if revisions is None:
        if row["step"] is not None and not row["sweep"]:
            raise CatalogueError(f"{where}, column 'step': a step belongs to a swept line: give `sweep` too")
        return [row]
    if parse_source(row["source"]).kind != "hub":
        raise CatalogueError(f"{where}, column 'revisions': sweeps are of hub models, not of {row['source']}")
    if row["sweep"] or row["step"] is not None or row["revision"] != "main":
        raise CatalogueError(
            f"{where}: give `revisions` alone: `revision`, `sweep` and `step` are what it expands into"
        )
    if isinstance(revisions, Pattern):
        if patterns_allowed:
            return [row]
        raise CatalogueError(
            f"{where}, column 'revisions': {revisions} names the repo's branches, which only the hub knows: "
            "expand it with `wqk pin CATALOGUE` (writes the revisions it stands for, pinned), or list them"
        )
    return expand_sweep(row, revisions)


def _typed_row(raw: dict[str, str], props: dict) -> dict:
    row = {}
    for key, value in raw.items():
        value = "" if value is None else str(value).strip()
        if key.startswith("objective_") and value.lower() in NO_OBJECTIVE:
            value = ""
        if value == "" and "default" in props[key]:
            continue
        row[key] = _cell(value.lower() if key.startswith("objective_") else value, props[key])
    return row


def _check_row(row: dict, where: str) -> None:
    try:
        source = parse_source(row["source"])
    except WqkError as e:
        raise CatalogueError(f"{where}, column 'source': {e}") from None
    if row["file"] and source.kind != "hub":
        raise CatalogueError(
            f"{where}, column 'file': a file of a hub repo, but the source {row['source']} is a {source.kind} "
            "source; give a local GGUF file's path as the source itself"
        )
    model_type = row["model_type"]
    if source.kind == "tiny":
        if model_type and model_type != source.model_type:
            raise CatalogueError(
                f"{where}, column 'model_type': {model_type!r}, but the source builds {row['source']}; "
                "make them agree or leave model_type empty"
            )
        self_attention = _check_objectives(row, where, source.model_type, "source", need_tiny=True)
    else:
        self_attention = _check_objectives(row, where, model_type, "model_type") if model_type else True
    if self_attention and not (row["objective_encoder"] or row["objective_decoder"]):
        raise CatalogueError(f"{where}: give objective_encoder and/or objective_decoder")


def fetch_source(row: dict) -> str:
    """What `wqk fetch` is given for a hub row: its source, with its chosen file (`file`) if any."""
    return f"{row['source']}:{row['file']}" if row.get("file") else row["source"]


def _check_objectives(row: dict, where: str, model_type: str, column: str, need_tiny: bool = False) -> bool:
    """Where the row names its model_type (in `column`: a tiny: source or the model_type
    column): the record's objectives are the default (filled in when the row gives none),
    and the row may override them, but only for stacks the architecture has. need_tiny: the
    workflow builds the model from the record's tiny config. Whether the architecture has a
    self-attention stack (CvT's or a perceiver's attention is cross-attention alone: no objective)."""
    from .adapters import get_record
    from .errors import UnsupportedModelType

    try:
        record = get_record(model_type)
    except UnsupportedModelType as e:
        raise CatalogueError(f"{where}, column '{column}': {e}") from None
    if need_tiny and record.tiny is None:
        raise CatalogueError(
            f"{where}, column '{column}': model_type {model_type!r} has no tiny config; add Tiny(...) to its record"
        )
    stacks = [s for s in STACKS if s != "cross"]
    given = {s: row[f"objective_{s}"] for s in stacks if row[f"objective_{s}"]}
    for stack in given:
        if stack not in record.objectives:
            raise CatalogueError(
                f"{where}, column 'objective_{stack}': model_type {model_type!r} has no {stack} self-attention "
                f"(its stacks: {', '.join(record.objectives) or 'none: cross-attention only'}); leave the cell empty"
            )
    if not given:
        for stack, objective in record.objectives.items():
            row[f"objective_{stack}"] = objective
    return bool(record.objectives)


def load_catalogue(path: str | os.PathLike, schema_path=None, sweep_patterns: bool = False) -> list[dict]:
    """The validated rows of a catalogue file, in file order (sweep_patterns: see check_rows)."""
    origin = f"catalogue {path}"
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = [
                (n, line) for n, line in enumerate(f, start=1) if line.strip() and not line.lstrip().startswith("#")
            ]
    except FileNotFoundError:
        raise CatalogueError(f"{origin} not found: set `catalogue:` in the config file") from None
    if not lines:
        raise CatalogueError(f"{origin} has no header and no models")
    # line by line: a cell is one line, and a quote left open would swallow the next lines
    for n, line in lines:
        if line.count('"') % 2:
            raise CatalogueError(
                f'{origin}, line {n}: a quote (") is opened and not closed on this line; a cell is one line'
            )
    parsed = [next(csv.reader([line.rstrip("\r\n")], delimiter="\t"), []) for _, line in lines]
    rows = [(n, cells) for (n, _), cells in zip(lines[1:], parsed[1:])]
    # the header's own line, whatever comments and blank lines come before or after it
    header = [c.strip() for c in parsed[0]]
    checked = check_rows(header, rows, origin, schema_path, header_line=lines[0][0], sweep_patterns=sweep_patterns)
    if not rows:
        raise CatalogueError(f"{origin} has no models")
    return checked


def load_catalogues(paths: str | os.PathLike | list) -> list[dict]:
    """The rows of one catalogue file, or of several in order (the config's `catalogue:` may list
    the paper's and a sweep's); every row with the columns any of them has (defaults filled), a
    model in two files an error naming both."""
    if isinstance(paths, (str, os.PathLike)):
        return load_catalogue(paths)
    loaded = [(path, load_catalogue(path)) for path in paths]
    seen: dict[tuple[str, str], str] = {}
    for path, rows in loaded:
        for row in rows:
            for key in ("slug", "model_id"):
                other = seen.setdefault((key, row[key]), str(path))
                if other != str(path):
                    raise CatalogueError(f"catalogue {path}: {key} '{row[key]}' is in catalogue {other} too")
    props = _schema()["properties"]
    columns = [k for k in props if any(k in row for _, rows in loaded for row in rows)]
    return [{k: row.get(k, props[k].get("default")) for k in columns} for _, rows in loaded for row in rows]


CACHE_KEPT = 8  # the newest cached catalogues a cache folder keeps


def load_catalogues_cached(paths: str | os.PathLike | list, cache_dir: str | os.PathLike) -> list[dict]:
    """`load_catalogues`, kept in cache_dir for the processes that parse the same workflow again:
    Snakemake runs each member of a SLURM job group as a `snakemake` of its own, which would
    validate every line anew (about 2 s for 10,000 lines). The rows are stored as JSON under a
    key of the bytes of the catalogue files, of the schema and of the package's code (whose
    records check the objectives), so that any change to them validates again."""
    files = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for name in [*files, SCHEMA_PATH, *sorted(package.rglob("*.py"))]:
        digest.update(os.fsencode(str(name)) + b"\0")
        try:
            digest.update(Path(name).read_bytes())
        except OSError:  # a missing catalogue: load_catalogues says so
            return load_catalogues(paths)
    cached = Path(cache_dir) / f"catalogue-{digest.hexdigest()[:32]}.json"
    try:
        return json.loads(cached.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    rows = load_catalogues(paths)
    from .atomic import write_text

    cached.parent.mkdir(parents=True, exist_ok=True)
    write_text(cached, json.dumps(rows))
    for old in sorted(cached.parent.glob("catalogue-*.json"), key=lambda p: p.stat().st_mtime)[:-CACHE_KEPT]:
        old.unlink(missing_ok=True)
    return rows


def write_catalogue(rows: list[dict], path: str | os.PathLike) -> None:
    """Validated rows as TSV (slugs filled in), atomically."""
    from .atomic import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), delimiter="\t", lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: "" if v is None else v for k, v in row.items()})


def to_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as the DataFrame aggregation joins on: text columns stripped, synthetic bool,
    n_params float (NaN where unknown)."""
    import numpy as np
    import pandas as pd

    df = pd.DataFrame(rows)
    df["synthetic"] = df["synthetic"].astype(bool)
    df["n_params"] = pd.to_numeric(df["n_params"], errors="coerce").astype(float).fillna(np.nan)
    for stack in STACKS:
        df[f"objective_{stack}"] = df[f"objective_{stack}"].fillna("")
    if "step" in df:
        df["step"] = pd.array(df["step"], dtype="Int64")
    return df


def read_catalogue(path: str | os.PathLike) -> pd.DataFrame:
    return to_frame(load_catalogue(path))


def check_catalogue(cat: pd.DataFrame, origin: str = "catalogue") -> pd.DataFrame:
    """An in-memory catalogue (e.g. built by tests) through the same checks as a file."""
    header = [str(c) for c in cat.columns]
    cells = [(i + 2, ["" if _missing(v) else str(v) for v in row]) for i, row in enumerate(cat.itertuples(index=False))]
    return to_frame(check_rows(header, cells, origin))


def _missing(value) -> bool:
    import pandas as pd

    return value is None or value is pd.NA or (isinstance(value, float) and value != value)
