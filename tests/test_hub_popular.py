"""Every row of config/catalogue/hub_popular.tsv scored end to end from its real hub id: the
stand-in hub (tests/standin_hub/popular_repos.py) serves each one as the tiny random model of
its row's model_type record, and `wqk score <source>` (the CLI's main, in this process) must
find the stacks and objectives the row declares, finite scores, and the QK-norm marking.

Rows are read when the tests are collected: a row appended to the TSV is covered with no edit.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from safetensors import safe_open

from standin_hub import point_at, popular_repos, start
from standin_hub.popular_repos import build_popular, is_gated, popular_rows
from wqk.aggregate import annotate
from wqk.catalogue import CatalogueError, load_catalogue, to_frame
from wqk.cli import main

ROWS = popular_rows()
SELF_STACKS = ("encoder", "decoder")
QK_NORM_TYPES = {"qwen3", "olmo2", "gemma3_text", "qwen3_moe"}  # every layer normalises q and k per head
# a weightless QK-norm (no tensor) in the layers a per-layer list of the text config marks
PER_LAYER_QK_NORM = {"llama4": "no_rope_layers"}
UNIT_QK_NORM = {"swin2sr"}  # q and k normalised per head in every layer, with no gain (cosine attention)
REFUSED = {"deepseek-ai/DeepSeek-V3": "deepseek_v3"}  # multi-head latent attention: wqk refuses it


@pytest.fixture(scope="session")
def popular_hub(tmp_path_factory):
    root = build_popular(tmp_path_factory.mktemp("popular_hub"), ROWS, REFUSED)
    hub = start(root, log_unknown=False)
    yield hub
    hub.stop()


@pytest.fixture
def against_stand_in(popular_hub, tmp_path, monkeypatch):
    """`wqk` talks to the stand-in, with its token, into this test's caches."""
    return point_at(popular_hub, monkeypatch, tmp_path)


def _has_query_norm(repo) -> bool:
    """Whether the stand-in's weights carry a norm of the projected queries (a QK-norm)."""
    names = []
    for file in repo.glob("*.safetensors"):
        with safe_open(str(file), framework="pt") as f:
            names += list(f.keys())
    return any(".q_norm." in n or ".q_layernorm." in n for n in names)


def _cell(value) -> str:
    return "" if value is None else str(value)


def test_the_catalogue_names_a_known_model_type_for_every_row():
    assert ROWS, f"{popular_repos.POPULAR_CATALOGUE} has no rows"
    assert all(r["model_type"] for r in ROWS)
    assert QK_NORM_TYPES <= {r["model_type"] for r in ROWS}, "the QK-norm checks below would check nothing"


@pytest.mark.parametrize("row", ROWS, ids=[r["model_id"] for r in ROWS])
def test_wqk_score_of_a_popular_hub_id(row, against_stand_in, tmp_path, capsys):
    out = tmp_path / "scores.parquet"
    assert main(["score", row["source"], "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    scores = pd.read_parquet(out)
    declared = {s: row[f"objective_{s}"] for s in SELF_STACKS if row[f"objective_{s}"]}
    assert set(scores["stack"]) - {"cross"} == set(declared)
    assert set(scores["model_type"]) == {row["model_type"]}
    annotated = annotate(scores, to_frame([row]))
    for stack, objective in declared.items():
        assert set(annotated.loc[annotated["stack"] == stack, "objective"]) == {objective}, stack
    for column in ("symmetry", "directionality"):
        assert scores[column].map(math.isfinite).all(), column
    if row["model_type"] in PER_LAYER_QK_NORM:
        config = json.loads((against_stand_in.root / "models" / row["source"] / "config.json").read_text())
        marked = config["text_config"][PER_LAYER_QK_NORM[row["model_type"]]]
        decoder = scores[scores["stack"] == "decoder"].drop_duplicates("layer").sort_values("layer")
        assert list(decoder["form"]) == ["qk_norm_gain_folded" if m else "bilinear" for m in marked]
        assert set(marked) == {0, 1}  # both kinds of layer, so the check above can fail either way
    elif "form" in scores:
        folded = _has_query_norm(against_stand_in.root / "models" / row["source"])
        assert folded or row["model_type"] not in QK_NORM_TYPES  # the stand-in has the model's QK-norm
        folded = folded or row["model_type"] in UNIT_QK_NORM
        forms = set(scores["form"])
        if row["model_type"] in QK_NORM_TYPES | UNIT_QK_NORM or not folded:
            assert forms == {"qk_norm_gain_folded" if folded else "bilinear"}, forms
        else:  # a composite whose text model alone has the QK-norm (Gemma 3): its decoder folded
            assert set(scores.loc[scores["stack"] == "decoder", "form"]) == {"qk_norm_gain_folded"}, forms
    if is_gated(row):
        assert against_stand_in.repo("models", row["source"]).gated


def test_a_refused_model_type_fails_naming_the_model_and_the_reason(against_stand_in, tmp_path, capsys):
    for hub_id, model_type in REFUSED.items():
        config = json.loads((against_stand_in.root / "models" / hub_id / "config.json").read_text())
        assert config["model_type"] == model_type  # the stand-in is the real architecture
        out = tmp_path / "scores.parquet"
        assert main(["score", hub_id, "--out", str(out), "--quiet"]) == 1
        err = capsys.readouterr().err
        assert f"model_type {model_type!r} of {hub_id} is not scored: multi-head latent attention" in err, err
        assert not out.exists()


def test_a_refused_model_type_in_the_catalogue_stops_it_at_read_time(tmp_path):
    lines = popular_repos.POPULAR_CATALOGUE.read_text(encoding="utf-8").splitlines()
    header = next(ln for ln in lines if ln.strip() and not ln.startswith("#")).split("\t")
    row = dict(ROWS[0], model_id="deepseek-ai/DeepSeek-V3", source="deepseek-ai/DeepSeek-V3", slug="")
    row["model_type"] = "deepseek_v3"
    path = tmp_path / "hub_popular.tsv"
    path.write_text("\n".join([*lines, "\t".join(_cell(row.get(c)) for c in header)]) + "\n", encoding="utf-8")
    with pytest.raises(CatalogueError, match=rf"line {len(lines) + 1}, column 'model_type': model_type 'deepseek_v3'"):
        load_catalogue(path)
