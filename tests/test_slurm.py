"""The SLURM profile on a real one-node SLURM (tests/slurm/slurm_up.sh).

GPU rules go through sbatch with a GPU request, and the test workflow gives the same
bytes under `--executor slurm` as locally. Needs root and tests/slurm/apt-packages.txt
installed; if the daemons do not come up the tests fail, they never skip.
"""

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from workflow_runs import explain_differences, result_hashes
from wqk.ids import slug

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SLURM_DIR = ROOT / "tests" / "slurm"
PROFILE_DIR = ROOT / "workflow" / "profiles" / "slurm"
TEST_PROFILE = SLURM_DIR / "profile"
TIMEOUT_S = 900  # for one Snakemake run (~4-6 min here); `timeout -k` makes sure it ends

TOY_SNAKEFILE = """
JOB_ENV = "echo job=${{SLURM_JOB_ID:-none}} cuda=${{CUDA_VISIBLE_DEVICES:-none}} > {output}"


rule all:
    input:
        "results/summary.txt",


rule extract:
    output:
        "results/extract.txt",
    shell:
        JOB_ENV


rule score:  # the slurm profile gives it gpu: 1
    input:
        "results/extract.txt",
    output:
        "results/score.txt",
    shell:
        JOB_ENV


rule summary:
    input:
        "results/extract.txt",
        "results/score.txt",
    output:
        "results/summary.txt",
    localrule: True
    shell:
        JOB_ENV
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """Boot slurmctld + slurmd (stopped again by their pid files); yield the env to use."""
    state = tmp_path_factory.mktemp("slurm")
    # one test SLURM per machine (fixed ports, /etc/slurm): wait for a concurrent run
    lock = open("/tmp/wqk-test-slurm.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    up = subprocess.run(
        ["bash", str(SLURM_DIR / "slurm_up.sh"), str(state)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    env = dict(os.environ)
    try:
        if up.returncode != 0:
            pytest.fail(
                f"the test SLURM did not start (tests/slurm/slurm_up.sh):\n{up.stdout}\n{up.stderr}",
                pytrace=False,
            )
        yield env
    finally:
        subprocess.run(["bash", str(SLURM_DIR / "slurm_down.sh"), str(state)], timeout=60)
        lock.close()


def cluster_overrides():
    """The real profile's default-resources, pointed at the test partition.

    The profile's partition and account are placeholders for users to edit; the test
    cluster has partition `debug` and no accounts. Everything else comes from the profile.
    """
    resources = slurm_profile()["default-resources"]
    resources = {k: v for k, v in resources.items() if k != "slurm_account"}
    resources["slurm_partition"] = "debug"
    resources["mem_mb"] = min(int(resources["mem_mb"]), 2000)  # fits the CI node
    return ["--default-resources", *(f"{k}={v}" for k, v in resources.items())]


class Snakemake:
    """Snakemake running in workdir under `timeout -k`, its output going to a file."""

    def __init__(self, workdir, env, *args):
        cmd = [
            "timeout", "-k", "10", str(TIMEOUT_S),
            sys.executable, "-m", "snakemake", "--directory", str(workdir), *args,
        ]  # fmt: skip
        self.workdir, self.log = workdir, workdir / "snakemake.out"
        self.t0 = time.monotonic()
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=out)

    def wait(self):
        while self.proc.poll() is None:
            time.sleep(0.5)
        return self.finished()

    def finished(self):
        if self.proc.poll() is None:
            return None
        if not hasattr(self, "rc"):
            self.rc = self.proc.returncode
            print(f"snakemake in {self.workdir}: {time.monotonic() - self.t0:.1f} s")
        return self

    def output(self):
        """The output of a finished run, or a failure with its tail."""
        text = self.log.read_text()
        assert self.rc == 0, f"snakemake in {self.workdir} exited {self.rc} (124/137: timed out)\n{text[-6000:]}"
        return text


def snakemake(workdir, env, *args):
    return Snakemake(workdir, env, *args).wait().output()


def slurm_args():
    return [
        "--workflow-profile", str(PROFILE_DIR),
        "--profile", str(TEST_PROFILE),
        *cluster_overrides(),
    ]  # fmt: skip


def scontrol(env, *args):
    return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, check=True).stdout


def test_profile_files_identical_and_valid():
    """config.yaml (older 9.x) and profile.yaml (9.19+) agree, and the plugin's own checks
    accept every rule's resources: GPUs as resources (--gpus=1), none via slurm_extra."""
    from snakemake_executor_plugin_slurm.utils import set_gres_string
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    class Resources(dict):  # what the plugin reads: job.resources.get(k) and .k
        __getattr__ = dict.get

    class Job:
        def __init__(self, resources):
            self.resources = Resources(resources)

    text = (PROFILE_DIR / "profile.yaml").read_text()
    assert (PROFILE_DIR / "config.yaml").read_text() == text
    assert (TEST_PROFILE / "config.yaml").read_text() == (TEST_PROFILE / "profile.yaml").read_text()
    profile = yaml.safe_load(text)
    assert profile["executor"] == "slurm"
    # downloads are capped as in the default profile (rule fetch asks for hub_downloads=1)
    local = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert profile["resources"]["hub_downloads"] == local["resources"]["hub_downloads"] == 4
    default = profile["default-resources"]
    validate_slurm_extra(Job(default))
    assert set_gres_string(Job(default)) == ""
    # scoring is batched (README.md, "On a SLURM cluster"): a batch may use one GPU at a time, and
    # only a batch (gpu scoped local: the run as a whole is not limited to one GPU job)
    assert profile["groups"] == {"score": "score_batch"} and batch_size() > 1
    assert profile["resources"]["gpu"] == 1 and profile["set-resource-scopes"] == {"gpu": "local"}
    for rule in ("score", "train"):
        job = Job({**default, **profile["set-resources"][rule]})
        validate_slurm_extra(job)
        assert set_gres_string(job) == " --gpus=1", rule


def test_slurm_runs_gpu_rule(slurm, tmp_path):
    """The profile's gpu: 1 for `score` reaches sbatch; other rules get no GPU."""
    (tmp_path / "Snakefile").write_text(TOY_SNAKEFILE)
    snakemake(tmp_path, slurm, *slurm_args())

    def job_env(rule):
        text = (tmp_path / f"results/{rule}.txt").read_text()
        return dict(word.split("=", 1) for word in text.split())

    extract, score = job_env("extract"), job_env("score")
    assert extract["job"].isdigit() and score["job"].isdigit(), (extract, score)
    assert extract["job"] != score["job"]
    assert job_env("summary")["job"] == "none"  # the local rule ran where Snakemake runs
    assert score["cuda"] == "0" and extract["cuda"] == "none", (score, extract)
    score_job = scontrol(slurm, "show", "job", score["job"])
    extract_job = scontrol(slurm, "show", "job", extract["job"])
    assert "TresPerJob=gres:gpu:1" in score_job, score_job
    assert "gres:gpu" not in extract_job, extract_job
    assert "JobState=COMPLETED" in score_job, score_job


def repo_copy(dest):
    """The working tree as git sees it (tracked and untracked, not ignored) copied to dest."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_test_workflow_same_bytes_on_slurm(slurm, test_run, tmp_path):
    """The test workflow through --executor slurm gives the session's local run's results
    (tests/conftest.py), byte for byte.

    Figures are switched off in the SLURM run: they are local rules either way, and nothing
    under results/ is drawn from them."""
    env = {**slurm, "PATH": f"{Path(sys.executable).parent}:{slurm['PATH']}"}
    workdir = repo_copy(tmp_path / "slurm")
    config = yaml.safe_load((workdir / test_run.configfile).read_text())
    config["activate"]["figures"] = False
    (workdir / "test-slurm.yaml").write_text(yaml.safe_dump(config))
    output = snakemake(workdir, env, "--configfile", "test-slurm.yaml", *slurm_args())

    expected, got = test_run.results, result_hashes(workdir)
    for part in ("scores/", "aggregate/", "tables/", "training/", "validation/"):
        assert any(k.startswith(f"results/{part}") for k in expected), (part, sorted(expected))
    differ = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
    assert not differ, explain_differences(test_run.wd, workdir)
    # the scores went to SLURM in batches: one submission for each batch of them
    n_scores = len(list((workdir / "results/scores").glob("*.parquet")))
    batches = re.findall(rf"submitted with SLURM jobid \d+ \(log: .*/slurm_logs/{batch_log_folder()}/", output)
    assert len(batches) == -(-n_scores // batch_size()), output[-6000:]


def slurm_profile() -> dict:
    """The real SLURM profile, as users get it."""
    return yaml.safe_load((PROFILE_DIR / "profile.yaml").read_text())


def score_group():
    """The profile's group of score jobs."""
    return slurm_profile()["groups"]["score"]


def batch_size():
    """The profile's batch of score jobs: its group's group-components."""
    return slurm_profile()["group-components"][score_group()]


def batch_log_folder():
    """Where the plugin logs a batch: .snakemake/slurm_logs/group_<group>_<its rules>/."""
    return f"group_{score_group()}_score"


def same_model_catalogue(path, folder, n):
    """n catalogue lines naming one tiny random checkpoint folder: n score jobs, and no tiny or
    fetch jobs (the catalogue refuses a model_id twice, never a source)."""
    header, *_ = (line for line in (ROOT / "tests/config/catalogue.tsv").read_text().splitlines() if line[0] != "#")
    columns = header.split("\t")
    rows = []
    for i in range(n):
        row = dict.fromkeys(columns, "")
        row.update(
            model_id=f"tiny/gpt2-copy-{i:02d}", source=str(folder), family="GPT-2 (tiny random)",
            modality="text", figure="language", synthetic="True", objective_decoder="autoregressive",
        )  # fmt: skip
        rows.append("\t".join(row[c] for c in columns))
    path.write_text("\n".join([header, *rows]) + "\n")
    return [slug(f"tiny/gpt2-copy-{i:02d}") for i in range(n)]


def test_slurm_batches_scoring(slurm, tmp_path):
    """5 models through the real SLURM, the profile's batch group resized to 3 on the command line
    (the profile's 20 would take 21 models, minutes more, for the same check): their score jobs go
    in batches (a full one and the rest), one sbatch each, and a batch asks for one GPU (not one
    per model), the CPUs of one score job and the summed runtime of its models."""
    n_models, size = 5, 3
    assert batch_size() > size  # the profile's own batches are bigger: the override is what is tested
    env = {**slurm, "PATH": f"{Path(sys.executable).parent}:{slurm['PATH']}"}
    workdir = repo_copy(tmp_path / "work")
    folder = tmp_path / "tiny-gpt2"
    subprocess.run(["wqk", "tiny", "gpt2", "--out", str(folder), "--seed", "0"], env=env, check=True)
    slugs = same_model_catalogue(workdir / "batch-catalogue.tsv", folder, n_models)
    config = yaml.safe_load((workdir / "tests/config/test.yaml").read_text())
    config["catalogue"] = "batch-catalogue.tsv"
    config["activate"] = dict.fromkeys(config["activate"], False)  # scores and aggregates only
    (workdir / "batch.yaml").write_text(yaml.safe_dump(config))
    resize = ["--group-components", f"{score_group()}={size}"]
    output = snakemake(workdir, env, "--configfile", "batch.yaml", *slurm_args(), *resize)

    assert all((workdir / f"results/scores/{s}.parquet").is_file() for s in slugs)
    # every member of a batch is a `snakemake` of its own that parses the workflow: it read the
    # catalogue the first parse validated (wqk.catalogue.load_catalogues_cached), writing nothing
    (cached,) = (workdir / ".snakemake" / "wqk").glob("catalogue-*.json")
    first_scores = min((workdir / f"results/scores/{s}.parquet").stat().st_mtime for s in slugs)
    assert cached.stat().st_mtime < first_scores
    assert pd.read_parquet(workdir / "results/aggregate/models.parquet")["slug"].nunique() == n_models
    # each submission names its log folder: group_<group>_<rule> for a batch, rule_<rule> else
    submitted = re.findall(r"submitted with SLURM jobid (\d+) \(log: .*/slurm_logs/(\w+)/", output)
    by_kind = {}
    for job_id, kind in submitted:
        by_kind.setdefault(kind, []).append(job_id)
    profile = slurm_profile()
    batches = batch_log_folder()
    expected = {batches: -(-n_models // size), "rule_aggregate": 1}
    assert {kind: len(ids) for kind, ids in by_kind.items()} == expected, output[-6000:]
    assert len(re.findall("submitted with SLURM jobid", output)) == sum(expected.values()) < n_models

    # the last batch (SLURM forgets finished jobs after MinJobAge, 300 s); its script names its models
    last = max(by_kind[batches], key=int)
    fields = dict(re.findall(r"(\w+)=(\S*)", scontrol(slurm, "show", "job", last)))
    members = re.findall(r"'score:slug=([^']+)'", scontrol(slurm, "write", "batch_script", last, "-"))
    assert 0 < len(members) <= size and set(members) <= set(slugs), members
    assert fields["JobState"] == "COMPLETED", fields
    assert fields["TresPerJob"] == "gres:gpu:1", fields
    # what one score job asks (threads 2, mem_mb 8000: workflow/rules/models.smk), not the members' sum
    assert fields["NumCPUs"] == "2" and fields["MinMemoryNode"] == "8000M", fields
    hours, minutes = divmod(len(members) * profile["set-resources"]["score"]["runtime"], 60)
    assert fields["TimeLimit"] == f"{hours:02d}:{minutes:02d}:00", fields
