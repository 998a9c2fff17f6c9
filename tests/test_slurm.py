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
TIMEOUT_S = 600  # for one Snakemake run; `timeout -k` makes sure it ends

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
                "the test SLURM did not start (tests/slurm/slurm_up.sh):\n"
                f"{up.stdout}\n{up.stderr}",
                pytrace=False,
            )
        yield env
    finally:
        subprocess.run(
            ["bash", str(SLURM_DIR / "slurm_down.sh"), str(state)], timeout=60
        )
        lock.close()


def cluster_overrides():
    """The real profile's default-resources, pointed at the test partition.

    The profile's partition and account are placeholders for users to edit; the test
    cluster has partition `debug` and no accounts. Everything else comes from the profile.
    """
    resources = yaml.safe_load((PROFILE_DIR / "profile.yaml").read_text())[
        "default-resources"
    ]
    resources = {k: v for k, v in resources.items() if k != "slurm_account"}
    resources["slurm_partition"] = "debug"
    resources["mem_mb"] = min(int(resources["mem_mb"]), 2000)  # fits the CI node
    return ["--default-resources", *(f"{k}={v}" for k, v in resources.items())]


def snakemake(workdir, env, *args):
    """Run Snakemake in workdir under `timeout -k`; return the completed process."""
    cmd = [
        "timeout", "-k", "10", str(TIMEOUT_S),
        sys.executable, "-m", "snakemake", "--directory", str(workdir), *args,
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    print(f"{' '.join(args[:4])}...: {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 0, (
        f"snakemake exited {proc.returncode} (124/137: timed out)\n"
        f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    )
    return proc


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
    default = profile["default-resources"]
    validate_slurm_extra(Job(default))
    assert set_gres_string(Job(default)) == ""
    for rule in ("score", "score_checkpoint", "train"):
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


COMPARED = ("results/tables/**/*", "results/aggregate/*.csv", "results/scores/*.parquet")


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
    hashes = {}
    for pattern in COMPARED:
        for path in sorted(workdir.glob(pattern)):
            if path.is_file():
                key = str(path.relative_to(workdir))
                hashes[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def test_test_workflow_same_bytes_on_slurm(slurm, tmp_path):
    """The test workflow through --executor slurm gives a local run's results, byte for byte."""
    env = {**slurm, "PATH": f"{Path(sys.executable).parent}:{slurm['PATH']}"}
    config = ["--configfile", "tests/config/test.yaml"]
    local = repo_copy(tmp_path / "local")
    snakemake(local, env, "--workflow-profile", "none", "--cores", "2", *config)
    cluster = repo_copy(tmp_path / "slurm")
    proc = snakemake(cluster, env, *slurm_args(), *config)

    expected = result_hashes(local)
    assert any(k.startswith("results/scores/") for k in expected), expected
    assert any(k.startswith("results/tables/") for k in expected), expected
    assert result_hashes(cluster) == expected
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", proc.stdout + proc.stderr)
    assert len(submitted) >= len(list((cluster / "results/scores").glob("*.parquet")))
