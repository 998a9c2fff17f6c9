"""The release: a run's results as a versioned, citable dataset folder, release/<name>-<version>/.

    README.md            a Hugging Face dataset card: YAML `configs` per table, licence, citation,
                         the column dictionary with the sign conventions (release.card)
    croissant.json       Croissant 1.0 metadata of the tables (release.croissant)
    SHA256SUMS           every other file's sha256, as `sha256sum -c` reads it
    data/                models, groups, layers, heads (+ CSV of models and groups) and the null
                         reference of every model (null_reference.parquet), as aggregated; with
                         revision sweeps (wqk.sweeps), sweep_models, sweep_layers, sweep_heads
                         (+ CSV of sweep_models): results/aggregate_sweeps, one row per revision
    catalogue/           the catalogue as run (revisions as pinned), catalogue_sweeps.tsv with
                         sweeps, and provenance.csv: per model (and swept revision) its hub commit
                         or weights hash and the sha256 of its scores file
    validation/, tables/, figures/   the comparison with the paper and the errata, every table and figure
    matrices/            Q_h, K_h of the models whose catalogue `licence` allows redistribution only
    run/                 the config used, requirements.lock, the wqk version

Files are copied byte for byte where they exist (the aggregates, figures, tables); what is made
here is made from them alone (no time stamps), so a rerun writes the same bytes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..catalogue import load_catalogue
from ..errors import WqkError
from ..ids import is_commit
from .files import NULL_TABLE, SWEEP_CSV_TABLES, SWEEP_TABLES, aggregate_files

# Licences (the hub's identifiers) under which a model's weights, and so its Q_h and K_h, may be
# passed on. Anything else, and a row that names none, keeps the model's matrices out.
REDISTRIBUTABLE = frozenset(
    {"apache-2.0", "mit", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0", "unlicense"}
)
SUMS = "SHA256SUMS"
MARKERS = (SUMS, "croissant.json")


@dataclass
class Inputs:
    """What a release is made of (the paths of a finished run)."""

    aggregate_dir: Path
    catalogue: Path
    scores_dir: Path
    config: Path
    lock: Path
    citation: Path
    null_dir: Path | None = None
    matrices_dir: Path | None = None
    validation: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    sweeps_dir: Path | None = None  # results/aggregate_sweeps, with sweeps_catalogue
    sweeps_catalogue: Path | None = None

    def __post_init__(self):
        if (self.sweeps_dir is None) != (self.sweeps_catalogue is None):
            raise WqkError("a release with revision sweeps needs both their aggregate folder and their catalogue")


def write_config(config, out: str | Path, log: str | Path) -> None:
    """A run's config (Snakemake's, schema defaults filled in) as the YAML the release carries,
    and one line saying so in `log` (rule release_config)."""
    import json

    import yaml

    text = yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=True)  # through JSON: plain dicts
    Path(out).write_text(text, encoding="utf-8")
    Path(log).write_text(f"the config of {config.get('catalogue', '?')}: {len(text.splitlines())} lines\n")


def redistributable(licence: str | None) -> bool:
    return (licence or "").strip().lower() in REDISTRIBUTABLE


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _csv(rows: list[dict], columns: list[str]) -> bytes:
    out = io.StringIO()
    w = csv.DictWriter(out, columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue().encode()


def null_table(null_dir: Path, slugs: list[str]) -> bytes | None:
    """Every model's null reference rows in one Parquet (catalogue order), or None without any;
    written as wqk.aggregate writes its tables."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    frames = [pd.read_parquet(p) for s in slugs if (p := null_dir / f"{s}.parquet").is_file()]
    if not frames:
        return None
    sink = pa.BufferOutputStream()
    pq.write_table(
        pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False), sink, compression="zstd"
    )
    return sink.getvalue().to_pybytes()


def provenance(rows: list[dict], inputs: Inputs) -> tuple[list[dict], dict[str, Path]]:
    """Per model: where its weights came from and what its released files hash to; and the
    matrices files its licence lets the release carry (bundle path -> file)."""
    import pyarrow.parquet as pq

    out, matrices = [], {}
    for row in rows:
        scores = inputs.scores_dir / f"{row['slug']}.parquet"
        if not scores.is_file():
            raise WqkError(f"scores file {scores} not found: run the workflow to the end before the release")
        first = pq.read_table(scores, columns=["provenance", "model_type"]).slice(0, 1).to_pylist()
        prov = first[0]["provenance"] if first else ""
        licence = row.get("licence", "") or ""
        entry = {
            "model_id": row["model_id"],
            "slug": row["slug"],
            "source": row["source"],
            "revision": row["revision"],
            "pinned": is_commit(row["revision"]),
            "model_type": first[0]["model_type"] if first else "",
            "commit": prov if is_commit(prov) else "",
            "weights_xxh3": prov.removeprefix("xxh3:") if prov.startswith("xxh3:") else "",
            "scores_sha256": sha256(scores),
            "licence": licence,
            "matrices": "",
            "matrices_sha256": "",
        }
        source = inputs.matrices_dir / f"{row['slug']}.parquet" if inputs.matrices_dir else None
        if redistributable(licence) and source is not None and source.is_file():
            entry["matrices"] = f"matrices/{row['slug']}.parquet"
            entry["matrices_sha256"] = sha256(source)
            matrices[entry["matrices"]] = source
        out.append(entry)
    return out, matrices


def files(inputs: Inputs, name: str, version: str) -> dict[str, bytes | Path]:
    """Every file of the bundle but the card, the Croissant file and the sums: path -> bytes or
    the file to copy."""
    agg = inputs.aggregate_dir
    out: dict[str, bytes | Path] = {}
    for name in aggregate_files():
        out[f"data/{name}"] = agg / name
    rows = load_catalogue(inputs.catalogue)
    if inputs.null_dir is not None and (null := null_table(inputs.null_dir, [r["slug"] for r in rows])) is not None:
        out[f"data/{NULL_TABLE}.parquet"] = null
    out["catalogue/catalogue.tsv"] = inputs.catalogue
    if inputs.sweeps_dir is not None:
        for name in aggregate_files(SWEEP_TABLES, SWEEP_CSV_TABLES):
            out[f"data/sweep_{name}"] = inputs.sweeps_dir / name
        out["catalogue/catalogue_sweeps.tsv"] = inputs.sweeps_catalogue
        rows = rows + load_catalogue(inputs.sweeps_catalogue)  # each revision's provenance too
    prov, matrices = provenance(rows, inputs)
    out["catalogue/provenance.csv"] = _csv(prov, list(prov[0]))
    out |= matrices
    for folder, paths in (("validation", inputs.validation), ("tables", inputs.tables), ("figures", inputs.figures)):
        for path in paths:
            out[f"{folder}/{Path(path).name}"] = Path(path)
    out["run/config.yaml"] = inputs.config
    out["run/requirements.lock"] = inputs.lock
    out["run/wqk-version.txt"] = f"wqk {version}\n".encode()
    missing = sorted(str(p) for p in out.values() if isinstance(p, Path) and not p.is_file())
    if missing:
        raise WqkError(f"the release of {name} lacks input file(s) {missing}: run the workflow to the end first")
    return dict(sorted(out.items()))


def digest(content: bytes | Path) -> str:
    return sha256(content) if isinstance(content, Path) else hashlib.sha256(content).hexdigest()


def build(inputs: Inputs, name: str, version: str) -> dict[str, bytes | Path]:
    """The whole bundle: path -> bytes or the file to copy, SHA256SUMS last."""
    from . import card, croissant

    out = files(inputs, name, version)
    sums = {path: digest(content) for path, content in out.items()}
    tables = card.tables(out)
    cite = card.citation(inputs.citation, version)
    out["README.md"] = card.render(name, version, tables, cite, out).encode()
    out["croissant.json"] = croissant.render(name, version, tables, cite, sums).encode()
    for path in ("README.md", "croissant.json"):
        sums[path] = digest(out[path])
    out[SUMS] = "".join(f"{sums[p]}  {p}\n" for p in sorted(sums)).encode()
    return out


def write(bundle: dict[str, bytes | Path], out_dir: str | Path) -> list[Path]:
    """The bundle in out_dir, each file atomically; files of an earlier release there that
    this one does not hold are removed. A folder that is not empty and holds neither
    SHA256SUMS nor croissant.json is refused: it is not a release (Snakemake removes the
    SHA256SUMS of the release it reruns)."""
    from ..atomic import atomic_path

    out_dir = Path(out_dir)
    if out_dir.is_dir() and any(out_dir.iterdir()) and not any((out_dir / f).is_file() for f in MARKERS):
        raise WqkError(
            f"{out_dir} is not empty and is no release (no {' or '.join(MARKERS)}): give an empty or new folder"
        )
    keep = {out_dir / p for p in bundle}
    for old in sorted(p for p in out_dir.rglob("*") if p.is_file()) if out_dir.is_dir() else []:
        if old not in keep:
            old.unlink()
    written = []
    for rel, content in bundle.items():
        with atomic_path(out_dir / rel) as tmp:
            if isinstance(content, Path):
                shutil.copyfile(content, tmp)
            else:
                tmp.write_bytes(content)
        written.append(out_dir / rel)
    for folder in sorted((p for p in out_dir.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return written
