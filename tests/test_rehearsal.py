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
    assert len(list((rehearsal["dirs"][0] / "results" / "scores_authors").glob("*.parquet"))) == len(
        rehearsal["models"]
    )


def test_two_rehearsals_from_scratch_are_byte_identical(rehearsal):
    first, second = (r["outputs"] for r in rehearsal["runs"])
    assert len(first) >= 40
    assert first == second


def test_the_hub_was_throttled_and_the_token_stayed_off_the_cdn(rehearsal):
    hub = rehearsal["hub"]
    assert hub.throttled  # 429s happened, and both runs still finished
    assert hub.cdn.seen and not hub.cdn.leaked
    gated = [s for s in hub.seen if "/resolve/" in s["path"] and s["path"].startswith("/meta-llama/")]
    assert gated and all(s["auth"] for s in gated)
