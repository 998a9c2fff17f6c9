"""Errors and exit codes: a wrong number never passes silently, a bad input or output is one
line naming the way out (before the work), and the exit code says which kind of failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

import wqk
from wqk.cli import main
from wqk.contracts import quartiles
from wqk.errors import SourceUnavailable, WqkError
from wqk.tiny import build_tiny

ROOT = Path(__file__).resolve().parents[1]


def one_line_error(argv, capsys, code: int = 1) -> str:
    """The single `wqk CMD: error: ...` line of a failed run (exit `code`, no traceback)."""
    capsys.readouterr()
    assert main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.startswith("wqk ")]
    assert len(lines) == 1 and ": error: " in lines[0], err
    return lines[0]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    return build_tiny("llama", tmp_path_factory.mktemp("llama") / "tiny")


# --- 1. a zero matrix is NaN with a reason, never a score of 0 ---------------------------------


@pytest.fixture(scope="module")
def zero_layer_llama(tiny_llama, tmp_path_factory) -> Path:
    """The tiny llama with W_k of layer 0 all zeros."""
    folder = tmp_path_factory.mktemp("zero") / "llama"
    folder.mkdir()
    (folder / "config.json").write_bytes((tiny_llama / "config.json").read_bytes())
    tensors = load_file(tiny_llama / "model.safetensors")
    tensors["model.layers.0.self_attn.k_proj.weight"] = torch.zeros_like(
        tensors["model.layers.0.self_attn.k_proj.weight"]
    )
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("path", ["factored", "dense"])
def test_zero_key_layer_is_nan_with_reason_and_left_out_of_the_median(
    zero_layer_llama, tiny_llama, tmp_path, capsys, monkeypatch, path
):
    import wqk.metrics

    if path == "dense":  # the per-layer form M formed explicitly (score_dense)
        monkeypatch.setattr(wqk.metrics, "_dense_is_cheaper", lambda *a: True)
    out, good = tmp_path / "zero.parquet", tmp_path / "good.parquet"
    assert main(["score", str(zero_layer_llama), "--out", str(out), "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert main(["score", str(tiny_llama), "--out", str(good), "--device", "cpu", "--quiet"]) == 0
    df, ref = pd.read_parquet(out), pd.read_parquet(good)

    zero = df[df["layer"] == 0]
    assert len(zero) == 1 + 8  # the layer and its 8 query heads
    assert zero["symmetry"].isna().all() and zero["directionality"].isna().all()
    assert zero["reason"].str.startswith("zero matrix").all(), zero["reason"].tolist()
    assert (zero["fro_norm"] == 0).all()
    rest = df[df["layer"] == 1]
    assert rest["reason"].isna().all()
    cols = ["scope", "head", "symmetry", "directionality", "fro_norm", "E_r", "E_c", "reason"]
    pd.testing.assert_frame_equal(
        rest[cols].reset_index(drop=True), ref[ref["layer"] == 1][cols].reset_index(drop=True)
    )

    # the median over layers is layer 1's score alone, not its mean with a zero
    layers = df[df["scope"] == "layer"]
    d1 = float(layers.loc[layers["layer"] == 1, "directionality"].iloc[0])
    assert d1 != 0
    assert quartiles(layers["directionality"])[0] == d1
    median_line = printed.strip().splitlines()[-1].split()
    assert median_line[0] == "median" and median_line[2] == f"{d1:+.4f}"


def test_nonzero_matrix_with_nothing_above_the_threshold_has_directionality_zero():
    """E_r + E_c = 0 for a non-zero matrix (all row and column norms equal) is a real 0."""
    from wqk.metrics import score_dense, score_factors

    eye = torch.eye(16, dtype=torch.float64)
    for out in (score_dense(eye), score_factors(eye, eye)):
        assert out["directionality"][0] == 0.0 and out["E_r"][0] == out["E_c"][0] == 0.0
        assert out["symmetry"][0] == pytest.approx(1.0) and out["reason"] == [None]
    zero = score_dense(torch.zeros(16, 16))
    assert np.isnan(zero["directionality"][0]) and zero["reason"][0].startswith("zero matrix")


# --- 3. outputs checked before the work; unreadable inputs are one line ----------------------

# a figure's --out names OUT.pdf and OUT.png, a table's STEM.csv, .md and .tex: "folder" is fine
FOLDER_AS_FILE = {"figure": "folder.pdf", "table": "folder.csv"}
FILE_OUTPUTS = {
    "score": lambda out: ["score", "./no-such-model", "--out", out],
    "score --matrices-out": lambda out: ["score", "./no-such-model", "--out", "s.parquet", "--matrices-out", out],
    "score --null-out": lambda out: ["score", "./no-such-model", "--out", "s.parquet", "--null-out", out],
    "extract": lambda out: ["extract", "./no-such-model", "--out", out],
    "null": lambda out: ["null", "--scores", "no-such.parquet", "--out", out],
    "figure": lambda out: ["figure", "depth_profile", "--in", "layers=no-such.parquet", "--out", out],
    "table": lambda out: ["table", "scores_all", "--in", "models=no-such.parquet", "--out", out],
    "validate": lambda out: ["validate", "--models", "x", "--published", "x", "--paper-models", "x", "--out", out],
    "train-summary": lambda out: ["train-summary", "--runs", "no-such-run", "--out", out],
    "corpus": lambda out: ["corpus", "--name", "jigsaw", "--jigsaw-dir", "no-such-dir", "--out", out],
}
FOLDER_OUTPUTS = {
    "tiny": lambda out: ["tiny", "no_such_type", "--out", out],
    "fetch": lambda out: ["fetch", "pypi:no-such-package", "--out", out],
    "aggregate": lambda out: ["aggregate", "--scores", "x.parquet", "--catalogue", "x.tsv", "--out-dir", out],
    "tokenizer": lambda out: ["tokenizer", "--corpus", "no-such.txt", "--out", out],
    "train": lambda out: ["train", "--corpus", "x", "--tokenizer", "x", "--objective", "bidirectional", "--out", out],
}


@pytest.fixture
def bad_outputs(tmp_path, monkeypatch):
    """Output paths that cannot be written, with a word the error must contain. Read-only:
    os.access says no for that folder (root writes anywhere that is not a read-only mount)."""
    monkeypatch.chdir(tmp_path)
    for folder in ("folder", *FOLDER_AS_FILE.values()):
        Path(folder).mkdir()
    Path("a-file").write_text("x")
    Path("loop").symlink_to("loop")
    Path("ro").mkdir()
    real_access = os.access
    readonly = str(tmp_path / "ro")

    def access(path, mode, **kw):
        if os.path.abspath(path) == readonly and mode & os.W_OK:
            return False
        return real_access(path, mode, **kw)

    monkeypatch.setattr(os, "access", access)
    return {
        "empty": ("", "empty"),
        "under a file": ("a-file/out.x", "a-file is a file"),
        "under a symlink loop": ("loop/out.x", "symlink loop"),
        "in a read-only folder": ("ro/sub/out.x", "cannot write"),
    }


@pytest.mark.parametrize("command", list(FILE_OUTPUTS))
def test_unwritable_file_output_is_one_line_before_the_work(command, bad_outputs, capsys):
    cases = dict(bad_outputs, **{"a folder": (FOLDER_AS_FILE.get(command, "folder"), "is a folder")})
    before = sorted(os.listdir())
    for case, (out, word) in cases.items():
        err = one_line_error(FILE_OUTPUTS[command](out), capsys)
        assert word in err and "no-such" not in err and "no such" not in err, (case, err)
    assert sorted(os.listdir()) == before  # nothing written


@pytest.mark.parametrize("command", list(FOLDER_OUTPUTS))
def test_unwritable_folder_output_is_one_line_before_the_work(command, bad_outputs, capsys):
    cases = dict(bad_outputs, **{"a file": ("a-file", "is a file")})
    before = sorted(os.listdir())
    for case, (out, word) in cases.items():
        err = one_line_error(FOLDER_OUTPUTS[command](out), capsys)
        assert word in err and "no-such" not in err and "no_such" not in err, (case, err)
    assert sorted(os.listdir()) == before


def test_check_writable_accepts_what_can_be_written(tmp_path):
    from wqk.atomic import check_writable

    assert check_writable(tmp_path / "new" / "deeper" / "s.parquet") == tmp_path / "new" / "deeper" / "s.parquet"
    (tmp_path / "old.parquet").write_text("replaced atomically")
    assert check_writable(tmp_path / "old.parquet") == tmp_path / "old.parquet"
    assert check_writable(tmp_path, folder=True) == tmp_path
    with pytest.raises(WqkError, match="--null-out .* is a folder"):
        check_writable(tmp_path, "--null-out")


def test_truncated_matrices_parquet_is_one_line(tiny_llama, tmp_path, capsys):
    m = tmp_path / "m.parquet"
    assert main(["extract", str(tiny_llama), "--out", str(m)]) == 0
    m.write_bytes(m.read_bytes()[: m.stat().st_size // 2])
    err = one_line_error(["score", str(m), "--out", str(tmp_path / "s.parquet")], capsys)
    assert str(m) in err and "truncated" in err and "wqk extract" in err
    assert not (tmp_path / "s.parquet").exists()


def test_truncated_scores_parquet_is_one_line(tiny_llama, tmp_path, capsys):
    s = tmp_path / "s.parquet"
    assert main(["score", str(tiny_llama), "--out", str(s), "--quiet"]) == 0
    s.write_bytes(s.read_bytes()[:100])
    err = one_line_error(["null", "--scores", str(s), "--out", str(tmp_path / "n.parquet")], capsys)
    assert str(s) in err and "truncated" in err


def test_cuda_without_a_gpu_fails_before_fetching(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # were it asked, the hub would be unreachable
    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "cache"))
    argv = ["score", "someorg/some-model", "--device", "cuda", "--out", str(tmp_path / "s.parquet")]
    err = one_line_error(argv, capsys)
    assert "--device cuda" in err and "CUDA" in err and "someorg" not in err


def test_cuda_without_a_gpu_in_null_and_train_summary(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for argv in (
        ["null", "--scores", "no-such.parquet", "--device", "cuda", "--out", str(tmp_path / "n.parquet")],
        ["train-summary", "--runs", "no-such-run", "--device", "cuda", "--out", str(tmp_path / "s.csv")],
    ):
        assert "--device cuda" in one_line_error(argv, capsys)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["figure", "depth_profile", "--param", "nosuch=1"], ["--param nosuch", "bins", "stacks"]),
        (["figure", "depth_profile", "--param", "bins=many"], ["--param bins", "'many'", "int"]),
        (["figure", "depth_profile", "--param", "bins=[1,"], ["--param bins", "YAML"]),
        (["table", "scores_language", "--param", "modality=text", "colour=red"], ["--param colour", "modality"]),
        (["table", "errata", "--param", "x=1"], ["--param x", "takes no keywords"]),
    ],
)
def test_bad_param_is_one_line_before_reading_inputs(argv, words, tmp_path, capsys):
    out = str(tmp_path / "out")
    err = one_line_error([*argv, "--in", "layers=no-such.parquet", "models=x", "comparison=x", "--out", out], capsys)
    assert all(w in err for w in words), err
    assert list(tmp_path.iterdir()) == []


def test_garbage_ct2_model_bin_is_corrupt_not_missing(tmp_path, capsys):
    folder = tmp_path / "ct2"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"<html>502 Bad Gateway</html>" * 10)
    (folder / "config.json").write_text("{}")
    err = one_line_error(["score", str(folder), "--out", str(tmp_path / "s.parquet")], capsys)
    assert "model.bin" in err and "corrupt" in err and "re-download" in err and "re-convert" in err
    assert "holds no weights" not in err


# --- 4. messages that say what is wrong and what to do ---------------------------------------

HEADER = "model_id\tsource\tfamily\tmodality\tfigure\tobjective_encoder\n"


def test_catalogue_header_error_names_the_header_line(tmp_path):
    from wqk.catalogue import CatalogueError, load_catalogue

    path = tmp_path / "c.tsv"
    path.write_text(
        "# a comment before the header\n"
        + HEADER.replace("modality", "modalty")
        + "\n# and one before the first model\n"
        + "org/a\tpypi:x\tF\ttext\tlanguage\tbidirectional\n"
    )
    with pytest.raises(CatalogueError, match=r"line 2 \(header\): unknown column\(s\) \['modalty'\]"):
        load_catalogue(path)
    path.write_text("# only a header, with a typo\n" + HEADER.replace("figure", "figur"))
    with pytest.raises(CatalogueError, match=r"line 2 \(header\): unknown column\(s\) \['figur'\]"):
        load_catalogue(path)


def test_catalogue_relative_folder_source_is_that_folder(tmp_path, monkeypatch):
    from wqk.catalogue import load_catalogue
    from wqk.checkpoints import parse_source
    from wqk.checkpoints.source import local_folder

    monkeypatch.chdir(tmp_path)
    Path("data/whisper-base").mkdir(parents=True)
    Path("data/whisper-base/config.json").write_text("{}")
    Path("c.tsv").write_text(
        HEADER + "local\tdata/whisper-base\tWhisper\taudio\taudio\tbidirectional\n"
        "hub\topenai/whisper-base\tWhisper\taudio\taudio\tbidirectional\n"
    )
    local, hub = (parse_source(row["source"]) for row in load_catalogue("c.tsv"))
    assert local.kind == "folder" and local_folder(local).resolve() == tmp_path / "data" / "whisper-base"
    assert hub.kind == "hub" and hub.repo == "openai/whisper-base"


def _http_error(status: int):
    class Response:
        status_code = status
        headers: dict = {}

    class HttpError(Exception):
        response = Response()

    return HttpError(f"HTTP {status}")


@pytest.mark.parametrize("status, files", [(401, True), (403, False), (401, False)])
def test_hub_access_denied_says_whether_a_token_was_sent(status, files, tmp_path, monkeypatch):
    from huggingface_hub import constants

    from wqk.checkpoints.hub.client import _from_http

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "token"))  # no stored login
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    without = str(_from_http(_http_error(status), "acme/gated", None, "https://hub.example", files))
    assert "export HF_TOKEN" in without
    monkeypatch.setenv("HF_TOKEN", "hf_secret_do_not_print")
    with_token = str(_from_http(_http_error(status), "acme/gated", None, "https://hub.example", files))
    assert "acme/gated" in with_token and "hf_secret" not in with_token
    assert "export HF_TOKEN" not in with_token and "HF_TOKEN" in with_token and "was sent" in with_token
    assert "licence" in with_token or "check the id" in with_token


def test_symlink_loop_source_is_reported_as_a_loop(tmp_path, monkeypatch):
    from wqk.checkpoints import locate, parse_source

    monkeypatch.chdir(tmp_path)
    Path("loop").symlink_to("loop")
    for text in ("loop", "loop/model", "./loop", str(tmp_path / "loop" / "model")):
        with pytest.raises(SourceUnavailable, match="symlink loop") as e:
            parse_source(text)
        assert "loop" in str(e.value) and "hub" not in str(e.value)
    with pytest.raises(SourceUnavailable, match="symlink loop"):
        locate("loop/model")


def test_unknown_model_type_says_what_to_do(tmp_path, capsys):
    folder = build_tiny("bert", tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["model_type"] = "frobnicator"
    (folder / "config.json").write_text(json.dumps(cfg))
    err = one_line_error(["score", str(folder), "--out", str(tmp_path / "s.parquet")], capsys)
    assert "'frobnicator'" in err and "llama" in err
    assert "add a record" in err and "Adding a model" in err and "config.json" in err
    del cfg["model_type"]
    (folder / "config.json").write_text(json.dumps(cfg))
    err = one_line_error(["score", str(folder), "--out", str(tmp_path / "s.parquet")], capsys)
    assert "no model_type" in err and "config.json" in err and "''" not in err


# --- 9. exit codes and --version ---------------------------------------------------------------


def test_exit_codes_usage_2_failure_1(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["score"])  # missing arguments: a usage error
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["no-such-command"])
    assert e.value.code == 2
    one_line_error(["score", "./no-such-model", "--out", str(tmp_path / "s.parquet")], capsys)  # WqkError: 1


def test_unexpected_error_is_one_line_then_traceback_with_v(tmp_path, capsys, monkeypatch):
    import wqk.commands.validate

    def boom(args):
        raise KeyError("surprise")

    monkeypatch.setattr(wqk.commands.validate, "run", boom)
    argv = ["validate", "--models", "x", "--published", "x", "--paper-models", "x", "--out", str(tmp_path / "c.csv")]
    err = one_line_error(argv, capsys)
    assert "KeyError" in err and "surprise" in err and "rerun" in err and "-v" in err
    capsys.readouterr()
    assert main(["-v", *argv]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "in boom" in err and "wqk validate: error: KeyError" in err


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"wqk {wqk.__version__}"


def test_console_exit_codes(tmp_path):
    """The process's own status, through entry() and its os._exit."""

    def wqk_cli(*argv):
        return subprocess.run([sys.executable, "-m", "wqk.cli", *argv], capture_output=True, text=True, cwd=tmp_path)

    assert wqk_cli("--version").returncode == 0
    assert wqk_cli("score").returncode == 2
    failed = wqk_cli("extract", "./no-such-model", "--out", "m.parquet")
    assert failed.returncode == 1 and "no such file or folder" in failed.stderr


def test_catalogue_quoted_cell_across_lines_names_the_line(tmp_path):
    """A quote opened in one cell and closed on a later line used to end in a bare ValueError."""
    from wqk.catalogue import CatalogueError, load_catalogue

    src = (ROOT / "tests" / "config" / "catalogue.tsv").read_text().splitlines(keepends=True)
    header_at = next(i for i, line in enumerate(src) if line.startswith("slug\t"))
    row = src[header_at + 1].rstrip("\n").split("\t")
    row[-1] = '"a note that runs\nonto the next line"'
    bad = tmp_path / "catalogue.tsv"
    bad.write_text("".join(src[: header_at + 1]) + "\t".join(row) + "\n" + "".join(src[header_at + 2 :]))
    with pytest.raises(CatalogueError, match=rf"line {header_at + 2}: a quote .* not closed on this line"):
        load_catalogue(bad)


def test_pytorch_bin_with_python_objects_says_what_is_safe_to_do(tiny_llama, tmp_path, capsys):
    """torch's own advice (weights_only=False) would run the pickled code: not passed on."""
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_bytes((tiny_llama / "config.json").read_bytes())
    marker = tmp_path / "code-ran"
    tensors = load_file(tiny_llama / "model.safetensors")
    torch.save({**tensors, "hook": _RunsCodeWhenUnpickled(marker)}, folder / "pytorch_model.bin")
    err = one_line_error(["score", str(folder), "--out", str(tmp_path / "s.parquet")], capsys)
    assert str(folder / "pytorch_model.bin") in err and "Python objects besides tensors (exec)" in err
    assert "convert it to safetensors" in err.lower() and "trust" in err and "safetensors version" in err
    assert "weights_only" not in err and "add_safe_globals" not in err
    assert not marker.exists() and not (tmp_path / "s.parquet").exists()


class _RunsCodeWhenUnpickled:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('unpickling ran code')",))


def test_mistyped_relative_folder_is_no_such_folder_not_a_hub_id(tmp_path, capsys, monkeypatch):
    from wqk.checkpoints import parse_source

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # were it asked, the hub would be unreachable
    monkeypatch.setenv("WQK_CACHE", str(tmp_path / "cache"))
    build_tiny("bert", Path("tiny") / "bert")
    err = one_line_error(["score", "tiny/bertt", "--out", "s.parquet"], capsys)
    assert "'tiny/bertt': no such folder" in err and "near names: tiny/bert;" in err
    assert "hf:tiny/bertt" in err and "hub at" not in err
    for text, near in [("tiny/bertt/", "tiny/bert"), ("tinyy/bert/", "tiny"), ("tiny/bert/model.safetensor", None)]:
        with pytest.raises(SourceUnavailable, match="no such folder") as e:
            parse_source(text)
        assert (near is None or f"near names: {near}" in str(e.value)) and "hf:" not in str(e.value)
    with pytest.raises(SourceUnavailable, match=r"tiny/bert/config.json is a file, not a folder"):
        parse_source("tiny/bert/config.json/x")
    err = one_line_error(["score", "./tiny/bertt", "--out", "s.parquet"], capsys)  # explicitly local
    assert "no such file or folder" in err and "near names: tiny/bert;" in err
    # hub ids stay hub ids: no local folder of their org, or the hub forced with hf:
    assert parse_source("tiny/bert").kind == "folder"
    assert parse_source("openai/whisper-base").kind == "hub"
    hub = parse_source("hf:tiny/bertt")
    assert hub.kind == "hub" and hub.repo == "tiny/bertt"
    assert list(Path(".").iterdir()) == [Path("tiny")]  # nothing written, no cache made


@pytest.mark.parametrize(
    "edit, words",
    [
        ({"num_attention_heads": 7, "num_key_value_heads": None}, ["number of attention heads (7)", "(64, 64)"]),
        ({"num_attention_heads": 0}, ["field num_attention_heads is 0", "at least 1"]),
        ({"num_attention_heads": -8}, ["field num_attention_heads is -8", "at least 1"]),
        ({"num_attention_heads": "eight"}, ["field num_attention_heads is 'eight'", "whole number"]),
        ({"num_attention_heads": 8.5}, ["field num_attention_heads is 8.5", "whole number"]),
        ({"num_key_value_heads": 3}, ["num_key_value_heads is 3", "does not divide num_attention_heads (8)"]),
        ({"num_key_value_heads": 0}, ["field num_key_value_heads is 0", "at least 1"]),
        ({"num_key_value_heads": 4}, ["num_key_value_heads=4", "k (4, 64, 4)", "[heads, d, head_dim]"]),
        ({"num_attention_heads": 16}, ["num_attention_heads=16", "q (16, 64, 4)"]),
        ({"head_dim": "x"}, ["field 'head_dim'", "'x'"]),
        ({"max_position_embeddings": "x"}, ["field 'max_position_embeddings'", "'x'"]),
        ({"rope_parameters": {"rope_theta": "x", "rope_type": "default"}}, ["field rope_parameters.rope_theta is 'x'"]),
    ],
)
def test_bad_head_counts_in_config_are_one_line(edit, words, tiny_llama, tmp_path, capsys):
    folder = tmp_path / "llama-edited"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(tiny_llama / "model.safetensors")
    config = json.loads((tiny_llama / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **edit}))
    out = tmp_path / "out" / "s.parquet"
    err = one_line_error(["score", str(folder), "--out", str(out), "--matrices-out", str(out) + ".m"], capsys)
    assert f"{folder} (model_type 'llama')" in err and "config.json" in err, err
    assert all(w in err for w in words), err
    assert "ZeroDivisionError" not in err and "RuntimeError" not in err
    assert not out.parent.exists() or list(out.parent.iterdir()) == []  # nothing partial


def test_fused_head_count_that_does_not_fit_names_the_tensor(tmp_path, capsys):
    folder = build_tiny("gpt2", tmp_path / "gpt2")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_head": 5}))
    err = one_line_error(["score", str(folder), "--out", str(tmp_path / "s.parquet")], capsys)
    assert str(folder) in err and "c_attn.weight (64, 192)" in err and "5 + 2 x 5 heads" in err and "config.json" in err


@pytest.mark.parametrize(
    "text, kind", [("[1, 2]", "an array"), ('"llama"', "a string"), ("null", "null"), ("8", "a number")]
)
def test_config_json_that_is_no_object_is_one_line(text, kind, tiny_llama, tmp_path, capsys):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(tiny_llama / "model.safetensors")
    (folder / "config.json").write_text(text)
    for command in ("score", "extract"):
        err = one_line_error([command, str(folder), "--out", str(tmp_path / "out.parquet")], capsys)
        assert f"{folder / 'config.json'} holds {kind}, not an object of fields" in err, err
