"""The release (wqk.release, `snakemake release`) and the explorer of a finished run.

The end-to-end tests read the session's run of the test config (tests/conftest.py: validation
on, for the paper comparison and the errata; its catalogue's `licence` column lets one model's
matrices be passed on, the others' are unknown): in a copy of it, `snakemake release`; then the
bundle is checked as a reader of the dataset would check it, and the explorer is opened in
headless Chromium."""

from __future__ import annotations

import csv
import hashlib
import itertools
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from workflow_runs import ROOT, TIMEOUT, snakemake
from wqk.catalogue import load_catalogue
from wqk.errors import WqkError
from wqk.release import REDISTRIBUTABLE, Inputs, card, columns, redistributable

LICENSED = "sentence-transformers/all-MiniLM-L6-v2"  # Apache-2.0 on the hub
SHOTS = Path("/tmp/explorer_shots")


# ---------------------------------------------------------------- units


def test_only_known_redistributable_licences_let_matrices_in():
    assert redistributable("apache-2.0") and redistributable("MIT") and redistributable(" cc-by-4.0 ")
    for licence in ("", None, "llama3", "other", "cc-by-nc-4.0", "openrail"):
        assert not redistributable(licence), licence
    assert all(lic == lic.lower() for lic in REDISTRIBUTABLE)


def test_column_dictionary_says_which_m_and_the_signs():
    assert "negative when columns (keys) dominate" in columns.describe("directionality", "heads")
    assert "-1 skew-symmetric" in columns.describe("symmetry", "layers")
    assert "layer's M = Q K^T" in columns.describe("symmetry", "layers")
    assert "head's M_h" in columns.describe("directionality", "heads")
    text = columns.describe("null_head_stable_rank_q75", "models")
    assert (
        text.startswith("third quartile (numpy, linear) over the heads of the stack's null reference")
        and "stable rank" in text
    )
    assert columns.describe("symmetry_median", "models").startswith("median over the layers of the stack")
    assert "per-model medians" in columns.describe("directionality_q25", "groups")
    assert "s(16)" in columns.describe("head_rotary_symmetry_d16_median", "models")
    assert columns.describe("no_such_column") == ""
    # the sweeps' tables (data/sweep_*) are described as the tables whose columns they have
    assert "head's M_h" in columns.describe("directionality", "sweep_heads")
    assert "layer's M = Q K^T" in columns.describe("symmetry", "sweep_layers")
    assert "training step" in columns.describe("step", "sweep_models")
    # the follow-up papers' columns, with their definitions (wqk.metric_docs)
    assert "over M's eigenvalues" in columns.describe("head_D_head_median", "models")
    assert "a list per head" in columns.describe("sv2", "heads")


def test_a_list_column_is_a_repeated_field_of_its_items_type():
    from wqk.release.card import Table
    from wqk.release.croissant import _record_set

    table = Table("heads", "data/heads.parquet", (("sv2", "list<element: double>"), ("D_head", "double")), 3)
    sv2, d_head = _record_set(table)["field"]
    assert (sv2["dataType"], sv2["repeated"]) == ("sc:Float", True)
    assert d_head["dataType"] == "sc:Float" and "repeated" not in d_head


def test_a_release_with_sweeps_takes_their_aggregate_and_their_catalogue_together(tmp_path):
    paths = {k: tmp_path / k for k in ("aggregate_dir", "catalogue", "scores_dir", "config", "lock", "citation")}
    for half in ({"sweeps_dir": tmp_path}, {"sweeps_catalogue": tmp_path / "catalogue_sweeps.tsv"}):
        with pytest.raises(WqkError, match="needs both"):
            Inputs(**paths, **half)
    assert Inputs(**paths, sweeps_dir=tmp_path, sweeps_catalogue=tmp_path / "c.tsv").sweeps_dir == tmp_path


def test_catalogue_licence_column_is_optional(tmp_path):
    licensed = ROOT / "tests/config/catalogue.tsv"
    plain = load_catalogue(without_column(licensed, tmp_path / "plain.tsv", "licence"))
    assert plain and all("licence" not in row for row in plain)  # written back without it, as before
    rows = {row["model_id"]: row for row in load_catalogue(licensed)}
    assert rows[LICENSED]["licence"] == "apache-2.0"
    assert {row["licence"] for mid, row in rows.items() if mid != LICENSED} == {""}
    bad = tmp_path / "bad.tsv"
    bad.write_text(licensed.read_text().replace("apache-2.0", "apache 2.0"))
    with pytest.raises(Exception, match=r"line \d+, column 'licence'"):
        load_catalogue(bad)


def test_citation_of_the_paper_and_the_software():
    cite = card.citation(ROOT / "CITATION.cff", "0.1.0")
    assert "2502.10927" in cite.paper_bibtex and "Saponati, Matteo and Sager, Pascal" in cite.paper_bibtex
    assert cite.paper_bibtex.startswith("@article{saponati2025,") and cite.paper_bibtex.endswith("}")
    assert "version = {0.1.0}" in cite.software_bibtex and "license = {MIT}" in cite.software_bibtex


# ---------------------------------------------------------------- a finished run


def without_column(source: Path, dest: Path, column: str) -> Path:
    """A catalogue (TSV) without one of its columns."""
    rows = [line.split("\t") for line in source.read_text().splitlines() if line and not line.startswith("#")]
    drop = rows[0].index(column)
    dest.write_text("".join("\t".join(r[:drop] + r[drop + 1 :]) + "\n" for r in rows))
    return dest


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def run(test_run, tmp_path_factory) -> dict:
    """A copy of the session's test run, then `snakemake release` in it."""
    wd = tmp_path_factory.mktemp("release") / "run"
    shutil.copytree(test_run.wd, wd, symlinks=True)
    args = ("--cores", "2", "--configfile", test_run.configfile)
    r = snakemake(wd, *args[:2], "release", *args[2:], timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr[-5000:]
    (bundle,) = (wd / "release").iterdir()
    return dict(wd=wd, bundle=bundle, args=args)


@pytest.mark.slow
def test_release_bundle_is_a_dataset_with_card_croissant_and_checksums(run):
    wd, bundle = run["wd"], run["bundle"]
    assert bundle.name == "wqk-catalogue-0.1.0"  # the catalogue's name, the wqk version
    # every file is in SHA256SUMS with its hash, and SHA256SUMS lists nothing else
    sums = dict(reversed(line.split("  ", 1)) for line in (bundle / "SHA256SUMS").read_text().splitlines())
    files = digests(bundle)
    assert set(sums) == set(files) - {"SHA256SUMS"}
    assert all(files[path] == digest for path, digest in sums.items())
    if shutil.which("sha256sum"):
        import subprocess

        check = subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=bundle, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    # the card: YAML front matter a dataset hub reads, a config per table, the licence
    text = (bundle / "README.md").read_text()
    front = yaml.safe_load(re.match(r"---\n(.*?)\n---\n", text, re.S).group(1))
    assert front["license"] == "cc-by-4.0"
    configs = {c["config_name"]: c["data_files"][0]["path"] for c in front["configs"]}
    assert set(configs) == {"models", "groups", "layers", "heads", "null_reference", "provenance"}
    for path in configs.values():
        assert (bundle / path).is_file(), path
    assert [c["config_name"] for c in front["configs"] if c.get("default")] == ["models"]
    for table in ("models", "groups", "layers", "heads"):  # the aggregates byte for byte
        assert (bundle / "data" / f"{table}.parquet").read_bytes() == (
            wd / f"results/aggregate/{table}.parquet"
        ).read_bytes()
    heads = pd.read_parquet(bundle / "data/heads.parquet")
    for column in heads.columns:  # the column dictionary names every column of every table
        assert re.search(rf"^\| `{re.escape(column)}` \| \S+ \| \S", text, re.M), column
    assert "negative when columns (keys) dominate" in text and "@article{saponati2025" in text
    assert "@software{wqk010" in text
    # the paper comparison, the errata, figures, the config, the lock, the version
    assert (bundle / "validation/paper_comparison.csv").is_file()
    assert {"tables/errata.csv", "tables/paper_comparison.csv"} <= set(files)
    assert {p.name for p in (bundle / "figures").iterdir()} == {p.name for p in (wd / "figures").iterdir()}
    assert yaml.safe_load((bundle / "run/config.yaml").read_text())["activate"]["validation"] is True
    assert (bundle / "run/requirements.lock").read_bytes() == (ROOT / "requirements.lock").read_bytes()
    assert (bundle / "run/wqk-version.txt").read_text() == "wqk 0.1.0\n"
    # provenance: one row per model, the scores' hashes; matrices only under a licence that allows it
    with open(bundle / "catalogue/provenance.csv", newline="") as f:
        prov = {row["model_id"]: row for row in csv.DictReader(f)}
    catalogue = load_catalogue(wd / "tests/config/catalogue.tsv")
    assert set(prov) == {row["model_id"] for row in catalogue}
    for row in catalogue:
        entry = prov[row["model_id"]]
        scores = wd / "results/scores" / f"{row['slug']}.parquet"
        assert entry["scores_sha256"] == hashlib.sha256(scores.read_bytes()).hexdigest()
        assert entry["commit"] or entry["weights_xxh3"], entry  # where the weights came from
    assert sorted(p.name for p in (bundle / "matrices").iterdir()) == [
        "sentence-transformers--all-minilm-l6-v2.parquet"
    ]
    assert prov[LICENSED]["matrices"] == "matrices/sentence-transformers--all-minilm-l6-v2.parquet"
    null = pd.read_parquet(bundle / "data/null_reference.parquet")
    assert set(null["model"]) == {f"{row['model_id']} (null)" for row in catalogue}


@pytest.mark.slow
def test_release_croissant_loads_with_mlcroissant(run):
    import mlcroissant as mlc

    bundle = run["bundle"]
    dataset = mlc.Dataset(jsonld=bundle / "croissant.json")
    sets = {rs.name: rs for rs in dataset.metadata.record_sets}
    assert set(sets) == {"models", "groups", "layers", "heads", "null_reference", "provenance"}
    models = pd.read_parquet(bundle / "data/models.parquet")
    records = list(dataset.records("models"))
    assert len(records) == len(models)
    first = records[0]
    assert first["models/model"].decode() == models["model"].iloc[0]
    assert first["models/symmetry_median"] == pytest.approx(models["symmetry_median"].iloc[0])
    heads = list(itertools.islice(dataset.records("heads"), 3))
    assert len(heads) == 3 and "heads/directionality" in heads[0]


@pytest.mark.slow
def test_release_and_explorer_rerun_to_the_same_bytes(run):
    wd, bundle = run["wd"], run["bundle"]
    before = digests(bundle), digests(wd / "results/explorer")
    r = snakemake(wd, *run["args"][:2], "release", "all", "--forcerun", "release", "explorer", *run["args"][2:])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "release" in r.stdout + r.stderr and "explorer" in r.stdout + r.stderr
    assert (digests(bundle), digests(wd / "results/explorer")) == before


@pytest.mark.slow
def test_the_runs_explorer_in_chromium_shows_heads_parquets_values(run, tmp_path, chromium):
    """The explorer of the finished run: pick a model, a layer and a head; the values shown
    are heads.parquet's; no request leaves the page's folder; no JavaScript error."""
    from explorer_browser import Explorer

    wd = run["wd"]
    heads = pd.read_parquet(wd / "results/aggregate/heads.parquet")
    picks = [("openai--whisper-tiny.en", "decoder", 1, 2), ("sentence-transformers--all-minilm-l6-v2", "encoder", 3, 5)]
    with Explorer(wd / "results/explorer/index.html", tmp_path / "shots", chromium) as page:
        page.open()
        page.screenshot("opened")
        for slug, stack, layer, head in picks:
            page.pick(slug, stack, layer, head)
            row = heads[
                (heads["slug"] == slug)
                & (heads["stack"] == stack)
                & (heads["layer"] == layer)
                & (heads["head"] == head)
            ]
            (row,) = row.itertuples(index=False)
            shown = page.values()
            assert shown["symmetry"]["head"] == f"{row.symmetry:.4f}"
            assert shown["directionality"]["head"] == f"{row.directionality:.4f}"
            assert shown["stable_rank"]["head"] == f"{row.stable_rank:.2f}"
            assert shown["symmetry"]["null"] != "\u2013"  # the run's null reference is beside it
            page.screenshot(f"{slug}-{stack}-{layer}-{head}")
        page.collect_logs()
    page.copy_screenshots(SHOTS / "test-run")
    assert not page.errors(), page.errors()
    assert page.requests and all(u.startswith("file://") for u in page.requests), page.requests
