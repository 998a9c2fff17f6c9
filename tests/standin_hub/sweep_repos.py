"""A model its authors published along its training, for revision sweeps (wqk.sweeps):
EleutherAI/pythia-160m's repo with the branches the real one has, `step0`, `step1`, `step2`,
`step4` ... `step512`, `step1000` ... `step143000` (154), and main at the last step.

Each branch is a tiny GPT-NeoX (the real model_type, class and float16) whose weights move from
one random model to another as the step grows (a fraction log(1 + N) / log(1 + 143000) of the
way): scores that change smoothly along the sweep, so that a revision scored out of its place
shows. RANDOM weights: nothing here is data.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from .paper_repos import Spec, _write_weights, build_model

PYTHIA = "EleutherAI/pythia-160m"
PYTHIA_STEPS = (0, *(2**i for i in range(10)), *range(1000, 143_001, 1000))
SPEC = Spec(PYTHIA, "gpt_neox", "GPTNeoXForCausalLM", "float16")


def branch(step: int) -> str:
    return f"step{step}"


def manifest_entries() -> dict[str, dict]:
    """The sweep repos' manifest entries (stand-in server.py: "branches")."""
    return {PYTHIA: {"gated": False, "branches": [branch(s) for s in PYTHIA_STEPS]}}


def _weights_at(start: dict, end: dict, step: int) -> dict:
    t = math.log1p(step) / math.log1p(PYTHIA_STEPS[-1])
    return {k: ((1 - t) * v.float() + t * end[k].float()).to(v.dtype) if v.is_floating_point() else v
            for k, v in start.items()}  # fmt: skip


def write_sweep_repos(root: Path) -> None:
    """The repo at root/models/<id> (main: the last step, the same commit as its branch, as on
    the hub) and its branches at root/branches/models/<id>/<branch>."""
    start, config = build_model(SPEC)
    end, _ = build_model(replace(SPEC, model_id=f"{PYTHIA} (end of training)"))
    folders = {branch(s): root / "branches" / "models" / PYTHIA / branch(s) for s in PYTHIA_STEPS}
    folders["main"] = root / "models" / PYTHIA
    for name, folder in folders.items():
        step = PYTHIA_STEPS[-1] if name == "main" else int(name.removeprefix("step"))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True, default=str))
        _write_weights(folder, _weights_at(start, end, step), SPEC.shards, SPEC.fmt)
        (folder / "README.md").write_text(
            f"# {PYTHIA} at step {step} (stand-in)\n\nTiny RANDOM weights in the layout of the real repo; not the model.\n"
        )


def build_sweep_hub(root: Path) -> Path:
    """A stand-in hub root holding only the sweep repos (for tests of sweeps alone)."""
    root = Path(root)
    write_sweep_repos(root)
    (root / "manifest.json").write_text(json.dumps({"models": manifest_entries()}, indent=1, sort_keys=True))
    return root
