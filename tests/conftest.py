"""What the suite makes once per session and every test that needs it reads.

- `test_run`: the test config (tests/config/test.yaml: validation on, the catalogue's
  `licence` column filled for one model) run to completion in a copy of the workflow. The
  end-to-end checks of the workflow, the light env's rerun, the report, the release and the
  explorer, and the SLURM run's comparison all read this one run (in copies where they change
  it); only the byte-identity test runs the config a second time.
- `chromium`: one headless Chromium (selenium) for every page a test opens: the report, the
  explorer.

`pytest -m "not slow"` uses neither: unit and property tests only.

The suite runs on two workers (pytest-xdist, `-n 2 --dist loadgroup` in pyproject.toml; `-n 0`
runs it in one process). Tests that share a fixture wider than a function (these two, a module's
own) are one xdist group, so each such fixture is still built once per session.
"""

from __future__ import annotations

import os

# Two workers on two cores, each running torch on two threads or a workflow whose jobs take two:
# more threads than cores nearly all the time. libgomp's threads spin while they wait for work by
# default, on a core another process needs: a rehearsal's training step took 3x its time beside
# one busy process (20 steps in 3.9 s, 1.5 s with this). Passive threads sleep instead. The policy
# says how a thread waits, not what it computes: the same bits. Set before torch loads libgomp;
# the workflows' jobs inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from rehearse import copy_workflow
from workflow_runs import TEST_CONFIG, TIMEOUT, Run, digests, result_hashes, snakemake


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the node ids
def pytest_collection_modifyitems(items):
    """Put the tests that share a fixture wider than a function into one xdist group.

    Tests are joined when they use a common module- or session-scoped fixture of the suite's own
    (transitively: a test using two such fixtures joins their groups), so the fixture is built
    on one worker only, once. Tests with function-scoped fixtures alone stay ungrouped: any worker.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    shared = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        names = [
            f"{defs[-1].baseid}::{name}"
            for name, defs in (info.name2fixturedefs.items() if info else ())
            if defs and defs[-1].scope != "function" and defs[-1].baseid.startswith("tests")
        ]
        if names:
            shared[item] = names
            for name in names[1:]:
                parent[find(name)] = find(names[0])
    for item, names in shared.items():
        item.add_marker(pytest.mark.xdist_group(find(names[0])))


@pytest.fixture(scope="session")
def test_run(tmp_path_factory) -> Run:
    """The test config run to completion, once per session."""
    wd = copy_workflow(tmp_path_factory.mktemp("test-run") / "run")
    r = snakemake(wd, "--cores", "2", "--configfile", TEST_CONFIG, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr[-5000:]
    return Run(wd=wd, configfile=TEST_CONFIG, digests=digests(wd), results=result_hashes(wd), stderr=r.stderr)


@pytest.fixture(scope="session")
def chromium():
    """A headless Chromium driver (console and network logs kept), shared by every page test."""
    from report_browser import available, headless_chromium

    if reason := available():
        pytest.fail(f"no browser to open pages in: {reason}")
    driver = headless_chromium(1400, 900, network_log=True)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def release_memory():
    """After a test that derives tiny models: the memory the derivation freed handed back to the
    system. glibc keeps freed heap pages for reuse, so a worker deriving hundreds of model types
    grows by the largest of them, one after the other (about 4 GB after NeMo SpeechLM, past 12 GB
    over test_derive_all), and two such workers beside the rehearsal outgrow the machine; with
    the pages trimmed a worker stays near half a gigabyte. What survives the collection is
    reachable, and frozen: later collections skip it (a full one walks the 400,000 objects of
    torch and transformers, 0.14 s a test, a sixth of a derivation's time)."""
    yield
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    gc.freeze()
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
