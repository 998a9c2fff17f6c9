"""`wqk pin CATALOGUE.tsv [--out PATH]`: replace the `revision` of each hub model in a catalogue
(a branch or tag; empty: main) by the commit sha it names now, so later runs fetch exactly
those weights. Asks the hub's API (HF_ENDPOINT, HF_TOKEN as `wqk fetch` does) once per repo and
revision. Revisions that are commit shas already, and lines that are not hub sources (folders,
pypi:, tiny:), stay as they are; comments, column order and every other cell stay byte for byte.
The file is written atomically, and not at all when a revision cannot be resolved."""

from __future__ import annotations

import csv
import re
import shutil
import sys
from pathlib import Path

_COMMIT = re.compile(r"[0-9a-f]{40}")


def add_arguments(p) -> None:
    p.add_argument("catalogue", type=Path, help="catalogue TSV (config/catalogue/*.tsv)")
    p.add_argument("--out", type=Path, help="write the pinned catalogue here (default: in place)")


def run(args) -> int:
    from ..atomic import atomic_path
    from ..catalogue import CatalogueError, load_catalogue
    from ..checkpoints.hub import resolve_revision
    from ..checkpoints.source import parse_source
    from ..errors import WqkError

    path = Path(args.catalogue)
    origin = f"catalogue {path}"
    rows = load_catalogue(path)  # checked first: every error names its line
    with open(path, newline="", encoding="utf-8") as f:  # the lines as load_catalogue reads them
        lines = list(f)
    content = [n for n, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    header = [c.strip() for c in next(csv.reader([lines[content[0]]], delimiter="\t"))]
    if "revision" not in header:
        raise CatalogueError(f"{origin} has no revision column: add one (e.g. after source) to pin revisions")
    column = header.index("revision")
    resolved: dict[tuple[str, str], str] = {}
    counts = {"pinned": 0, "already": 0, "other": 0}
    for n, row in zip(content[1:], rows, strict=True):
        src = parse_source(row["source"])
        revision = row["revision"] or "main"
        if src.kind != "hub":
            counts["other"] += 1
            continue
        if _COMMIT.fullmatch(revision):
            counts["already"] += 1
            print(f"pin: {row['model_id']}: {src.repo}@{revision} is a commit already", file=sys.stderr)
            continue
        key = (src.repo, revision)
        if key not in resolved:
            try:
                resolved[key] = resolve_revision(src.repo, revision)
            except WqkError as e:
                raise CatalogueError(f"{origin}, line {n + 1} ({row['model_id']}): {e}") from None
        print(f"pin: {row['model_id']}: {src.repo}@{revision} -> {resolved[key]}", file=sys.stderr)
        lines[n] = _with_cell(lines[n], column, len(header), resolved[key], f"{origin}, line {n + 1}")
        counts["pinned"] += 1
    out = Path(args.out or path)
    if out != path or counts["pinned"]:
        with atomic_path(out) as tmp:
            tmp.write_bytes("".join(lines).encode("utf-8"))
            shutil.copymode(path, tmp)
    print(
        f"pin: {counts['pinned']} revision(s) pinned, {counts['already']} pinned already, "
        f"{counts['other']} line(s) not from the hub: {out}",
        file=sys.stderr,
    )
    print(out)
    return 0


def _with_cell(line: str, column: int, width: int, value: str, where: str) -> str:
    """`line` with its cell number `column` replaced by `value`, every other byte kept."""
    from ..catalogue import CatalogueError

    body = line.rstrip("\r\n")
    cells = body.split("\t")
    if len(cells) != width:
        raise CatalogueError(f"{where}: a quoted cell holds a tab; pin this line by hand")
    cells[column] = value
    return "\t".join(cells) + line[len(body) :]
