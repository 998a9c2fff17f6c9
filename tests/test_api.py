"""`import wqk; wqk.score(...)`: the public Python API."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import tomllib
import torch

import wqk
from wqk.checkpoints.memory import open_model
from wqk.cli import main
from wqk.tiny import build_tiny, tiny_model

ROOT = Path(__file__).resolve().parents[1]


def test_import_wqk_loads_neither_torch_nor_pandas():
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import wqk; wqk.score, wqk.slug, wqk.__version__"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "wqk" in imported
    heavy = sorted(m for m in imported if m.split(".")[0] in {"torch", "pandas", "transformers"})
    assert not heavy, heavy


def test_the_public_names():
    assert {"score", "slug", "__version__"} <= set(wqk.__all__)
    assert all(hasattr(wqk, name) for name in wqk.__all__)
    assert wqk.score.__doc__ and wqk.score.__annotations__["return"]
    assert issubclass(wqk.WqkError, Exception)


def test_the_type_marker_ships_with_the_package():
    assert (Path(wqk.__file__).parent / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["wqk"]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return build_tiny("llama", tmp_path_factory.mktemp("api") / "tiny-llama")


def test_score_of_a_folder_is_the_command_line_s(tiny_llama, tmp_path):
    """`wqk.score(FOLDER)` holds what `wqk score FOLDER` writes, number for number; a
    matrices file extracted from it scores the same."""
    out, matrices = tmp_path / "scores.parquet", tmp_path / "m.parquet"
    assert main(["score", str(tiny_llama), "--out", str(out), "--device", "cpu", "--quiet"]) == 0
    written = pd.read_parquet(out)
    written["head"] = written["head"].astype("Int32")
    got = wqk.score(tiny_llama, device="cpu")  # a Path; its text is the model name, as on the command line
    pd.testing.assert_frame_equal(got, written)
    assert got["symmetry"].notna().all() and got["synthetic"].all()
    assert main(["extract", str(tiny_llama), "--out", str(matrices)]) == 0
    pd.testing.assert_frame_equal(wqk.score(str(matrices), device="cpu"), written)


# The class loaded from a folder saved from the tiny task-head class: a bare base model's
# state_dict lacks the "bert." / "model." prefix that the saved checkpoint carries.
LOADED = [("bert", "BertModel"), ("gpt2", "GPT2LMHeadModel"), ("llama", "LlamaForCausalLM"), ("llama", "LlamaModel")]


@pytest.mark.parametrize(("model_type", "cls"), LOADED, ids=[c for _, c in LOADED])
def test_a_loaded_model_scores_as_its_checkpoint(model_type, cls, tmp_path):
    import transformers

    folder = build_tiny(model_type, tmp_path / model_type)
    model = getattr(transformers, cls).from_pretrained(folder)
    names = list(model.state_dict())
    if cls in ("BertModel", "LlamaModel"):
        assert not any(n.startswith(("bert.", "model.")) for n in names)
    from_model = wqk.score(model, device="cpu")
    from_folder = wqk.score(folder, device="cpu")
    same = [c for c in from_folder.columns if c not in ("model", "provenance")]
    pd.testing.assert_frame_equal(from_model[same], from_folder[same])
    assert (from_model["model"] == str(folder)).all()  # config.name_or_path
    assert from_model["provenance"].iloc[0].startswith("xxh3:") and from_model["synthetic"].all()
    assert (from_model["scope"] == "layer").sum() == {"bert": 2, "gpt2": 2, "llama": 2}[model_type]


def test_a_model_built_in_memory_and_its_fingerprint():
    model = tiny_model("bert", architecture="BertModel")
    scores = wqk.score(model, name="my-bert", device="cpu")
    assert set(scores["model"]) == {"my-bert"} and set(scores["model_type"]) == {"bert"}
    assert wqk.score(model, device="cpu")["model"].iloc[0] == "BertModel"  # no name_or_path: the class
    before = open_model(model).provenance()
    assert open_model(model).provenance() == before == scores["provenance"].iloc[0]
    with torch.no_grad():
        model.encoder.layer[0].attention.self.query.weight[0, 0] += 1
    assert open_model(model).provenance() != before


def test_scoring_a_model_walks_down_the_package():
    """No call climbs back into a module already on the stack (the store sits below the adapters)."""
    from call_walk import climbs

    assert climbs(wqk.score, tiny_model("llama"), device="cpu") == []


def test_what_is_not_a_source():
    with pytest.raises(TypeError, match="transformers model"):
        wqk.score(42)
    with pytest.raises(wqk.WqkError):
        wqk.score("tiny:llama")
