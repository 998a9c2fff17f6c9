"""Rehearse the paper run: config/config.yaml, shrunk by tests/config/rehearsal.yaml (sizes and
step counts only), from a fresh copy of the workflow against the stand-in hub (tests/standin_hub),
to every figure and table the paper config names.

    python tests/rehearse.py                     # all 141 models and 18 training runs
    python tests/rehearse.py --sample            # one model per model_type, the mini runs (CI)
    python tests/rehearse.py --sample --repeat   # ... twice from scratch: the outputs must be byte-identical

Prints the time and the job count of each run. The stand-in serves on free ports; the run's
caches (WQK_CACHE, HF_HOME) live in the work folder, so nothing touches the real caches.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))

from standin_hub import TOKEN, build, red_pajama_url, start  # noqa: E402
from standin_hub.paper_repos import SPECS_BY_ID  # noqa: E402
from wqk.catalogue import load_catalogue, write_catalogue  # noqa: E402

BIN = Path(sys.executable).parent
PAPER_CONFIG = ROOT / "config" / "config.yaml"
OVERLAY = TESTS / "config" / "rehearsal.yaml"
SAMPLE_SIZES = ("mini",)  # the sample trains one size: every objective, init and dataset


def copy_workflow(dest: Path) -> Path:
    """The files a run needs: Snakefile, profiles/ (the default profile), workflow/ (rules,
    schemas, wqk sources), config/, tests/config/, and what `snakemake release` bundles from
    the checkout (CITATION.cff, requirements.lock)."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".snakemake")
    for name in ("Snakefile", "CITATION.cff", "requirements.lock"):
        shutil.copy2(ROOT / name, dest / name)
    for folder in ("profiles", "workflow", "config", "tests/config"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    return dest


def merge(base: dict, over: dict) -> dict:
    """Snakemake's merge of several --configfile files: nested mappings merge, the rest replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def rehearsal_config() -> dict:
    """config/config.yaml with tests/config/rehearsal.yaml merged over it."""
    return merge(yaml.safe_load(PAPER_CONFIG.read_text()), yaml.safe_load(OVERLAY.read_text()))


def paper_models() -> list[dict]:
    return load_catalogue(ROOT / "config" / "catalogue" / "paper.tsv")


def sample_models(config: dict) -> list[str]:
    """One model of every model_type (the first in the catalogue), the models Figure 1 draws,
    and one float16, one bfloat16-sharded and one pytorch_model.bin-only repo."""
    slugs = {config["figures"]["wqk_heatmaps"][k] for k in ("encoder", "decoder")}
    chosen, types = [], set()
    for row in paper_models():
        spec = SPECS_BY_ID[row["model_id"]]
        if spec.model_type not in types or row["slug"] in slugs:
            types.add(spec.model_type)
            chosen.append(row["model_id"])
    for extra in ("openai/whisper-large-v3", "meta-llama/Llama-3.1-8B", "google-t5/t5-11b"):
        if extra not in chosen:
            chosen.append(extra)
    return chosen


def write_config(workdir: Path, hub, hub_root: Path, sample: bool) -> Path:
    config = rehearsal_config()
    config["training"]["jigsaw_dir"] = str(hub_root / "kaggle" / "jigsaw")
    config["training"]["red_pajama_url"] = red_pajama_url(hub)
    if sample:
        keep = set(sample_models(config))
        rows = [r for r in paper_models() if r["model_id"] in keep]
        catalogue = workdir / "config" / "catalogue" / "rehearsal-sample.tsv"
        write_catalogue(rows, catalogue)
        sweeps = [c for c in config["catalogue"] if not c.endswith("/paper.tsv")]  # kept whole: tiny
        config["catalogue"] = [str(catalogue.relative_to(workdir)), *sweeps]
        config["training"]["sizes"] = {k: config["training"]["sizes"][k] for k in SAMPLE_SIZES}
    out = workdir / "rehearsal-config.yaml"
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out


def environment(workdir: Path, hub) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "WQK_", "TRANSFORMERS_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(workdir / "workflow"),  # the jobs' `wqk` imports the copy's package, not the checkout's
        HF_ENDPOINT=hub.url,
        HF_TOKEN=TOKEN,
        HF_HOME=str(workdir / ".cache" / "hf"),
        WQK_CACHE=str(workdir / ".cache" / "wqk"),
    )
    return env


def outputs(workdir: Path) -> dict[str, str]:
    """sha256 of every figure, table and validation file of a run, and of the per-model scores
    and aggregates they are drawn from (so a difference names the step it starts at)."""
    folders = [workdir / "figures", *(workdir / "results" / d for d in ("tables", "validation", "scores", "aggregate"))]
    files = sorted(p for d in folders if d.is_dir() for p in d.iterdir() if p.is_file())
    return {str(p.relative_to(workdir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def run(workdir: Path, hub, hub_root: Path, sample: bool, cores: int = 2, timeout: int = 3600) -> dict:
    """One rehearsal in a fresh copy at workdir: returns seconds, jobs, the outputs' digests and
    the snakemake output (raises CalledProcessError on failure, with its log tail)."""
    copy_workflow(workdir)
    configfile = write_config(workdir, hub, hub_root, sample)
    cmd = [str(BIN / "snakemake"), "--cores", str(cores), "--configfile", str(configfile)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=workdir, env=environment(workdir, hub), capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    if r.returncode:
        raise subprocess.CalledProcessError(r.returncode, cmd, r.stdout, r.stderr[-20000:])
    done = re.search(r"(\d+) of (\d+) steps \(100%\) done", r.stderr)
    return {"seconds": seconds, "jobs": int(done.group(2)) if done else 0, "outputs": outputs(workdir), "log": r.stderr}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/wqk-rehearsal"), help="emptied first")
    p.add_argument("--sample", action="store_true", help="one model per model_type, one model size")
    p.add_argument("--repeat", action="store_true", help="a second run from scratch: outputs byte-identical")
    p.add_argument("--throttle", type=int, default=25, help="the stand-in answers every n-th file request 429 once")
    p.add_argument("--cores", type=int, default=2)
    a = p.parse_args(argv)
    shutil.rmtree(a.workdir, ignore_errors=True)
    hub_root = a.workdir / "standin-hub"
    t0 = time.perf_counter()
    build(hub_root, sample_models(rehearsal_config()) if a.sample else None)
    print(f"stand-in hub built in {time.perf_counter() - t0:.0f} s: {hub_root}", flush=True)
    hub = start(hub_root, throttle=a.throttle)
    try:
        runs = [run(a.workdir / "run-1", hub, hub_root, a.sample, a.cores)]
        print(f"run 1: {runs[0]['jobs']} jobs in {runs[0]['seconds']:.0f} s, {len(runs[0]['outputs'])} outputs")
        if a.repeat:
            runs.append(run(a.workdir / "run-2", hub, hub_root, a.sample, a.cores))
            print(f"run 2: {runs[1]['jobs']} jobs in {runs[1]['seconds']:.0f} s")
            differ = sorted(k for k in runs[0]["outputs"].keys() | runs[1]["outputs"].keys()
                            if runs[0]["outputs"].get(k) != runs[1]["outputs"].get(k))  # fmt: skip
            print("outputs byte-identical" if not differ else f"outputs differ: {differ}")
            if differ:
                return 1
        if hub.cdn.leaked:
            print(f"the token reached the CDN host: {hub.cdn.leaked[:5]}")
            return 1
    except subprocess.CalledProcessError as e:
        print(e.stderr, file=sys.stderr)
        return 1
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
