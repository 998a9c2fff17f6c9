"""What the suite makes once per session and every test that needs it reads.

- `test_run`: the test config (tests/config/test.yaml: validation on, the catalogue's
  `licence` column filled for one model) run to completion in a copy of the workflow. The
  end-to-end checks of the workflow, the light env's rerun, the report, the release and the
  explorer, and the SLURM run's comparison all read this one run (in copies where they change
  it); only the byte-identity test runs the config a second time.
- `chromium`: one headless Chromium (selenium) for every page a test opens: the report, the
  explorer.

`pytest -m "not slow"` uses neither: unit and property tests only.
"""

from __future__ import annotations

import pytest

from rehearse import copy_workflow
from workflow_runs import TEST_CONFIG, TIMEOUT, Run, digests, result_hashes, snakemake


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
