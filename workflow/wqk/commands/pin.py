"""`wqk pin CATALOGUE.tsv [--out PATH]`: replace the `revision` of each hub model in a catalogue
(a branch or tag; empty: main) by the commit sha it names now, so later runs fetch exactly
those weights; and write each `revisions` cell (a revision sweep, wqk.sweeps) as the list of
NAME@COMMIT it stands for: a pattern such as `step{N}~8` sampled from the repo's branches, a
listed name pinned to its commit. Asks the hub's API (HF_ENDPOINT, HF_TOKEN as `wqk fetch` does)
once per repo and revision (once per repo for its branches). Revisions that are commit shas
already, and lines that are not hub sources (folders, pypi:, tiny:), stay as they are;
comments, column order and every other cell stay byte for byte. The file is written
atomically, and not at all when a revision cannot be resolved."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

from ..ids import is_commit


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
    load_catalogue(path, sweep_patterns=True)  # checked first: every error names its line
    with open(path, newline="", encoding="utf-8") as f:  # the lines as load_catalogue reads them
        lines = list(f)
    content = [n for n, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    header = [c.strip() for c in next(csv.reader([lines[content[0]]], delimiter="\t"))]
    if "revision" not in header and "revisions" not in header:
        raise CatalogueError(f"{origin} has no revision column: add one (e.g. after source) to pin revisions")
    resolved: dict[tuple[str, str], str] = {}
    refs: dict[str, dict[str, str]] = {}
    counts = {"pinned": 0, "already": 0, "other": 0, "swept": 0}
    for n in content[1:]:
        where = f"{origin}, line {n + 1}"
        cells = dict(zip(header, _cells(lines[n], len(header), where)))
        src = parse_source(cells["source"].strip())
        if src.kind != "hub":
            counts["other"] += 1
            continue
        if cells.get("revisions", "").strip():
            try:
                revisions = _pinned_sweep(cells["revisions"], src.repo, refs)
            except WqkError as e:
                raise CatalogueError(f"{where} ({cells['model_id'].strip()}): {e}") from None
            print(
                f"pin: {cells['model_id'].strip()}: {revisions.count(',') + 1} revisions: {revisions}", file=sys.stderr
            )
            lines[n] = _with_cell(lines[n], header.index("revisions"), len(header), revisions, where)
            counts["swept"] += 1
            continue
        revision = cells.get("revision", "").strip() or "main"
        if "revision" not in header:
            counts["other"] += 1
            continue
        if is_commit(revision):
            counts["already"] += 1
            print(f"pin: {cells['model_id'].strip()}: {src.repo}@{revision} is a commit already", file=sys.stderr)
            continue
        key = (src.repo, revision)
        if key not in resolved:
            try:
                resolved[key] = resolve_revision(src.repo, revision)
            except WqkError as e:
                raise CatalogueError(f"{where} ({cells['model_id'].strip()}): {e}") from None
        print(f"pin: {cells['model_id'].strip()}: {src.repo}@{revision} -> {resolved[key]}", file=sys.stderr)
        lines[n] = _with_cell(lines[n], header.index("revision"), len(header), resolved[key], where)
        counts["pinned"] += 1
    out = Path(args.out or path)
    if out != path or counts["pinned"] or counts["swept"]:
        with atomic_path(out) as tmp:
            tmp.write_bytes("".join(lines).encode("utf-8"))
            shutil.copymode(path, tmp)
            load_catalogue(tmp)  # what it wrote loads, sweeps expanded (else the file stays as it was)
    print(
        f"pin: {counts['pinned']} revision(s) pinned, {counts['already']} pinned already, "
        f"{counts['swept']} sweep(s) pinned, {counts['other']} line(s) not from the hub: {out}",
        file=sys.stderr,
    )
    print(out)
    return 0


def _pinned_sweep(cell: str, repo: str, refs: dict[str, dict[str, str]]) -> str:
    """A `revisions` cell as the NAME@COMMIT list it stands for now (the repo's refs asked once)."""
    from ..checkpoints.hub import repo_refs
    from ..sweeps import format_cell, parse, pin

    revisions = parse(cell)
    if isinstance(revisions, list) and all(r.commit for r in revisions):
        return format_cell(revisions)  # pinned already: no request
    if repo not in refs:
        refs[repo] = repo_refs(repo)
    return pin(cell, refs[repo], repo)


def _cells(line: str, width: int, where: str) -> list[str]:
    from ..catalogue import CatalogueError

    cells = line.rstrip("\r\n").split("\t")
    if len(cells) != width:
        raise CatalogueError(f"{where}: a quoted cell holds a tab; pin this line by hand")
    return cells


def _with_cell(line: str, column: int, width: int, value: str, where: str) -> str:
    """`line` with its cell number `column` replaced by `value`, every other byte kept."""
    body = line.rstrip("\r\n")
    cells = _cells(line, width, where)
    cells[column] = value
    return "\t".join(cells) + line[len(body) :]
