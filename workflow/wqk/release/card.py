"""README.md of a release: a Hugging Face dataset card (YAML front matter with one `configs`
entry per table, the licence; then what the data are, the sign conventions, the column
dictionary, the files and the citation of the paper and of the software)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import yaml

from .columns import M, describe
from .files import NULL_TABLE, SWEEP_TABLES, TABLES

ROWS = {
    "models": "one model and stack: medians and quartiles over its layers (the paper's) and over its heads",
    "groups": "one objective x modality x stack (x synthetic): statistics over its models",
    "layers": "one layer of one stack: the scores of the layer form M = sum_h M_h = Q K^T (all heads side by side)",
    "heads": "one head of one layer: the scores of that head's M_h = Q_h K_h^T",
    "null_reference": "one layer or head (column `scope`) of a model's null reference: random Gaussian Q, K of its shapes",
    "sweep_models": "one revision (column `step`) of a model published along its training, and stack: as in models",
    "sweep_layers": "one layer of one stack of one revision of a swept model: as in layers",
    "sweep_heads": "one head of one layer of one revision of a swept model: as in heads",
    "provenance": "one model: where its weights came from, what its scores file hashes to",
}
DEFAULT = "models"
LICENCE = "cc-by-4.0"


@dataclass(frozen=True)
class Table:
    name: str
    path: str  # in the bundle
    columns: tuple[tuple[str, str], ...]  # (name, Arrow type)
    n_rows: int
    csv: str = ""  # its CSV copy in the bundle, if any


@dataclass(frozen=True)
class Citation:
    paper_title: str
    paper_bibtex: str
    software_title: str
    software_bibtex: str


def _arrow_schema(content: bytes | Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pa.BufferReader(content) if isinstance(content, bytes) else str(content)
    f = pq.ParquetFile(source)
    return f.schema_arrow, f.metadata.num_rows


def tables(bundle: dict) -> list[Table]:
    """The released tables, in card order: the Parquet ones of data/, then provenance.csv."""
    import pandas as pd

    out = []
    for name in (*TABLES, NULL_TABLE, *(f"sweep_{t}" for t in SWEEP_TABLES)):
        path = f"data/{name}.parquet"
        if path not in bundle:
            continue
        schema, n = _arrow_schema(bundle[path])
        csv = f"data/{name}.csv" if f"data/{name}.csv" in bundle else ""
        out.append(Table(name, path, tuple((f.name, str(f.type)) for f in schema), n, csv))
    prov = pd.read_csv(io.BytesIO(bundle["catalogue/provenance.csv"]), dtype=str, keep_default_na=False)
    types = {"pinned": "bool"}
    columns = tuple((c, types.get(c, "string")) for c in prov.columns)
    out.append(Table("provenance", "catalogue/provenance.csv", columns, len(prov)))
    return out


def _bibtex(kind: str, key: str, fields: dict[str, str]) -> str:
    body = "".join(f"  {k} = {{{v}}},\n" for k, v in fields.items() if v)
    return f"@{kind}{{{key},\n{body}}}"


def citation(cff: Path, version: str) -> Citation:
    """The paper and the software, as CITATION.cff names them."""
    meta = yaml.safe_load(Path(cff).read_text(encoding="utf-8"))
    (paper,) = [r for r in meta.get("references", []) if "2502.10927" in str(r.get("doi", ""))]
    authors = " and ".join(f"{a['family-names']}, {a['given-names']}" for a in paper["authors"])
    title = " ".join(str(paper["title"]).split())
    paper_bib = _bibtex(
        "article",
        f"{paper['authors'][0]['family-names'].lower().replace(' ', '')}{paper['year']}",
        {
            "title": title,
            "author": authors,
            "year": str(paper["year"]),
            "journal": "arXiv preprint arXiv:2502.10927",
            "doi": paper["doi"],
            "url": paper.get("url", ""),
        },
    )
    names = " and ".join(a.get("name") or f"{a['family-names']}, {a['given-names']}" for a in meta["authors"])
    software_bib = _bibtex(
        "software",
        f"wqk{version.replace('.', '')}",
        {"title": meta["title"], "author": f"{{{names}}}", "version": version, "license": meta.get("license", "")},
    )
    return Citation(title, paper_bib, meta["title"], software_bib)


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def front_matter(name: str, tables_: list[Table]) -> dict:
    configs = []
    for t in tables_:
        entry = {"config_name": t.name, "data_files": [{"split": "train", "path": t.path}]}
        if t.name == DEFAULT:
            entry["default"] = True
        configs.append(entry)
    heads = next((t.n_rows for t in tables_ if t.name == "heads"), 0)
    return {
        "license": LICENCE,
        "pretty_name": f"{name}: symmetry and directionality of attention bilinear forms",
        "tags": ["attention", "transformers", "interpretability", "self-attention", "symmetry"],
        "size_categories": [size_category(heads)],
        "configs": configs,
    }


def _table(rows: list[list[str]]) -> str:
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def render(name: str, version: str, tables_: list[Table], cite: Citation, bundle: dict) -> str:
    yaml_text = yaml.safe_dump(front_matter(name, tables_), sort_keys=False, allow_unicode=False, width=1000)
    models = next(t for t in tables_ if t.name == "provenance").n_rows
    matrices = sorted(p for p in bundle if p.startswith("matrices/"))
    figures = sorted(p for p in bundle if p.startswith("figures/"))
    other = sorted(p for p in bundle if p.startswith(("tables/", "validation/")))
    parts = [
        f"---\n{yaml_text}---\n",
        f"# {name}: symmetry and directionality of attention bilinear forms\n",
        f"Scores of the bilinear forms of the attention heads of {models} models, computed from their weights "
        f"by wqk {version}, which recomputes every figure and table of *{cite.paper_title}* (arXiv:2502.10927) "
        "and extends them (per-head statistics, spectra, rotary-aware symmetry, a null reference). "
        "Models marked `synthetic` are tiny random models or null references: never data.\n",
        "## Which M, and the signs\n",
        f"For one head h, {M.replace('M = Q K^T', 'M_h = Q_h K_h^T')}: the logit from token i to token j is "
        "x_i^T M_h x_j / sqrt(k), rows index the query side, columns the key side. The tables of layers "
        "(and the paper's statistics) use the layer form M = sum_h M_h = Q K^T, all heads side by side "
        "(with grouped-query attention each key head repeated for its query heads).\n",
        "- **symmetry** s(M) = <M, M^T>_F / <M, M>_F in [-1, 1]: 1 symmetric, about 0 for random Q and K, "
        "-1 skew-symmetric. The paper's code stores s_raw = ||(M + M^T)/2||^2 / ||M||^2 and plots 2 s_raw - 1: "
        "this column is the plotted value.\n"
        "- **directionality** D(M) = (E_r - E_c) / (E_r + E_c) in [-1, 1] (0 when E_r + E_c = 0), with E_r "
        "(E_c) the excess over mean + 2 std of the row (column) norms of M: positive when a few rows "
        "(queries) dominate, **negative when columns (keys) dominate**, the signature of autoregressive "
        "models. The paper's code stores D_raw = (E_c - E_r) / (E_r + E_c) and plots -D_raw: this column "
        "is the plotted value.\n"
        "- Biases and the 1/sqrt(k) scale are left out (the scores are scale-free); rotary embeddings too, "
        "except in `rotary_symmetry_d*`.\n",
        "## Tables\n",
        _table(
            [["config", "file", "rows", "one row is"]]
            + [
                [t.name, f"`{t.path}`" + (f" (and `{t.csv}`)" if t.csv else ""), str(t.n_rows), ROWS[t.name]]
                for t in tables_
            ]
        )
        + "\n",
        "## Column dictionary\n",
    ]
    for t in tables_:
        rows = [["column", "type", "meaning"]] + [[f"`{c}`", kind, describe(c, t.name)] for c, kind in t.columns]
        parts.append(f"### {t.name}\n\n{_table(rows)}\n")
    parts += [
        "## Files\n",
        "- `data/`: the tables above, as Parquet (CSV copies of the small ones).\n"
        "- `catalogue/catalogue.tsv`: the models as run, with their hub revisions as pinned (`revision`); "
        "`catalogue/provenance.csv`: per model the hub commit of its weights (`commit`) or a hash of its weight "
        "files (`weights_xxh3`), and the sha256 of its scores file.\n"
        + (
            "- `data/sweep_*`, `catalogue/catalogue_sweeps.tsv`: models published along their training, each "
            "revision scored on its own (`model` is `<id>@<revision>`, `sweep` the model, `step` its training "
            "step); kept apart from the other tables, whose population they are not part of.\n"
            if "catalogue/catalogue_sweeps.tsv" in bundle
            else ""
        )
        + f"- `figures/`: {len(figures)} files (PDF and PNG of each figure); `tables/` and `validation/`: "
        f"{len(other)} files (each table as CSV, Markdown and LaTeX; the comparison with the paper and its errata "
        "where the run made them).\n"
        + (
            f"- `matrices/`: Q_h and K_h of {len(matrices)} model(s) whose licence allows redistribution.\n"
            if matrices
            else "- No `matrices/`: no model's catalogue `licence` allows passing its weights on (unknown counts as not).\n"
        )
        + "- `run/`: the config the run used, `requirements.lock` (pinned, hashed Python packages) and the wqk version.\n"
        "- `croissant.json`: Croissant 1.0 metadata; `SHA256SUMS`: check every file with `sha256sum -c SHA256SUMS`.\n",
        "## Licence\n",
        "The data (scores, tables, figures) are released under CC-BY-4.0. The software that made them, wqk, is "
        "MIT-licensed. The models' weights keep their own licences: their Q_h and K_h are only included where "
        "the catalogue names a licence that allows it.\n",
        "## Citation\n",
        f"Cite the paper and the software:\n\n```bibtex\n{cite.paper_bibtex}\n\n{cite.software_bibtex}\n```\n",
    ]
    return "\n".join(parts)
