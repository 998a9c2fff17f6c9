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


def _rows(source: str, encoder: str = "", decoder: str = "") -> list[str]:
    header = "model_id\tsource\tfamily\tmodality\tfigure\tsynthetic\tobjective_encoder\tobjective_decoder"
    return [header, f"m\t{source}\tF\ttext\tlanguage\tTrue\t{encoder}\t{decoder}"]


def _load(tmp_path, lines):
    from wqk.catalogue import load_catalogue

    path = tmp_path / "c.tsv"
    path.write_text("\n".join(lines) + "\n")
    return load_catalogue(path)


def test_tiny_objectives_default_to_the_record_and_are_checked_against_it(tmp_path):
    from wqk.catalogue import CatalogueError

    (row,) = _load(tmp_path, _rows("tiny:t5"))  # the record's objectives fill the empty cells
    assert (row["objective_encoder"], row["objective_decoder"]) == ("bidirectional", "autoregressive")
    (row,) = _load(tmp_path, _rows("tiny:detr", decoder="autoregressive"))  # an override of a stack it has
    assert (row["objective_encoder"], row["objective_decoder"]) == ("", "autoregressive")
    with pytest.raises(CatalogueError, match=r"c\.tsv, line 2, column 'objective_encoder'.*'gpt2' has no encoder"):
        _load(tmp_path, _rows("tiny:gpt2", encoder="bidirectional", decoder="autoregressive"))
    with pytest.raises(
        CatalogueError, match=r"c\.tsv, line 2, column 'source'.*'no_such_arch' is not scored: unknown type"
    ):
        _load(tmp_path, _rows("tiny:no_such_arch", decoder="autoregressive"))


def _hub_rows(model_type: str, encoder: str = "", decoder: str = "") -> list[str]:
    header = "model_id\tsource\tmodel_type\tfamily\tmodality\tfigure\tobjective_encoder\tobjective_decoder"
    return [header, f"org/m\torg/m\t{model_type}\tF\ttext\tlanguage\t{encoder}\t{decoder}"]


def test_a_hub_row_with_a_model_type_gets_the_records_objectives(tmp_path):
    (row,) = _load(tmp_path, _hub_rows("t5"))
    assert (row["model_type"], row["objective_encoder"], row["objective_decoder"]) == (
        "t5",
        "bidirectional",
        "autoregressive",
    )
    (row,) = _load(tmp_path, _hub_rows("gpt2", decoder="autoregressive"))  # given: kept
    assert (row["objective_encoder"], row["objective_decoder"]) == ("", "autoregressive")


@pytest.mark.parametrize(
    "model_type, encoder, match",
    [
        ("gpt2", "bidirectional", r"c\.tsv, line 2, column 'objective_encoder'.*'gpt2' has no encoder"),
        ("no_such_arch", "", r"c\.tsv, line 2, column 'model_type'.*'no_such_arch' is not scored: unknown type"),
        ("deepseek_v3", "", r"c\.tsv, line 2, column 'model_type'.*'deepseek_v3' is not scored: multi-head latent"),
        ("Not A Type", "", r"c\.tsv, line 2, column 'model_type'.*does not match"),
    ],
)
def test_a_hub_row_with_a_model_type_is_checked_against_its_record(tmp_path, model_type, encoder, match):
    from wqk.catalogue import CatalogueError

    with pytest.raises(CatalogueError, match=match):
        _load(tmp_path, _hub_rows(model_type, encoder=encoder, decoder="autoregressive"))


def test_a_tiny_row_whose_model_type_disagrees_with_its_source_is_refused(tmp_path):
    from wqk.catalogue import CatalogueError

    lines = _rows("tiny:gpt2")
    lines = [lines[0] + "\tmodel_type", lines[1] + "\tgpt2"]
    (row,) = _load(tmp_path, lines)
    assert (row["model_type"], row["objective_decoder"]) == ("gpt2", "autoregressive")
    lines[1] = lines[1].removesuffix("gpt2") + "bert"
    with pytest.raises(CatalogueError, match=r"c\.tsv, line 2, column 'model_type': 'bert', but the source builds"):
        _load(tmp_path, lines)


def test_without_the_model_type_column_rows_are_as_before(tmp_path):
    """No model_type key (results/catalogue.tsv keeps its columns), no check of hub rows."""
    from wqk.catalogue import load_catalogue, write_catalogue

    for name in ("paper.tsv", "quickstart.tsv"):
        rows = load_catalogue(ROOT / "config" / "catalogue" / name)
        assert all("model_type" not in row for row in rows), name
        write_catalogue(rows, tmp_path / name)
        assert (tmp_path / name).read_text().splitlines()[0].split("\t")[:3] == ["slug", "model_id", "source"]
        assert load_catalogue(tmp_path / name) == rows
    header = "model_id\tsource\tfamily\tmodality\tfigure\tobjective_encoder\tobjective_decoder"
    (row,) = _load(tmp_path, [header, "org/m\torg/m\tF\ttext\tlanguage\tbidirectional\t"])  # gpt2 or not: unknown
    assert row["objective_encoder"] == "bidirectional"


def test_a_cached_catalogue_is_the_validated_one_and_is_validated_again_after_any_change(tmp_path, monkeypatch):
    """What each member of a SLURM job group reads instead of validating every line again
    (workflow/rules/common.smk): the rows load_catalogues gives, until a catalogue's bytes change."""
    from wqk import catalogue as cat

    paths = [str(ROOT / "config/catalogue/paper.tsv"), str(ROOT / "config/catalogue/sweeps.tsv")]
    cache = tmp_path / "cache"
    rows = cat.load_catalogues_cached(paths, cache)
    assert rows == cat.load_catalogues(paths) and len(list(cache.glob("catalogue-*.json"))) == 1
    validated = []
    real = cat.load_catalogues
    monkeypatch.setattr(cat, "load_catalogues", lambda p: validated.append(p) or real(p))
    assert cat.load_catalogues_cached(paths, cache) == rows and validated == []  # read, not validated
    mine = tmp_path / "catalogue.tsv"
    mine.write_text((ROOT / "tests/config/catalogue.tsv").read_text())
    first = cat.load_catalogues_cached(str(mine), cache)
    mine.write_text(mine.read_text().replace("MiniLM (BERT)", "MiniLM"))  # one cell changed
    second = cat.load_catalogues_cached(str(mine), cache)
    assert validated == [str(mine), str(mine)] and first != second and second == real(str(mine))
    bad = tmp_path / "bad.tsv"
    bad.write_text(mine.read_text().replace("\ttext\t", "\ttxt\t", 1))
    with pytest.raises(cat.CatalogueError, match="column 'modality'"):  # errors are never cached
        cat.load_catalogues_cached(str(bad), cache)
    assert len(list(cache.glob("catalogue-*.json"))) == 3
