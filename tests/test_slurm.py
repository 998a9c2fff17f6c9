"""The SLURM profile on a real one-node SLURM (tests/slurm/slurm_up.sh).

GPU rules go through sbatch with a GPU request, and the test workflow gives the same
bytes under `--executor slurm` as locally. Needs root and tests/slurm/apt-packages.txt
installed; if the daemons do not come up the tests fail, they never skip.
"""

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

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
    resources = yaml.safe_load((PROFILE_DIR / "profile.yaml").read_text())["default-resources"]
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

    def scontrol(job_id):
        return subprocess.run(
            ["scontrol", "show", "job", job_id],
            env=slurm, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip

    extract, score = job_env("extract"), job_env("score")
    assert extract["job"].isdigit() and score["job"].isdigit(), (extract, score)
    assert extract["job"] != score["job"]
    assert job_env("summary")["job"] == "none"  # the local rule ran where Snakemake runs
    assert score["cuda"] == "0" and extract["cuda"] == "none", (score, extract)
    score_job, extract_job = scontrol(score["job"]), scontrol(extract["job"])
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


def result_hashes(workdir):
    """sha256 of every file under results/ (scores, aggregates, tables, training runs)."""
    return {
        str(path.relative_to(workdir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((workdir / "results").rglob("*"))
        if path.is_file()
    }


def test_test_workflow_same_bytes_on_slurm(slurm, tmp_path):
    """The test workflow through --executor slurm gives a local run's results, byte for byte.

    Figures are switched off in both runs: they are local rules either way. The two runs go
    side by side (the SLURM one mostly waits on polls)."""
    env = {**slurm, "PATH": f"{Path(sys.executable).parent}:{slurm['PATH']}"}
    runs = {}
    for kind in ("slurm", "local"):
        workdir = repo_copy(tmp_path / kind)
        config = yaml.safe_load((workdir / "tests/config/test.yaml").read_text())
        config["activate"]["figures"] = False
        (workdir / "test-slurm.yaml").write_text(yaml.safe_dump(config))
        args = ["--configfile", "test-slurm.yaml"]
        args += slurm_args() if kind == "slurm" else ["--workflow-profile", "none", "--cores", "2"]
        runs[kind] = Snakemake(workdir, env, *args)
    while not all([run.finished() for run in runs.values()]):  # both end before any check
        time.sleep(0.5)
    output = {kind: run.output() for kind, run in runs.items()}

    expected, got = result_hashes(runs["local"].workdir), result_hashes(runs["slurm"].workdir)
    for part in ("scores/", "aggregate/", "tables/", "training/"):
        assert any(k.startswith(f"results/{part}") for k in expected), (part, sorted(expected))
    differ = sorted(k for k in expected.keys() | got.keys() if expected.get(k) != got.get(k))
    assert not differ, f"results differ between the local and the SLURM run: {differ}"
    n_scores = len(list((runs["slurm"].workdir / "results/scores").glob("*.parquet")))
    assert len(re.findall(r"submitted with SLURM jobid \d+", output["slurm"])) > n_scores
