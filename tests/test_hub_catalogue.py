"""`wqk catalogue` against the stand-in hub's listing (tests/standin_hub/listing.py): each filter
narrows the listing as huggingface_hub's own `list_models` sees it, pages are followed through the
Link header, unsupported models are comment lines with their reasons, the output is the same
whatever the listing order, and the catalogue it writes loads, plans and runs in the workflow.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rehearse import copy_workflow, environment
from standin_hub import TOKEN, point_at, start
from standin_hub.listing import facts_of
from standin_hub.popular_repos import build_popular, popular_rows
from wqk.adapters import supported_model_types
from wqk.catalogue import load_catalogue
from wqk.checkpoints.hub.listing import Query, list_models
from wqk.cli import main
from wqk.errors import SourceUnavailable
from wqk.hub_catalogue import AUDIO, VISION, Filters, build, modality, render

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# hub id -> what the listing says of it beside its files (downloads: a distinct count each, so
# that "most downloaded first" has one order)
LISTING = {
    "openai/clip-vit-base-patch32": {"downloads": 9000, "pipeline_tag": "zero-shot-image-classification"},
    "facebook/opt-125m": {"downloads": 8000, "tags": ["license:other"]},
    "bigscience/bloom-560m": {"downloads": 7000, "tags": ["license:bigscience-bloom-rail-1.0"]},
    "Qwen/Qwen3-0.6B": {"downloads": 6000, "tags": ["license:apache-2.0"]},
    "facebook/opt-350m": {"downloads": 5000, "tags": ["license:other"]},
    "deepseek-ai/DeepSeek-V3": {"downloads": 4000, "tags": ["license:mit"]},
    "bigcode/starcoder": {"downloads": 3000, "tags": ["license:bigcode-openrail-m"]},  # gated (hub_popular.tsv notes)
    "google/electra-small-discriminator": {"downloads": 2000, "tags": ["en", "license:apache-2.0"]},
}
# repos written here: hub id -> (files, listing facts): no model wqk knows, and a pytorch_model.bin
# repo (no safetensors count; its weights are never read here)
RAW = {
    "someone/rwkv-tiny": ({"config.json": {"model_type": "rwkv", "architectures": ["RwkvForCausalLM"]}}, {"downloads": 100}),
    "someone/tiny-gguf": ({"model.gguf": b"GGUF"}, {"downloads": 50, "library_name": "gguf"}),
    "someone/opt-bin": (
        {"config.json": {"model_type": "opt", "architectures": ["OPTForCausalLM"]}, "pytorch_model.bin": b"\0"},
        {"downloads": 10},
    ),
}  # fmt: skip
UNSUPPORTED = {"deepseek-ai/DeepSeek-V3", "someone/rwkv-tiny", "someone/tiny-gguf"}
REFUSED = {"deepseek-ai/DeepSeek-V3": "deepseek_v3"}
PAGE = 2  # models per page: every listing below crosses pages


def _add_raw(root: Path) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    for hub_id, (files, facts) in RAW.items():
        folder = root / "models" / hub_id
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            data = content if isinstance(content, bytes) else json.dumps(content).encode()
            (folder / name).write_bytes(data)
        manifest["models"][hub_id] = {"gated": False, **facts}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    rows = [r for r in popular_rows() if r["source"] in LISTING]
    root = build_popular(tmp_path_factory.mktemp("listing_hub"), rows, REFUSED, LISTING)
    _add_raw(root)
    server = start(root, log_unknown=False)
    server.listing_page_size = PAGE
    yield server
    server.stop()


@pytest.fixture
def online(hub, tmp_path, monkeypatch):
    return point_at(hub, monkeypatch, tmp_path)


def _everything(hub) -> list:
    """The whole listing as huggingface_hub's list_models reads it: what the filters narrow."""
    from huggingface_hub import HfApi

    expand = ["sha", "config", "safetensors", "downloads", "gated", "pipeline_tag", "library_name", "tags"]
    return list(HfApi(endpoint=hub.url, token=TOKEN).list_models(expand=expand, sort="downloads"))


def _listing_requests(hub) -> int:
    return sum(1 for r in hub.seen if r["path"] == "/api/models")


def test_huggingface_hub_reads_the_stand_in_listing_across_pages(online):
    hub = online
    before = _listing_requests(hub)
    models = _everything(hub)
    assert _listing_requests(hub) - before == math.ceil(len(hub.repos) / PAGE) > 1  # pages through Link
    assert sorted(m.id for m in models) == sorted(repo_id for _, repo_id in hub.repos)
    assert [m.downloads for m in models] == sorted((m.downloads for m in models), reverse=True)
    for m in models:
        repo = hub.repo("models", m.id)
        assert m.sha == repo.sha
        assert m.gated == repo.gated
        weights = [n for n in repo.files if n.endswith(".safetensors")]
        assert (m.safetensors is not None) == bool(weights)
        if weights:
            assert m.safetensors.total == sum(m.safetensors.parameters.values()) > 0
        config = json.loads(repo.files["config.json"].read_text()) if "config.json" in repo.files else None
        assert (m.config or {}).get("model_type") == (config or {}).get("model_type")


def test_an_unknown_expand_and_a_wrong_token_are_refused_as_on_the_hub(hub):
    import urllib.error
    import urllib.request

    def status(url: str, **headers) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    code, body = status(f"{hub.url}/api/models?expand=weights")
    assert code == 400 and "expand" in json.loads(body)["error"]
    assert status(f"{hub.url}/api/models", Authorization="Bearer hf_wrong")[0] == 401
    assert status(f"{hub.url}/api/models", Authorization=f"Bearer {TOKEN}")[0] == 200


FILTERS = {  # name -> (the filters of wqk catalogue, the same test on a model of the full listing)
    "author": (Filters(Query(author="facebook")), lambda m: m.id.startswith("facebook/")),
    "search": (Filters(Query(search="OPT")), lambda m: "opt" in m.id.lower()),
    "library": (Filters(Query(tags=("gguf",))), lambda m: m.library_name == "gguf"),
    "pipeline_tag": (
        Filters(Query(pipeline_tag="text-generation")),
        lambda m: m.pipeline_tag == "text-generation",
    ),
    "model_type": (Filters(model_types=("opt",)), lambda m: (m.config or {}).get("model_type") == "opt"),
    "model_types": (
        Filters(model_types=("opt", "bloom")),
        lambda m: (m.config or {}).get("model_type") in ("opt", "bloom"),
    ),
    "gated": (Filters(Query(gated=True)), lambda m: bool(m.gated)),
    "not gated": (Filters(Query(gated=False)), lambda m: not m.gated),
    "min_downloads": (Filters(min_downloads=5000), lambda m: m.downloads >= 5000),
}


@pytest.mark.parametrize("name", FILTERS)
def test_each_filter_narrows_the_listing(online, name):
    filters, keep = FILTERS[name]
    everything = _everything(online)
    expected = sorted(m.id for m in everything if keep(m))
    assert 0 < len(expected) < len(everything), "the stand-in's models must tell this filter apart"
    assert sorted(e.repo_id for e in build(filters)) == expected


def test_the_parameter_range_narrows_and_a_model_without_a_count_is_a_comment(online):
    counted = [m for m in _everything(online) if m.safetensors]
    totals = sorted({m.safetensors.total for m in counted})
    low, high = totals[1], totals[-2]
    filters = Filters(Query(min_params=low, max_params=high))
    entries = build(filters)
    rows = {e.repo_id: e.row for e in entries if e.row}
    assert rows and all(low <= int(r["n_params"]) <= high for r in rows.values())
    expected = {m.id for m in counted if low <= m.safetensors.total <= high}
    assert {e.repo_id for e in entries} == expected  # the hub's num_parameters, written as it reads it
    assert len(expected) < len(counted)
    # a listing that names a model without a count anyway (the hub left none out): a comment line
    unfiltered = {e.repo_id: e for e in build(filters, list(list_models(Query())))}
    assert "no safetensors parameter count" in unfiltered["someone/opt-bin"].reason
    assert set(unfiltered) == expected | set(RAW)  # the uncounted: comment lines, each with its reason


def test_limit_takes_the_most_downloaded_and_asks_for_no_further_page(online):
    before = _listing_requests(online)
    entries = build(Filters(limit=3))
    assert _listing_requests(online) - before == math.ceil(3 / PAGE)
    first = [m.id for m in _everything(online)][:3]
    assert sorted(e.repo_id for e in entries) == sorted(first)


def test_unsupported_models_are_comment_lines_with_their_reasons(online):
    entries = {e.repo_id: e for e in build(Filters())}
    assert set(entries) == {repo_id for _, repo_id in online.repos}  # none dropped
    assert "is not scored: multi-head latent attention" in entries["deepseek-ai/DeepSeek-V3"].reason
    assert "'rwkv' of someone/rwkv-tiny is not scored: no attention" in entries["someone/rwkv-tiny"].reason
    assert "no model_type" in entries["someone/tiny-gguf"].reason
    text = render(list(entries.values()))
    for repo_id, e in entries.items():
        line = f"# {repo_id}\t{e.reason}" if e.row is None else "\t".join(e.row.values())
        assert line + "\n" in text
    assert {e.repo_id for e in entries.values() if e.row is None} == UNSUPPORTED
    assert entries["someone/opt-bin"].row["n_params"] == ""  # a pytorch_model.bin repo: no count


def test_rows_are_pinned_typed_and_objectived_from_the_record(online, tmp_path):
    entries = [e for e in build(Filters()) if e.row]
    path = tmp_path / "hub.tsv"
    path.write_text(render(entries))
    rows = load_catalogue(path)
    assert [r["model_id"] for r in rows] == [e.repo_id for e in entries]
    popular = {r["source"]: r for r in popular_rows()}
    for row in rows:
        assert row["revision"] == online.repo("models", row["source"]).sha
        assert row["modality"] == modality(row["model_type"])
        if row["source"] not in popular:
            continue
        # the record's objectives include every one hub_popular.tsv declares for the model
        declared = {s: popular[row["source"]][f"objective_{s}"] for s in ("encoder", "decoder")}
        assert all(row[f"objective_{s}"] == o for s, o in declared.items() if o), row["model_id"]
        assert row["n_params"] == facts_of(online.repo("models", row["source"]))["safetensors"]["total"]
        assert ("gated" in row["notes"].split(" | ")) == bool(online.repo("models", row["source"]).gated)


def test_the_licence_is_the_model_cards_as_the_hub_tags_it(online):
    """`license:NAME` among a listed model's tags is its line's licence (what the release reads to
    decide whether its matrices may be passed on); no such tag, no licence."""
    rows = {e.repo_id: e.row for e in build(Filters()) if e.row}
    for hub_id, facts in LISTING.items():
        if hub_id not in rows:
            continue
        tagged = [t.removeprefix("license:") for t in facts.get("tags", []) if t.startswith("license:")]
        assert rows[hub_id]["licence"] == (tagged[0] if tagged else ""), hub_id
    assert rows["Qwen/Qwen3-0.6B"]["licence"] == "apache-2.0" and rows["openai/clip-vit-base-patch32"]["licence"] == ""


def test_the_order_is_the_hub_ids_whatever_the_listing_order(online):
    listed = list(list_models(Query()))
    forward = render(build(Filters(), listed))
    assert render(build(Filters(), listed[::-1])) == forward
    ids = [line.split("\t")[1] for line in forward.splitlines()[1:] if not line.startswith("#")]
    assert ids == sorted(ids, key=str.lower)


def test_the_command_writes_the_same_bytes_twice(online, tmp_path, capsys):
    outs = [tmp_path / "a.tsv", tmp_path / "b.tsv"]
    for out in outs:
        assert main(["catalogue", "--author", "facebook", "--not-gated", "--out", str(out)]) == 0, capsys.readouterr()
    assert outs[0].read_bytes() == outs[1].read_bytes()
    assert [r["model_id"] for r in load_catalogue(outs[0])] == ["facebook/opt-125m", "facebook/opt-350m"]
    assert "--author facebook --not-gated" in outs[0].read_text().splitlines()[0]


def test_modality_is_the_papers_for_each_of_its_model_types():
    from standin_hub.paper_repos import SPECS_BY_ID

    assert AUDIO | VISION <= set(supported_model_types())
    for row in load_catalogue(ROOT / "config" / "catalogue" / "paper.tsv"):
        assert modality(SPECS_BY_ID[row["model_id"]].model_type) == row["modality"], row["model_id"]


def test_offline_unreachable_and_a_refused_token_are_one_line_each(online, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["catalogue"]) == 1
    assert "HF_HUB_OFFLINE=1" in capsys.readouterr().err
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    assert main(["catalogue"]) == 1
    err = capsys.readouterr().err
    assert "refused the model listing (HTTP 401)" in err and "HF_TOKEN" in err and len(err.splitlines()) == 1
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: fails at once, not retried
    t0 = time.perf_counter()
    with pytest.raises(SourceUnavailable, match="cannot reach the Hugging Face hub.*HF_ENDPOINT"):
        list(list_models(Query()))
    assert time.perf_counter() - t0 < 10


def _workflow(tmp_path: Path, catalogue_args: list[str]) -> tuple[Path, list[str], list[dict]]:
    """A copy of the workflow, a catalogue built by `wqk catalogue`, and the configfiles of
    README's "Scoring the hub": the paper config, its catalogue replaced, no figures, tables,
    validation or training."""
    workdir = copy_workflow(tmp_path / "wf")
    catalogue = workdir / "config" / "catalogue" / "hub.tsv"
    assert main(["catalogue", *catalogue_args, "--out", str(catalogue)]) == 0
    overlay = {
        "catalogue": str(catalogue.relative_to(workdir)),
        "activate": {"figures": False, "tables": False, "validation": False, "training": False},
    }
    (workdir / "hub.yaml").write_text(yaml.safe_dump(overlay))
    return workdir, ["--configfile", "config/config.yaml", "hub.yaml"], load_catalogue(catalogue)


def _snakemake(workdir: Path, hub, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "snakemake"), "--cores", "2", *args]
    return subprocess.run(cmd, cwd=workdir, env=environment(workdir, hub), capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_workflow_plans_the_whole_catalogue(online, tmp_path):
    workdir, configfiles, rows = _workflow(tmp_path, [])
    r = _snakemake(workdir, online, "-n", *configfiles)
    assert r.returncode == 0, r.stderr[-3000:]
    for rule in ("fetch", "score"):
        planned = [line for line in r.stdout.splitlines() if line.split() == [rule, str(len(rows))]]
        assert planned, f"{rule}: not {len(rows)} jobs planned\n{r.stdout[-3000:]}"


@pytest.mark.slow
def test_the_workflow_runs_a_catalogue_of_the_hub(online, tmp_path):
    workdir, configfiles, rows = _workflow(tmp_path, ["--author", "facebook"])
    assert len(rows) == 2
    r = _snakemake(workdir, online, *configfiles)
    assert r.returncode == 0, r.stderr[-5000:]
    models = pd.read_parquet(workdir / "results" / "aggregate" / "models.parquet")
    assert set(models["slug"]) == {row["slug"] for row in rows}
    assert set(models["objective"]) == {"autoregressive"}
