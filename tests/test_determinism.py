"""wqk.determinism: torch's deterministic switch set without importing the compiler."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, torch
from wqk.determinism import use_deterministic_algorithms
{before}
use_deterministic_algorithms(True, warn_only=True)
print(torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
use_deterministic_algorithms(True)
print(torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
print("torch._inductor" in sys.modules, "torch._dynamo" in sys.modules)
if "torch._inductor.config" in sys.modules:
    print(sys.modules["torch._inductor.config"].deterministic)
use_deterministic_algorithms(False)
print(torch.are_deterministic_algorithms_enabled())
"""


def _probe(before: str = "") -> list[str]:
    r = subprocess.run([sys.executable, "-c", PROBE.format(before=before)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.split("\n")


def test_the_switch_sets_torchs_flags_without_loading_the_compiler():
    lines = _probe()
    assert lines[:4] == ["True True", "True False", "False False", "False"]


def test_where_the_compiler_is_loaded_its_flag_follows():
    lines = _probe("import torch._inductor.config")
    assert lines[:5] == ["True True", "True False", "True True", "True", "False"]
