"""Catalogue facts that can drift from the code: parameter counts of the tiny models."""

import csv
from pathlib import Path

import pytest

from wqk.tiny import tiny_model

ROOT = Path(__file__).resolve().parents[1]


def tiny_rows():
    for path in (ROOT / "config/catalogue/quickstart.tsv", ROOT / "tests/config/catalogue.tsv"):
        lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
        for row in csv.DictReader(lines, delimiter="\t"):
            if row["source"].startswith("tiny:"):
                yield pytest.param(row, id=f"{path.name}:{row['source']}")


@pytest.mark.parametrize("row", list(tiny_rows()))
def test_tiny_parameter_counts_match_the_built_models(row):
    assert row["synthetic"] == "True"
    assert int(row["n_params"]) == tiny_model(row["source"].removeprefix("tiny:")).num_parameters()
