"""The Snakemake workflow: lint, parse-time validation, planning, incremental reruns, and
the end-to-end run of the test config (tests/conftest.py's `test_run`, once a session; the
byte-identity test runs it a second time, as a deployed module).

Every run happens in a temporary copy of the workflow, offline. Snakemake is the one
installed next to this Python (the project's venv); `wqk` is found on the same PATH.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from rehearse import copy_workflow
from workflow_runs import (
    ROOT,
    SNAKEMAKE,
    TEST_CONFIG,
    TIMEOUT,
    digests,
    environment,
    explain_differences,
    job_counts,
    planned_jobs,
    snakemake,
)

pytestmark = pytest.mark.slow  # every test here runs Snakemake


def read_catalogue(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader((l for l in f if not l.startswith("#")), delimiter="\t"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("wf"))


# ---------------------------------------------------------------- lint and parse time


@pytest.mark.parametrize("configfile", [None, "config/quickstart.yaml", TEST_CONFIG])
def test_lint_is_clean(workdir, configfile):
    args = ["--lint"] + (["--configfile", configfile] if configfile else [])
    r = snakemake(workdir, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Congratulations, your workflow is in a good condition" in r.stdout + r.stderr


def test_paper_dry_run_plans_every_catalogue_model(workdir):
    rows = read_catalogue(workdir / "config" / "catalogue" / "paper.tsv")
    from wqk.catalogue import load_catalogue

    swept = load_catalogue(workdir / "config" / "catalogue" / "sweeps.tsv")  # one line, 10 revisions
    r = snakemake(workdir, "-n", "--cores", "4")
    assert r.returncode == 0, r.stderr[-3000:]
    counts = job_counts(r.stdout)
    assert len(rows) >= 140 and len(swept) == 10
    for rule in ("fetch", "score"):  # score also writes the matrices and the null reference
        assert counts.get(rule) == len(rows) + len(swept), (rule, counts)
    # every table and figure of the paper, and the comparison with it; the sweep's apart
    for rule in ("aggregate", "validate", "table_errata", "table_scores_language", "figure_wqk_heatmaps"):
        assert counts.get(rule) == 1, (rule, counts)
    for rule in ("catalogue_sweeps", "aggregate_sweeps", "figure_sweep_dynamics", "table_sweep_scores"):
        assert counts.get(rule) == 1, (rule, counts)
    assert counts.get("figure_scores_vs_params") == 3
    assert counts.get("train") == 18  # 2 sizes x 3 datasets x (encoder, decoder, symmetric encoder)
    # each run scores its own saved steps: no job per checkpoint (once 18 x 201 = 3,618 of them)
    assert "score_checkpoint" not in counts, counts
    assert counts.get("train_summary") == 1, counts
    assert sum(counts.values()) <= 600, counts
    # the summary is given one scores folder per run, not 3,618 file names: a shell command
    # longer than 128 KiB (one argument of `bash -c`) cannot even be started
    summary_cmd = [l for l in r.stdout.splitlines() if "wqk train-summary" in l]  # printshellcmds: the profile's
    assert len(summary_cmd) == 1 and len(summary_cmd[0]) < 32_000, [len(c) for c in summary_cmd]


def test_the_release_asks_for_each_file_once(workdir):
    """The paper config's release (aggregates, the sweeps' beside them, scores, null, tables,
    figures): every input once (the aggregate's files were listed twice)."""
    r = snakemake(workdir, "-n", "release", "--cores", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    block = r.stdout[r.stdout.index("rule release:") :]
    inputs = block.split("input: ", 1)[1].splitlines()[0].split(", ")
    assert len(inputs) > 300 and "results/aggregate/models.parquet" in inputs
    assert "results/aggregate_sweeps/models.parquet" in inputs
    assert sorted(p for p in set(inputs) if inputs.count(p) > 1) == []


def atlas_catalogue(path: Path, n: int) -> Path:
    """A catalogue of n hub models (pinned, planned offline: nothing is fetched by a dry run)."""
    header = ("slug", "model_id", "source", "revision", "family", "modality", "n_params", "figure", "synthetic",
              "objective_encoder", "objective_decoder", "objective_cross", "paper_stacks", "notes")  # fmt: skip
    lines = ["\t".join(header)]
    for i in range(n):
        model = f"atlas-org/model-{i:05d}"
        revision = hashlib.sha1(model.encode()).hexdigest()
        lines.append(
            f"\t{model}\t{model}\t{revision}\tAtlas\ttext\t{1_000_000 + i}\tlanguage\tFalse\t\tautoregressive\t\t\t"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_catalogue_of_thousands_plans_no_command_that_grows_with_it(workdir, tmp_path):
    """3,001 models: every job's command stays short (aggregation reads folders of per-model
    files, not one argument per file); once, one command was 234 KB, past what Linux starts."""
    catalogue = atlas_catalogue(tmp_path / "atlas.tsv", 3001)
    overlay = tmp_path / "atlas.yaml"
    overlay.write_text(
        f"catalogue: {catalogue}\nactivate: {{training: false, validation: false}}\n"
        "figures: {wqk_heatmaps: {encoder: atlas-org--model-00000, decoder: atlas-org--model-00001}}\n"
    )
    r = snakemake(workdir, "-n", "-p", "--cores", "4", "--configfile", "config/config.yaml", str(overlay), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    counts = job_counts(r.stdout)
    assert counts["fetch"] == counts["score"] == 3001, counts
    commands = [l for l in r.stdout.splitlines() if l.startswith("Shell command:")]
    assert len(commands) >= 2 * 3001 + 2
    assert max(len(c) for c in commands) < 32 * 1024, max(commands, key=len)[:300]


def planned_train_seeds(workdir: Path, *configfiles: str) -> dict[str, int]:
    """Run name -> the --seed of its planned `wqk train` command (each with --threads 1)."""
    r = snakemake(workdir, "-n", "-p", "--cores", "2", "--configfile", *configfiles)
    assert r.returncode == 0, r.stderr[-3000:]
    commands = [line for line in r.stdout.splitlines() if "wqk train " in line]
    assert commands and all("--threads 1 " in c for c in commands)  # two runs share the 2 cores
    seeds = {
        m.group(2): int(m.group(1))
        for line in commands
        if (m := re.search(r"--seed (\d+) .*--out results/training/runs/(\S+)", line))
    }
    assert sorted(f"run={run}" for run in seeds) == sorted(w for rule, w in planned_jobs(r.stdout) if rule == "train")
    return seeds


def test_quickstart_trains_every_run_on_two_seeds_and_symmetric_init_yaml_adds_a_third(workdir):
    """training.seeds repeats every run of the quick start (the spread of encoder and decoder
    alike); config/symmetric_init.yaml adds a third seed to the encoders it compares."""
    runs = [f"small-{kind}-pydoc" for kind in ("encoder-default", "encoder-symmetric", "decoder-default")]
    seeds = planned_train_seeds(workdir, "config/quickstart.yaml")
    assert seeds == {**{run: 0 for run in runs}, **{f"{run}-s1": 1 for run in runs}}, seeds
    more = planned_train_seeds(workdir, "config/quickstart.yaml", "config/symmetric_init.yaml")
    assert more == {**seeds, "small-encoder-default-pydoc-s2": 2, "small-encoder-symmetric-pydoc-s2": 2}, more


def test_a_catalogue_of_revision_sweeps_only_plans_the_sweeps(workdir, tmp_path):
    """A catalogue whose every line is a revision of a sweep (config/catalogue/sweeps.tsv alone):
    its revisions are fetched, scored, aggregated apart and drawn along training; nothing is
    planned of a population it lacks (aggregate, explorer, validation); a release says why not."""
    import yaml

    config = yaml.safe_load((workdir / TEST_CONFIG).read_text())
    config["catalogue"] = "config/catalogue/sweeps.tsv"
    config["activate"]["training"] = False
    del config["figures"]["wqk_heatmaps"]
    (workdir / "sweeps-only.yaml").write_text(yaml.safe_dump(config))
    r = snakemake(workdir, "-n", "--cores", "2", "--configfile", "sweeps-only.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    counts = job_counts(r.stdout)
    from wqk.catalogue import load_catalogue

    revisions = load_catalogue(workdir / "config" / "catalogue" / "sweeps.tsv")
    assert len(revisions) == 10 and all(r["sweep"] for r in revisions)
    assert counts.pop("fetch") == counts.pop("score") == len(revisions), counts
    assert counts == {"catalogue_sweeps": 1, "aggregate_sweeps": 1, "figure_sweep_dynamics": 1,
                      "table_sweep_scores": 1, "all": 1}, counts  # fmt: skip
    r = snakemake(workdir, "-n", "release", "--cores", "2", "--configfile", "sweeps-only.yaml")
    assert r.returncode != 0 and "holds revision sweeps only" in r.stdout + r.stderr, r.stderr[-2000:]


def _write_bad_config(workdir: Path, text_from: str, text_to: str) -> str:
    bad = workdir / "tests" / "config" / "bad.yaml"
    bad.write_text((workdir / TEST_CONFIG).read_text().replace(text_from, text_to, 1))
    return str(bad.relative_to(workdir))


def test_config_typo_fails_naming_the_key(workdir):
    r = snakemake(workdir, "-n", "--configfile", _write_bad_config(workdir, "activate:", "actvate:"))
    assert r.returncode != 0
    assert "'actvate' was unexpected" in r.stdout + r.stderr


def test_config_bad_value_fails_naming_it(workdir):
    r = snakemake(workdir, "-n", "--configfile", _write_bad_config(workdir, "steps: 20", "steps: many"))
    assert r.returncode != 0
    assert "'many'" in r.stdout + r.stderr


def test_catalogue_typo_fails_naming_file_line_and_column(workdir):
    src = (workdir / "tests" / "config" / "catalogue.tsv").read_text()
    bad = workdir / "tests" / "config" / "bad.tsv"
    bad.write_text(src.replace("\ttext\t22713216\tlanguage\t", "\ttext\t22713216\tlangauge\t", 1))
    assert bad.read_text() != src
    r = snakemake(workdir, "-n", "--configfile", TEST_CONFIG, "--config", f"catalogue={bad}")
    assert r.returncode != 0
    assert f"catalogue {bad}, line 4, column 'figure'" in r.stdout + r.stderr
    assert "'langauge'" in r.stdout + r.stderr


def test_catalogue_unknown_column_and_duplicate_slug(workdir):
    src = (workdir / "tests" / "config" / "catalogue.tsv").read_text()
    bad = workdir / "tests" / "config" / "bad.tsv"
    bad.write_text(src.replace("\tmodality\t", "\tmodalty\t", 1))
    r = snakemake(workdir, "-n", "--configfile", TEST_CONFIG, "--config", f"catalogue={bad}")
    assert r.returncode != 0 and "unknown column(s) ['modalty']" in r.stdout + r.stderr
    lines = src.rstrip("\n").split("\n")
    bad.write_text(src + lines[-1] + "\n")
    r = snakemake(workdir, "-n", "--configfile", TEST_CONFIG, "--config", f"catalogue={bad}")
    assert r.returncode != 0 and "duplicate slug 'tiny--t5'" in r.stdout + r.stderr


# ---------------------------------------------------------------- end to end


def test_end_to_end_outputs(test_run):
    finished = test_run.wd
    figures = sorted(p.name for p in (finished / "figures").glob("*.png"))
    expected = {
        "wqk_heatmaps", "scores_vs_params_language", "scores_vs_params_audio", "encdec_stacks",
        "head_distributions", "depth_profile", "training_scores_pydoc", "training_layers_pydoc",
        "training_loss", "spectral_signatures", "rotary_symmetry",
    }  # fmt: skip
    assert {f.removesuffix(".png") for f in figures} == expected
    for name in expected:
        assert (finished / "figures" / f"{name}.pdf").stat().st_size > 1000
    for table in ("scores_all", "scores_language", "robustness"):
        for ext in ("csv", "md", "tex", "html"):
            assert (finished / "results" / "tables" / f"{table}.{ext}").stat().st_size > 0
    md = (finished / "results" / "tables" / "scores_all.md").read_text()
    assert "synthetic" in md  # tiny random models are marked in the outputs
    import pandas as pd

    models = pd.read_parquet(finished / "results" / "aggregate" / "models.parquet")
    for col in ("model", "stack", "objective", "modality", "n_params", "symmetry_median",
                "symmetry_q25", "symmetry_q75", "directionality_median"):  # fmt: skip
        assert col in models.columns
    assert set(models["model"]) >= {"sentence-transformers/all-MiniLM-L6-v2", "openai/whisper-tiny.en"}
    summary = pd.read_csv(finished / "results" / "training" / "summary.csv")
    assert set(summary["step"]) == {0, 10, 20} and summary["run"].nunique() == 5
    assert sorted(summary.loc[summary["init"] == "symmetric", "seed"].unique()) == [0, 1]
    # the symmetric-init table: one row per compared setting, over both seeds, with a verdict
    sym = pd.read_csv(finished / "results" / "tables" / "symmetric_init.csv")
    assert len(sym) == 1 and sym["seeds"].iloc[0] == 2
    assert sym["verdict"].iloc[0] in ("saving beyond seed noise", "within seed noise")
    assert {"fraction_sd", "noise_fraction_max", "final_symmetry_symmetric_sd"} <= set(sym.columns)
    # every run scored its saved steps itself and kept only its last checkpoint
    for run in summary["run"].unique():
        folder = finished / "results" / "training" / "runs" / run
        assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == ["step-000020"], run
        scores = sorted(p.name for p in (finished / "results" / "training" / "scores" / run).iterdir())
        assert scores == ["step-000000.parquet", "step-000010.parquet", "step-000020.parquet"], run
        for name in scores:
            assert (folder / "scores" / name).read_bytes() == (
                finished / "results" / "training" / "scores" / run / name
            ).read_bytes()


def test_nothing_left_to_do_after_a_run(test_run):
    r = snakemake(test_run.wd, "-n", "--cores", "2", "--configfile", TEST_CONFIG)
    assert r.returncode == 0
    assert "Nothing to be done" in r.stdout + r.stderr, job_counts(r.stdout)


def plan_after_editing(workdir: Path, name: str) -> dict[str, int]:
    """The jobs a dry run plans once workflow/wqk/NAME has new bytes (Snakemake 9 compares
    input checksums: a bare `touch` plans nothing); the file is restored afterwards."""
    module = workdir / "workflow" / "wqk" / name
    original = module.read_text()
    try:
        module.write_text(original + "\n# edited\n")
        r = snakemake(workdir, "-n", "--cores", "2", "--configfile", TEST_CONFIG)
    finally:
        module.write_text(original)
        os.utime(module, (0, 0))  # back to older than its outputs
    assert r.returncode == 0, r.stderr[-3000:]
    return job_counts(r.stdout)


def test_editing_one_figure_module_reruns_only_that_figure(test_run):
    finished = test_run.wd
    counts = plan_after_editing(finished, "figures/depth_profile.py")
    assert set(counts) == {"figure_depth_profile", "all"}, counts


def test_editing_the_shared_figure_style_reruns_every_figure_and_no_table(test_run):
    finished = test_run.wd
    counts = plan_after_editing(finished, "figures/__init__.py")
    made = {p.name.removesuffix(".png") for p in (finished / "figures").glob("*.png")}
    assert sum(n for rule, n in counts.items() if rule.startswith("figure_")) == len(made) == 11, counts
    assert {rule for rule in counts if not rule.startswith("figure_")} == {"all"}, counts


def test_editing_shared_figure_code_reruns_exactly_the_figures_that_import_it(test_run):
    finished = test_run.wd
    """figures/scores_vs_params.py is drawn by its own figure (language and audio here) and
    imported by encdec_stacks; report_data.py by figures and tables of both kinds."""
    counts = plan_after_editing(finished, "figures/scores_vs_params.py")
    assert counts == {"figure_scores_vs_params": 2, "figure_encdec_stacks": 1, "all": 1}, counts
    counts = plan_after_editing(finished, "report_data.py")
    assert set(counts) == {
        "figure_scores_vs_params", "figure_encdec_stacks", "figure_training_loss", "figure_training_scores",
        "figure_training_layers", "table_scores_language", "table_symmetric_init", "table_training_finals",
        "table_training_comparison", "all",
    }, counts  # fmt: skip


def test_adding_a_catalogue_line_schedules_only_that_model(test_run):
    finished = test_run.wd
    catalogue = finished / "tests" / "config" / "catalogue.tsv"
    original = catalogue.read_text()
    new_line = (
        "\ttiny/llama\ttiny:llama\t\tLlama (tiny random)\ttext\t\tlanguage\tTrue\t\tautoregressive\t\t\tSYNTHETIC\t\n"
    )
    try:
        catalogue.write_text(original + new_line)
        r = snakemake(finished, "-n", "--cores", "2", "--configfile", TEST_CONFIG)
    finally:
        catalogue.write_text(original)
        os.utime(catalogue, (0, 0))
    assert r.returncode == 0, r.stderr[-3000:]
    counts = job_counts(r.stdout)
    for rule in ("tiny", "score"):
        assert counts.pop(rule) == 1, (rule, counts)
    jobs = planned_jobs(r.stdout)
    per_model = [w for rule, w in jobs if rule in ("tiny", "score")]
    assert per_model and all(w == "slug=tiny--llama" for w in per_model), per_model
    # aggregates and what is drawn from them; not the heatmaps, not the training
    assert set(counts) == {
        "catalogue", "aggregate", "figure_scores_vs_params", "figure_encdec_stacks",
        "figure_head_distributions", "figure_depth_profile", "table_scores_all",
        "table_scores_language", "figure_spectral_signatures", "figure_rotary_symmetry", "table_robustness",
        "aggregate_authors", "validate", "table_paper_comparison", "table_errata", "explorer", "all",
    }, counts  # fmt: skip


# A project that deploys the workflow (README.md, "Deploying the workflow"): its own folder, its
# config, and this Snakefile; the workflow's files stay where they are.
DEPLOYED_SNAKEFILE = """configfile: "config/config.yaml"


module wqk:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from wqk as wqk_*
"""


def deploy(folder: Path, snakefile: Path) -> Path:
    """A project folder holding only a config (the test config, its catalogue beside it, and the
    paper's published facts that validation reads, as snakedeploy copies config/) and the
    Snakefile that uses `snakefile` as a module."""
    import yaml

    (folder / "config").mkdir(parents=True)
    shutil.copytree(ROOT / "config" / "paper", folder / "config" / "paper")
    config = yaml.safe_load((ROOT / TEST_CONFIG).read_text())
    shutil.copy(ROOT / config["catalogue"], folder / "config" / "catalogue.tsv")
    config["catalogue"] = "config/catalogue.tsv"
    (folder / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (folder / "Snakefile").write_text(DEPLOYED_SNAKEFILE.format(snakefile=snakefile))
    return folder


def test_a_run_from_scratch_as_a_deployed_module_is_byte_identical(test_run, tmp_path):
    """Two runs from scratch give the same bytes, and the second runs the workflow as a module
    from a project folder of its own (the paths of the rules resolve against the workflow's
    files, not the working directory), exactly as the run from the checkout."""
    second = deploy(tmp_path / "project", ROOT / "workflow" / "Snakefile")
    r = snakemake(second, "--cores", "2", timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr[-5000:]
    assert sorted(p.name for p in second.iterdir() if not p.name.startswith(".")) == [
        "Snakefile", "benchmarks", "config", "figures", "logs", "results",
    ]  # fmt: skip
    # (nothing of the workflow copied into the project)
    first_digests, second_digests = test_run.digests, digests(second)
    assert len(first_digests) >= 9 * 2 + 2 * 3
    assert first_digests == second_digests, explain_differences(test_run.wd, second)


def test_default_profile_applies_and_a_killed_run_resumes(tmp_path):
    """profiles/default is used with no flag, and its rerun-incomplete lets the rerun after a
    kill go on (after --unlock) where Snakemake alone stops on the half-written output."""
    wd = copy_workflow(tmp_path / "killed")
    target = "results/catalogue.tsv"
    env = environment()
    run = [SNAKEMAKE, target, "--cores", "1", "--configfile", TEST_CONFIG]
    proc = subprocess.Popen(run, cwd=wd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    incomplete = wd / ".snakemake" / "incomplete"
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if incomplete.is_dir() and any(incomplete.iterdir()):  # the job has started
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and its job, as by a power loss
    proc.wait()
    assert incomplete.is_dir() and any(incomplete.iterdir()), "the job finished before it could be killed"
    (wd / target).parent.mkdir(parents=True, exist_ok=True)
    (wd / target).write_text("slug\tmodel_id\n")  # what the job had written when it died

    r = snakemake(wd, *run[1:])
    assert r.returncode != 0 and "cannot be locked" in r.stdout + r.stderr, r.stderr[-3000:]
    assert snakemake(wd, "--unlock", "--configfile", TEST_CONFIG).returncode == 0
    # Snakemake by itself refuses the half-written output...
    r = snakemake(wd, "--workflow-profile", "none", "-n", *run[1:])
    assert r.returncode != 0 and "--rerun-incomplete" in r.stdout + r.stderr, r.stderr[-3000:]
    # ... the default profile, picked up with no flag, reruns its job
    r = snakemake(wd, *run[1:])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "workflow specific profile profiles/default" in r.stderr
    assert len(read_catalogue(wd / target)) == len(read_catalogue(wd / "tests" / "config" / "catalogue.tsv"))


def test_hf_token_stays_out_of_job_command_lines_and_logs(tmp_path):
    """HF_TOKEN is read from the environment by the downloads (local rules), never written
    into a spawned job's command line (visible in `ps`) or into Snakemake's logs."""
    wd = copy_workflow(tmp_path / "token")
    token = "hf_wqkDummyTokenMustNotLeak0123456789"
    r = subprocess.run(
        [SNAKEMAKE, "--cores", "1", "--configfile", TEST_CONFIG, "--verbose", "--printshellcmds", "results/catalogue.tsv"],
        cwd=wd, capture_output=True, text=True, timeout=300,
        env=environment(HF_TOKEN=token),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert (wd / "results" / "catalogue.tsv").is_file()
    # rule catalogue (`run:`) is spawned as `python -m snakemake ...`: the command line checked here
    assert "spawned job:" in r.stdout + r.stderr, "no spawned job command line in the --verbose output"
    logs = sorted((wd / ".snakemake" / "log").glob("*.log"))
    assert logs, "Snakemake wrote no log"
    outputs = [("stdout", r.stdout), ("stderr", r.stderr)] + [(p.name, p.read_text()) for p in logs]
    leaks = [name for name, text in outputs if token in text]
    assert not leaks, f"HF_TOKEN appears in Snakemake's {', '.join(leaks)}"


# ---------------------------------------------------------------- the light env, the report in a browser

# The job env of these rules is workflow/envs/wqk.yaml (torch, transformers); every other
# rule's is the light workflow/envs/analysis.yaml.
FULL_ENV_RULES = {"tiny", "fetch", "score", "corpus", "tokenizer_trained", "tokenizer_pretrained", "train"}
LIGHT_ENV = ROOT / "tests" / "light_env"  # its sitecustomize refuses the model packages
REPORT_SHOTS = Path("/tmp/report_shots")  # copies for a person to look at


def light_rules(workdir: Path, configfile: str) -> list[str]:
    r = snakemake(workdir, "--list-rules", "--configfile", configfile)
    assert r.returncode == 0, r.stderr[-3000:]
    names = [m.group(1) for m in re.finditer(r"^(\w+)", r.stdout, re.M)]
    assert FULL_ENV_RULES <= set(names), sorted(FULL_ENV_RULES - set(names))
    return sorted(set(names) - FULL_ENV_RULES - {"all"})


@pytest.fixture(scope="module")
def light_rerun(test_run, tmp_path_factory) -> dict:
    """A copy of the session's run, then every rule of the light env forced to run again with
    torch, transformers & co. refused at import, in Snakemake and in every job (tests/light_env
    on PYTHONPATH), and its report made as report.html and report.zip the same way. Returns
    what the tests look at."""
    wd = tmp_path_factory.mktemp("light") / "run"
    shutil.copytree(test_run.wd, wd, symlinks=True)
    configfile = test_run.configfile
    before = test_run.digests
    log = wd.parent / "refused.log"
    rules = light_rules(wd, configfile)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(LIGHT_ENV), os.environ.get("PYTHONPATH")])))
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
        mp.setenv("WQK_REFUSED_LOG", str(log))
        started = time.time()
        rerun = snakemake(wd, "--cores", "2", "--configfile", configfile, "--forcerun", *rules, timeout=TIMEOUT)
        html = snakemake(wd, "--configfile", configfile, "--report", "report.html")
        zipped = snakemake(wd, "--configfile", configfile, "--report", "report.zip")
    return dict(wd=wd, before=before, rules=rules, probe=probe, started=started, rerun=rerun, html=html,
                zipped=zipped, refused=log.read_text() if log.exists() else "")  # fmt: skip


def test_light_env_rules_rerun_without_torch_to_the_same_bytes(light_rerun):
    """Aggregation, validation, the training summary, every figure and table and the report
    import none of torch, transformers, safetensors, huggingface_hub, tokenizers: the rules
    of workflow/envs/analysis.yaml rerun with them refused give the same figures and tables."""
    wd, rerun = light_rerun["wd"], light_rerun["rerun"]
    assert light_rerun["probe"].returncode != 0 and "refused: torch" in light_rerun["probe"].stderr
    assert rerun.returncode == 0, rerun.stderr[-5000:]
    assert not light_rerun["refused"], f"imports refused in the light env:\n{light_rerun['refused']}"
    ran = job_counts(rerun.stdout + rerun.stderr)
    assert {"aggregate", "aggregate_authors", "validate", "train_summary"} <= set(ran), ran
    assert not FULL_ENV_RULES & set(ran), ran
    after = digests(wd)
    assert after == light_rerun["before"] and len(after) >= 11 * 2 + 7 * 4
    stale = [name for name in after if (wd / name).stat().st_mtime < light_rerun["started"]]
    assert not stale, f"not made again by the rerun: {stale}"
    for made in ("html", "zipped"):
        assert light_rerun[made].returncode == 0, light_rerun[made].stderr[-3000:]


def report_files(wd: Path) -> dict[str, bytes]:
    """What the report must carry: every figure (its PNG) and every table (its HTML page)."""
    files = sorted((wd / "figures").glob("*.png")) + sorted((wd / "results" / "tables").glob("*.html"))
    return {p.name: p.read_bytes() for p in files}


def test_report_carries_the_comparison_and_errata_tables(light_rerun):
    """`snakemake --report` bundles the comparison with the paper and the errata, captioned,
    beside every figure (the paper's and ours)."""
    assert light_rerun["zipped"].returncode == 0, light_rerun["zipped"].stderr[-3000:]
    with zipfile.ZipFile(light_rerun["wd"] / "report.zip") as z:
        names = z.namelist()
        html = next(z.read(n).decode() for n in names if n.endswith("/report.html"))
    for table in ("paper_comparison.html", "errata.html", "scores_all.html", "symmetric_init.html",
                  "training_comparison.html", "training_finals.html", "robustness.html"):  # fmt: skip
        assert any(n.endswith(f"/{table}") for n in names), (table, names)
    assert "Comparison with the paper" in html  # their category
    assert "Errata: the published medians" in html  # workflow/report/errata.rst
    assert "Our median over layers against the paper" in html  # workflow/report/paper_comparison.rst
    assert "Symmetric initialisation (W_q = W_k at step 0) of the encoders" in html  # report/symmetric_init.rst
    assert sum(n.endswith(".png") for n in names) == 11  # and every figure (the paper's and ours)


def test_report_zip_holds_every_figure_and_table(light_rerun):
    wd = light_rerun["wd"]
    assert light_rerun["zipped"].returncode == 0, light_rerun["zipped"].stderr[-3000:]
    with zipfile.ZipFile(wd / "report.zip") as z:
        held = {Path(n).name: z.read(n) for n in z.namelist() if "/data/" in n}
        assert "report/report.html" in z.namelist()
    expected = report_files(wd)
    assert len(expected) >= 11 + 7
    assert {name: held.get(name) for name in expected} == expected


@pytest.mark.parametrize("form", ["report.html", "report.zip"])
def test_report_in_chromium_lists_and_opens_every_figure_and_table(light_rerun, form, tmp_path, chromium):
    """The report as a reader opens it, in headless Chromium: every figure and table of the
    run is listed under its category and opens (a figure as an image with pixels, a table as
    a page or its file), with the bytes of the file; the page logs no JavaScript error."""
    from report_browser import visit_report

    wd = light_rerun["wd"]
    assert light_rerun[{"report.html": "html", "report.zip": "zipped"}[form]].returncode == 0
    html = wd / "report.html"
    if form == "report.zip":
        with zipfile.ZipFile(wd / "report.zip") as z:
            z.extractall(tmp_path / "unzipped")
        html = tmp_path / "unzipped" / "report" / "report.html"
    visit = visit_report(html, tmp_path / "shots", chromium, copy_to=REPORT_SHOTS / form.replace(".", "_"))
    assert not visit.errors(), visit.errors()
    opened = {e.filename: e for e in visit.entries}
    expected = report_files(wd)
    assert sorted(set(expected) - set(opened)) == [], "not listed, or did not open"
    for name, data in expected.items():
        entry = opened[name]
        assert entry.data == data, f"{name}: the report shows other bytes than the file"
        assert entry.category and entry.labels, name
        if name.endswith(".png"):
            assert entry.shown_as == "img" and entry.rendered, entry
        else:  # a table: its HTML page in a frame, a table a reader can read there
            assert entry.shown_as == "iframe" and entry.rendered and b"<table>" in entry.data, entry
    assert visit.screenshots and all(p.stat().st_size > 10_000 for p in visit.screenshots)
