"""The paper config, shrunk (tests/config/rehearsal.yaml), run twice from scratch against the
stand-in hub on a sample: one catalogue model of every model_type (and Figure 1's two models,
a float16, a sharded bfloat16 and a pytorch_model.bin repo), every training objective, init and
dataset at the mini size. The full rehearsal (all 141 models, both sizes) is
`python tests/rehearse.py` (README.md, "Rehearsing the paper run")."""

from __future__ import annotations

import re
import shutil

import pytest

import rehearse
from standin_hub import build, start
from workflow_runs import explain_differences
from wqk.catalogue import load_catalogue
from wqk.ids import is_commit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    base = tmp_path_factory.mktemp("rehearsal")
    config = rehearse.rehearsal_config()
    models = rehearse.sample_models(config)
    hub_root = build(base / "standin-hub", models)
    hub = start(hub_root, throttle=25, log_unknown=False)
    try:
        runs = [rehearse.run(base / f"run-{i}", hub, hub_root, sample=True, timeout=1800) for i in (1, 2)]
    finally:
        hub.stop()
    yield {"config": config, "models": models, "runs": runs, "hub": hub, "dirs": [base / "run-1", base / "run-2"]}
    shutil.rmtree(base, ignore_errors=True)


def test_sample_covers_every_model_type_and_training_run(rehearsal):
    from standin_hub.paper_repos import SPECS

    assert {s.model_type for s in SPECS} == {
        s.model_type for s in SPECS if s.model_id in rehearsal["models"]
    }  # one model at least of every model_type the paper has
    runs = sorted(p.name for p in (rehearsal["dirs"][0] / "results" / "training" / "runs").iterdir())
    objectives_inits = {tuple(r.split("-")[1:3]) for r in runs}
    assert objectives_inits == {("encoder", "default"), ("decoder", "default"), ("encoder", "symmetric")}
    assert {r.split("-", 3)[3] for r in runs} == set(rehearsal["config"]["training"]["datasets"])


def test_every_figure_and_table_of_the_paper_config(rehearsal):
    outputs = rehearsal["runs"][0]["outputs"]
    figures = {re.sub(r"\.(pdf|png)$", "", k.split("/")[-1]) for k in outputs if k.startswith("figures/")}
    for key in rehearsal["config"]["figures"]:
        assert any(f == key or f.startswith(key + "_") for f in figures), (key, sorted(figures))
    for key in rehearsal["config"]["tables"]:
        for ext in ("csv", "md", "tex", "html"):
            assert f"results/tables/{key}.{ext}" in outputs
    assert "results/validation/paper_comparison.csv" in outputs
    # validation per model and per published layer, with the authors' method beside ours
    import pandas as pd

    cmp = pd.read_csv(rehearsal["dirs"][0] / "results" / "validation" / "paper_comparison.csv")
    assert set(cmp["level"]) == {"model", "layer"}
    assert cmp.loc[cmp["level"] == "model", "authors"].notna().mean() > 0.9
    swept = load_catalogue(rehearse.ROOT / "config" / "catalogue" / "sweeps.tsv")
    assert len(list((rehearsal["dirs"][0] / "results" / "scores_authors").glob("*.parquet"))) == len(
        rehearsal["models"]
    ) + len(swept)


def test_the_swept_model_is_drawn_along_training_from_its_own_branches(rehearsal):
    """Each revision of the sweep (config/catalogue/sweeps.tsv) has the scores of the stand-in's
    branch of that name, scored here directly from its folder; the table lists them in step order."""
    import pandas as pd

    import wqk
    from standin_hub.sweep_repos import PYTHIA

    run = rehearsal["dirs"][0]
    swept = load_catalogue(rehearse.ROOT / "config" / "catalogue" / "sweeps.tsv")
    table = pd.read_csv(run / "results" / "tables" / "sweep_scores.csv")
    assert table["step"].tolist() == sorted(r["step"] for r in swept)
    assert set(table["model"]) == {PYTHIA} and set(table["stack"]) == {"decoder"}
    models = pd.read_parquet(run / "results" / "aggregate_sweeps" / "models.parquet").set_index("model")
    population = pd.read_parquet(run / "results" / "aggregate" / "models.parquet")
    assert not set(models.index) & set(population["model"])  # the sweep is not among the other models
    hub_root = run.parent / "standin-hub"
    for row in swept[:: len(swept) // 3]:
        branch = hub_root / "branches" / "models" / PYTHIA / row["revision"]
        direct = wqk.score(str(branch), progress=False)
        layers = direct[(direct["scope"] == "layer") & (direct["stack"] == "decoder")]
        for metric in ("symmetry", "directionality"):
            assert models.loc[row["model_id"], f"{metric}_median"] == pytest.approx(layers[metric].median(), abs=1e-12)
    for ext in ("pdf", "png"):
        assert (run / "figures" / f"sweep_dynamics.{ext}").stat().st_size > 0


def test_the_release_carries_the_sweep_apart(rehearsal):
    """`snakemake release` after the run: the sweep's aggregate as data/sweep_* byte for byte, the
    population's tables without it, every revision in provenance.csv with the hub commit of its weights
    and its scores hash, every column described, Croissant record sets for the sweep."""
    import csv
    import hashlib
    import subprocess

    import mlcroissant as mlc
    import pandas as pd

    run = rehearsal["dirs"][0]
    cmd = [str(rehearse.BIN / "snakemake"), "release", "--cores", "2", "--configfile", "rehearsal-config.yaml"]
    r = subprocess.run(cmd, cwd=run, env=rehearse.environment(run, rehearsal["hub"]), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-5000:]
    (bundle,) = (run / "release").iterdir()
    for table in ("models", "layers", "heads"):
        released = (bundle / "data" / f"sweep_{table}.parquet").read_bytes()
        assert released == (run / "results" / "aggregate_sweeps" / f"{table}.parquet").read_bytes()
        assert (bundle / "data" / f"{table}.parquet").read_bytes() == (
            run / "results" / "aggregate" / f"{table}.parquet"
        ).read_bytes()
    assert (bundle / "catalogue/catalogue_sweeps.tsv").read_bytes() == (
        run / "results/catalogue_sweeps.tsv"
    ).read_bytes()
    swept = load_catalogue(rehearse.ROOT / "config" / "catalogue" / "sweeps.tsv")
    with open(bundle / "catalogue/provenance.csv", newline="") as f:
        prov = {row["model_id"]: row for row in csv.DictReader(f)}
    assert set(prov) == {r["model_id"] for r in swept} | set(rehearsal["models"])
    for row in swept:  # each revision's own weights and its own scores file
        entry = prov[row["model_id"]]
        scores = run / "results" / "scores" / f"{row['slug']}.parquet"
        assert entry["scores_sha256"] == hashlib.sha256(scores.read_bytes()).hexdigest()
        commit = rehearsal["hub"].repos["models", row["sweep"]].at(row["revision"]).sha  # the stand-in's own
        assert entry["revision"] == row["revision"] and entry["commit"] == commit, entry  # the hub's, not a hash
        assert is_commit(commit) and not entry["weights_xxh3"], entry
    assert len({prov[r["model_id"]]["commit"] for r in swept}) == len(swept)
    card = (bundle / "README.md").read_text()
    for column in pd.read_parquet(bundle / "data/sweep_models.parquet").columns:
        assert re.search(rf"^\| `{re.escape(column)}` \| \S+ \| \S", card, re.M), column
    assert "### sweep_models" in card and "catalogue_sweeps.tsv" in card
    dataset = mlc.Dataset(jsonld=bundle / "croissant.json")
    sets = {rs.name for rs in dataset.metadata.record_sets}
    assert {"sweep_models", "sweep_layers", "sweep_heads"} <= sets
    steps = sorted(int(rec["sweep_models/step"]) for rec in dataset.records("sweep_models"))
    assert steps == sorted(row["step"] for row in swept)


def test_two_rehearsals_from_scratch_are_byte_identical(rehearsal):
    first, second = (r["outputs"] for r in rehearsal["runs"])
    assert len(first) >= 40
    assert first == second, explain_differences(*rehearsal["dirs"])


def test_the_hub_was_throttled_and_the_token_stayed_off_the_cdn(rehearsal):
    hub = rehearsal["hub"]
    assert hub.throttled  # 429s happened, and both runs still finished
    assert hub.cdn.seen and not hub.cdn.leaked
    gated = [s for s in hub.seen if "/resolve/" in s["path"] and s["path"].startswith("/meta-llama/")]
    assert gated and all(s["auth"] for s in gated)
