"""Revision sweeps (wqk.sweeps): a catalogue line naming several revisions of one hub model, its
expansion at load time, patterns sampled from the hub's branches (`wqk pin`, `wqk catalogue
--revisions`), the stand-in hub's branches, the sweep aggregate, figure and table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from standin_hub import point_at, start
from standin_hub.sweep_repos import PYTHIA, PYTHIA_STEPS, build_sweep_hub
from wqk.catalogue import CatalogueError, load_catalogue, load_catalogues, write_catalogue
from wqk.sweeps import Pattern, Revision, SweepError, parse, pin, step_of

ROOT = Path(__file__).resolve().parents[1]
SHA = "0123456789abcdef0123456789abcdef01234567"
HEADER = "model_id\tsource\trevisions\tfamily\tmodality\tfigure\tobjective_decoder\n"


def catalogue(tmp_path: Path, *lines: str, header: str = HEADER, name: str = "cat.tsv") -> Path:
    path = tmp_path / name
    path.write_text(header + "".join(line + "\n" for line in lines))
    return path


def line(model_id: str = "org/m", revisions: str = "step0,step1000", source: str | None = None) -> str:
    return f"{model_id}\t{source or model_id}\t{revisions}\tFam\ttext\t\tautoregressive"


# ---------------------------------------------------------------- the revisions cell


def test_a_list_names_revisions_with_their_steps():
    got = parse(f"step0, step1000@{SHA},step143000")
    assert got == [Revision("step0", None, 0), Revision("step1000", SHA, 1000), Revision("step143000", None, 143000)]
    assert [r.fetched for r in got] == ["step0", SHA, "step143000"]
    assert parse("") is None
    assert step_of("step1000-tokens4B") == 1000  # OLMo's branch names
    assert step_of("v2") == 2


@pytest.mark.parametrize(
    "cell, why",
    [
        ("step0,step0", "listed twice"),
        (f"{SHA}", "bare commit"),
        ("step0@abc", "NAME@COMMIT"),
        ("main", "no number"),
        ("step{N}~0", "no pattern"),
        ("step{M}~3", "no pattern"),
        ("step{N}~3lin", "no pattern"),
    ],
)
def test_a_bad_cell_is_refused_with_the_reason(cell, why):
    with pytest.raises(SweepError, match=why):
        parse(cell)


def test_a_pattern_is_sampled_evenly_by_rank_first_and_last_included():
    refs = {f"step{s}": f"{s:040x}" for s in PYTHIA_STEPS} | {"main": "f" * 40, "v1.0": "e" * 40}
    pattern = parse("step{N}~5")
    assert pattern == Pattern("step{N}", 5)
    picked = pattern.sample(refs)
    ranks = [PYTHIA_STEPS.index(r.step) for r in picked]
    assert [r.step for r in picked][0] == 0 and picked[-1].step == 143000
    assert ranks == [round(i * 153 / 4) for i in range(5)]
    assert all(r.commit == refs[r.name] for r in picked)
    assert len(parse("step{N}").sample(refs)) == len(PYTHIA_STEPS)  # no count: every branch
    assert len(parse("step{N}~500").sample(refs)) == len(PYTHIA_STEPS)  # more than there are: all
    assert [r.step for r in parse("step{N}~1").sample(refs)] == [143000]
    with pytest.raises(SweepError, match="no branch or tag matches ckpt-{N}"):
        parse("ckpt-{N}").sample(refs)


def test_a_log_pattern_is_sampled_evenly_in_log_step_first_and_last_included():
    refs = {f"step{s}": f"{s:040x}" for s in PYTHIA_STEPS}
    pattern = parse("step{N}~8log")
    assert pattern == Pattern("step{N}", 8, log=True) and str(pattern) == "step{N}~8log"
    steps = [r.step for r in pattern.sample(refs)]
    assert steps == [0, 4, 32, 128, 1000, 5000, 26000, 143000]
    ideal = np.linspace(0, np.log1p(143000), 8)  # each pick the branch nearest its point in log(1 + step)
    logs = np.log1p(PYTHIA_STEPS)
    assert steps == [PYTHIA_STEPS[int(np.abs(logs - x).argmin())] for x in ideal]
    assert (
        sum(s < 1000 for s in steps) == 4
        and sum(s < 1000 for s in (r.step for r in parse("step{N}~8").sample(refs))) == 1
    )
    assert [r.step for r in parse("step{N}~2log").sample({"step10": SHA, "step20": SHA})] == [10, 20]
    assert len(parse("step{N}~500log").sample(refs)) == len(PYTHIA_STEPS)  # more than there are: all
    assert [r.step for r in parse("step{N}~1log").sample(refs)] == [143000]


def test_pin_writes_a_cell_as_the_commits_it_stands_for():
    refs = {"step0": "a" * 40, "step512": "b" * 40}
    assert pin("step0,step512", refs) == f"step0@{'a' * 40},step512@{'b' * 40}"
    assert pin(f"step0@{SHA}", {}) == f"step0@{SHA}"  # pinned already: kept
    with pytest.raises(SweepError, match="has no branch or tag step8"):
        pin("step0,step8", refs, "org/m")


# ---------------------------------------------------------------- the catalogue


def test_a_swept_line_loads_as_one_model_per_revision(tmp_path):
    path = catalogue(
        tmp_path, line(revisions=f"step0,step1000@{SHA}"), "org/plain\torg/plain\t\tFam\ttext\tlanguage\tautoregressive"
    )
    rows = load_catalogue(path)
    assert [r["model_id"] for r in rows] == ["org/m@step0", "org/m@step1000", "org/plain"]
    assert [r["slug"] for r in rows] == ["org--m--step0", "org--m--step1000", "org--plain"]
    assert [r["revision"] for r in rows] == ["step0", SHA, "main"]
    assert [(r["sweep"], r["step"]) for r in rows] == [("org/m", 0), ("org/m", 1000), ("", None)]
    assert "revisions" not in rows[0]
    out = tmp_path / "written.tsv"  # what the workflow writes for aggregation, read back the same
    write_catalogue(rows, out)
    assert load_catalogue(out) == rows


def test_a_catalogue_without_sweeps_has_no_sweep_columns():
    rows = load_catalogue(ROOT / "config" / "catalogue" / "quickstart.tsv")
    assert not {"sweep", "step", "revisions"} & set(rows[0])


@pytest.mark.parametrize(
    "bad, why",
    [
        (line(revisions="step{N}~8"), r"line 2, column 'revisions': step\{N\}~8 names the repo's branches.*wqk pin"),
        (line(source="tiny:bert"), "sweeps are of hub models, not of tiny:bert"),
        (line(revisions="step0,step0"), "line 2, column 'revisions': step0 is listed twice"),
    ],
)
def test_a_bad_swept_line_names_its_line_and_the_fix(tmp_path, bad, why):
    with pytest.raises(CatalogueError, match=why):
        load_catalogue(catalogue(tmp_path, bad))


def test_revisions_with_a_revision_or_a_step_without_a_sweep_are_refused(tmp_path):
    header = "model_id\tsource\trevision\trevisions\tfamily\tmodality\tfigure\tobjective_decoder\n"
    with pytest.raises(CatalogueError, match="give `revisions` alone"):
        load_catalogue(catalogue(tmp_path, "org/m\torg/m\tv1\tstep0\tFam\ttext\t\tautoregressive", header=header))
    header = "model_id\tsource\tstep\tfamily\tmodality\tfigure\tobjective_decoder\n"
    with pytest.raises(CatalogueError, match="column 'step': a step belongs to a swept line"):
        load_catalogue(catalogue(tmp_path, "org/m\torg/m\t5\tFam\ttext\t\tautoregressive", header=header))


def test_two_lines_sweeping_one_revision_twice_are_a_duplicate(tmp_path):
    with pytest.raises(CatalogueError, match=r"line 3: duplicate slug 'org--m--step0' \(also on line 2\)"):
        load_catalogue(catalogue(tmp_path, line(revisions="step0"), line(revisions="step0,step1")))


def test_several_catalogue_files_load_in_order_with_their_columns_merged(tmp_path):
    quick = ROOT / "config" / "catalogue" / "quickstart.tsv"
    sweeps = catalogue(tmp_path, line())
    rows = load_catalogues([str(quick), str(sweeps)])
    assert [r["model_id"] for r in rows] == [r["model_id"] for r in load_catalogue(quick)] + [
        "org/m@step0",
        "org/m@step1000",
    ]
    assert len({tuple(r) for r in rows}) == 1  # every row has every column
    assert rows[0]["sweep"] == "" and rows[0]["step"] is None
    assert load_catalogues(str(quick)) == load_catalogue(quick)  # one file: as before
    again = catalogue(tmp_path, line(revisions="step1000"), name="again.tsv")
    with pytest.raises(
        CatalogueError, match=f"catalogue {again}: slug 'org--m--step1000' is in catalogue {sweeps} too"
    ):
        load_catalogues([str(sweeps), str(again)])


def test_the_paper_config_sweeps_pythia_beside_the_paper_models():
    import yaml

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    rows = load_catalogues([str(ROOT / p) for p in config["catalogue"]])
    swept = [r for r in rows if r["sweep"]]
    assert {r["sweep"] for r in swept} == {PYTHIA}
    assert [r["step"] for r in swept] == sorted(r["step"] for r in swept)
    assert {r["revision"] for r in swept} <= {f"step{s}" for s in PYTHIA_STEPS}  # the real repo's branch names


# ---------------------------------------------------------------- the hub's branches


@pytest.fixture(scope="module")
def sweep_hub(tmp_path_factory):
    server = start(build_sweep_hub(tmp_path_factory.mktemp("sweep_hub")), log_unknown=False)
    yield server
    server.stop()


@pytest.fixture
def online(sweep_hub, tmp_path, monkeypatch):
    return point_at(sweep_hub, monkeypatch, tmp_path)


def test_the_stand_in_serves_branches_and_their_files(online):
    from wqk.checkpoints.hub import fetch_hub, repo_refs, resolve_revision

    refs = repo_refs(PYTHIA)
    assert set(refs) == {"main"} | {f"step{s}" for s in PYTHIA_STEPS}
    assert len(set(refs.values())) == len(refs) - 1  # main is step143000's weights, each other branch its own
    assert refs["main"] == refs["step143000"]
    assert resolve_revision(PYTHIA, "step512") == refs["step512"]
    early, late = Path(fetch_hub(PYTHIA, "step0")), Path(fetch_hub(PYTHIA, "step512"))
    assert (early / ".revision").read_text().strip() == refs["step0"]
    assert (late / ".revision").read_text().strip() == refs["step512"]
    assert (early / "model.safetensors").read_bytes() != (late / "model.safetensors").read_bytes()


def test_a_missing_branch_or_repo_is_one_line_naming_it(online):
    from wqk.checkpoints.hub import repo_refs, resolve_revision
    from wqk.errors import SourceUnavailable

    with pytest.raises(SourceUnavailable, match="revision 'step3' of EleutherAI/pythia-160m not found"):
        resolve_revision(PYTHIA, "step3")
    with pytest.raises(SourceUnavailable, match="org/none not found on the hub"):
        repo_refs("org/none")


def wqk(capsys, *args) -> tuple[int, str]:
    """`wqk ARGS` in this process (the fixture's environment): its exit code and standard error."""
    from wqk.cli import main

    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def test_pin_expands_a_pattern_and_pins_a_list_against_the_branches(online, tmp_path, capsys):
    path = catalogue(tmp_path, line(PYTHIA, "step{N}~4"), line("other", "step0,step512", source=PYTHIA))
    before = path.read_text()
    code, err = wqk(capsys, "pin", str(path))
    assert code == 0, err
    assert "2 sweep(s) pinned" in err
    rows = load_catalogue(path)
    assert [r["step"] for r in rows] == [0, 41000, 92000, 143000, 0, 512]
    from wqk.checkpoints.hub import repo_refs

    refs = repo_refs(PYTHIA)
    assert [r["revision"] for r in rows] == [refs[f"step{r['step']}"] for r in rows]
    assert path.read_text().splitlines()[0] == before.splitlines()[0]  # every other byte kept
    asked = len(online.seen)
    assert wqk(capsys, "pin", str(path))[0] == 0  # pinned already: nothing asked
    assert [s for s in online.seen[asked:] if "/refs" in s["path"]] == []


def test_pin_expands_a_log_pattern(online, tmp_path, capsys):
    path = catalogue(tmp_path, line(PYTHIA, "step{N}~4log"))
    assert wqk(capsys, "pin", str(path))[0] == 0
    rows = load_catalogue(path)
    assert [r["step"] for r in rows] == [0, 64, 3000, 143000]
    from wqk.checkpoints.hub import repo_refs

    refs = repo_refs(PYTHIA)
    assert [r["revision"] for r in rows] == [refs[f"step{r['step']}"] for r in rows]


def test_pin_leaves_the_file_as_it_was_when_a_branch_is_missing(online, tmp_path, capsys):
    path = catalogue(tmp_path, line(PYTHIA, "step0,step3"))
    before = path.read_bytes()
    code, err = wqk(capsys, "pin", str(path))
    assert code != 0
    assert "line 2 (EleutherAI/pythia-160m): EleutherAI/pythia-160m has no branch or tag step3" in err
    assert path.read_bytes() == before


def test_wqk_catalogue_adds_each_models_sweep_after_its_line(online, tmp_path, capsys):
    out = tmp_path / "swept.tsv"
    code, err = wqk(capsys, "catalogue", "--author", "EleutherAI", "--revisions", "step{N}~3", "--out", str(out))
    assert code == 0, err
    rows = load_catalogue(out)
    assert [(r["model_id"], r["step"]) for r in rows] == [
        (PYTHIA, None), (f"{PYTHIA}@step0", 0), (f"{PYTHIA}@step66000", 66000), (f"{PYTHIA}@step143000", 143000),
    ]  # fmt: skip
    assert rows[0]["figure"] == "language" and all(r["figure"] == "" for r in rows[1:])
    code, err = wqk(capsys, "catalogue", "--author", "EleutherAI", "--revisions", "ckpt{N}", "--out", str(out))
    assert code == 0, err
    text = out.read_text()
    assert f"# {PYTHIA}@revisions\tno branch or tag matches ckpt{{N}}" in text
    assert [r["model_id"] for r in load_catalogue(out)] == [PYTHIA]


# ---------------------------------------------------------------- aggregate, figure and table


def sweep_models(steps=(0, 1000, 143000), sweeps=("org/a", "org/b")) -> pd.DataFrame:
    rows = []
    for k, sweep in enumerate(sweeps):
        for step in steps:
            t = np.log1p(step) / np.log1p(max(steps))
            med = {"symmetry": 0.1 - 0.3 * t * (k + 1) / 2, "directionality": 0.05 + 0.4 * t}
            row = {"model": f"{sweep}@step{step}", "sweep": sweep, "step": step, "stack": "decoder",
                   "objective": "autoregressive", "synthetic": False}  # fmt: skip
            for prefix in ("", "head_"):
                for m, v in med.items():
                    row |= {f"{prefix}{m}_median": v, f"{prefix}{m}_q25": v - 0.05, f"{prefix}{m}_q75": v + 0.05}
            rows.append(row)
    return pd.DataFrame(rows).sample(frac=1, random_state=0).reset_index(drop=True)  # any order in


def test_the_sweep_aggregate_carries_sweep_and_step_and_the_other_one_does_not(tmp_path):
    from toy_scores import scores as toy_scores
    from wqk.aggregate import aggregate, read_catalogue

    plain = "org/plain\torg/plain\t\tFam\ttext\tlanguage\tautoregressive"
    cat = read_catalogue(catalogue(tmp_path, line(revisions="step0,step1000"), plain))
    layers = {"decoder": [(0.1, 0.2), (0.3, 0.4)]}
    scores = pd.concat([toy_scores(m, layers) for m in cat["model_id"]], ignore_index=True)
    models = aggregate(scores, cat)["models"]
    assert list(models.columns[:4]) == ["model", "slug", "sweep", "step"]
    assert models.set_index("model").loc["org/m@step1000", ["sweep", "step"]].tolist() == ["org/m", 1000]
    header = "model_id\tsource\tfamily\tmodality\tfigure\tobjective_decoder\n"
    cat = read_catalogue(catalogue(tmp_path, plain.replace("\t\t", "\t"), header=header, name="plain.tsv"))
    assert not {"sweep", "step"} & set(aggregate(toy_scores("org/plain", layers), cat)["models"].columns)


def test_the_table_lists_each_revision_in_step_order():
    from wqk.tables import sweep_scores

    table = sweep_scores.build({"sweeps": sweep_models()})
    assert table["model"].tolist() == ["org/a"] * 3 + ["org/b"] * 3
    assert table["step"].tolist() == [0, 1000, 143000] * 2
    assert table["fraction of training"].tolist() == ["0", "0.00699", "1"] * 2
    assert table["revision"].tolist() == ["step0", "step1000", "step143000"] * 2
    assert table["directionality (layers)"].iloc[0] == "0.05 [0.00, 0.10]"


def test_the_figure_draws_each_history_beside_our_runs(tmp_path):
    from wqk import figures
    from wqk.figures import sweep_dynamics

    summary = pd.DataFrame(
        [{"run": f"r-{o}", "size": "mini", "dataset": "wikipedia", "init": init, "objective": o, "seed": 0, "step": s,
          **{f"{m}_{q}": 0.1 for m in ("symmetry", "directionality") for q in ("median", "q25", "q75")}}
         for o in ("bidirectional", "autoregressive") for init in ("default", "symmetric") for s in (0, 100, 200)]
    )  # fmt: skip
    fig = sweep_dynamics.draw({"sweeps": sweep_models(), "summary": summary})
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert sorted(lines) == [
        "org/a (decoder, 3 revisions)", "org/b (decoder, 3 revisions)",
        "ours: decoder (autoregressive), mini, wikipedia", "ours: encoder (bidirectional), mini, wikipedia",
    ]  # fmt: skip   # the symmetric-init runs left out
    a = lines["org/a (decoder, 3 revisions)"]
    assert a.get_xdata().tolist() == [0.0, 1000 / 143000, 1.0]  # step order, whatever order it came in
    assert lines["ours: decoder (autoregressive), mini, wikipedia"].get_xdata().tolist() == [0.0, 0.5, 1.0]
    pdf, png = figures.save(fig, tmp_path / "sweep_dynamics.pdf")  # and it passes the layout check
    assert png.stat().st_size > 0
    empty = sweep_dynamics.draw({"sweeps": sweep_models().iloc[:0]})
    assert any("no swept models" in t.get_text() for t in empty.axes[0].texts)
