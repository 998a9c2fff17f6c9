"""The suite's own scheduling (tests/conftest.py): tests that share a fixture wider than a
function are one xdist group, so that fixture is built on one worker, once."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def shared() -> object:
    return object()


def test_tests_sharing_a_module_fixture_are_one_xdist_group(shared, request):
    group = "tests/test_suite_groups.py::shared"
    assert request.node.get_closest_marker("xdist_group").args == (group,)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the group reached the scheduler (pytest-xdist#1386)
        assert request.node.nodeid.endswith(f"@{group}")


def test_a_test_with_function_fixtures_only_is_in_no_group(tmp_path, request):
    assert request.node.get_closest_marker("xdist_group") is None


def test_the_suites_processes_and_the_workflows_they_start_wait_passively():
    """OpenMP threads sleep while they wait (tests/conftest.py): more threads than cores, else
    spinning; a process the suite starts inherits it (a user's own setting is kept)."""
    import subprocess
    import sys

    assert os.environ.get("OMP_WAIT_POLICY", "").upper() in ("PASSIVE", "ACTIVE")  # set, here or by the user
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['OMP_WAIT_POLICY'])"], capture_output=True
    )
    assert child.stdout.decode().strip() == os.environ["OMP_WAIT_POLICY"]


def test_a_failed_byte_identity_names_the_files_and_the_values_that_differ(tmp_path):
    import pandas as pd

    from workflow_runs import explain_differences

    table = pd.DataFrame({"model": ["a", "a"], "scope": ["head", "head"], "layer": [0, 0], "head": [0.0, 1.0],
                          "E_r": [0.5, 0.25], "symmetry": [0.1, 0.2]})  # fmt: skip
    for run, e_r in (("one", 0.25), ("two", 0.25 + 2**-20)):
        (tmp_path / run / "results" / "scores").mkdir(parents=True)
        (tmp_path / run / "results" / "same.txt").write_text("x")
        table.assign(E_r=[0.5, e_r]).to_parquet(tmp_path / run / "results" / "scores" / "a.parquet")
    text = explain_differences(tmp_path / "one", tmp_path / "two")
    assert text.startswith("1 file(s) under results/ differ: ['results/scores/a.parquet']")
    assert "E_r differs in 1 row(s), by up to 3.8e-06 relative" in text
    assert "'head': 1.0" in text and "symmetry" not in text
