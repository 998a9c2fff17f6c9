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
