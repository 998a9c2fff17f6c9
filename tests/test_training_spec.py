"""The training settings, defined once (wqk.training.spec): the options of `wqk train`, the
workflow's keys and the train rule's flags are its fields, every setting a config gives
reaches the job, a resumed run refuses a changed one, and a new field needs no other edit."""

from __future__ import annotations

import argparse
import re
import shlex
import typing
from dataclasses import MISSING, fields, make_dataclass
from pathlib import Path

import pytest
import yaml

from wqk.errors import WqkError
from wqk.training import grid, spec
from wqk.training.spec import CONFIG, GRID, JOB, SIZE, TrainConfig

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _parser(cls=TrainConfig) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    spec.add_arguments(p, cls)
    return p


def _actions(cls=TrainConfig) -> dict[str, argparse.Action]:
    return {a.dest: a for a in _parser(cls)._actions if a.dest != "help"}


def _by_source(source: str, cls=TrainConfig) -> list[str]:
    return [f.name for f in fields(cls) if f.metadata["setting"].source == source]


def _other_value(f, value, kind):
    """A valid value of the setting other than `value`."""
    s = f.metadata["setting"]
    if kind is bool:
        return not value
    if s.choices:
        return next(c for c in s.choices if c != value)
    if kind in (int, float):
        return value * 2 or 1
    return f"{value or f.name}-other"


# --- the command line -------------------------------------------------------------------


def test_the_options_of_wqk_train_are_the_fields_of_the_spec():
    kinds = typing.get_type_hints(TrainConfig)
    actions = _actions()
    assert sorted(actions) == sorted(f.name for f in fields(TrainConfig) if f.name != "extra")
    for f in fields(TrainConfig):
        if f.name == "extra":  # a record of the Python API only
            continue
        a, s = actions[f.name], f.metadata["setting"]
        assert a.option_strings == [f"--{f.name.replace('_', '-')}"]
        if kinds[f.name] is bool:
            assert isinstance(a, argparse._StoreTrueAction) and f.default is False, f.name
            continue
        assert a.type is kinds[f.name] and tuple(a.choices or ()) == s.choices, f.name
        assert a.required == (f.default is MISSING or s.required), f.name
        assert a.required or a.default == f.default, f.name
    assert {n for n, a in actions.items() if a.required} == {"corpus", "tokenizer", "out", "objective"}


def test_every_option_reaches_the_config():
    """Each option given a value other than its default: the config holds every one."""
    kinds = typing.get_type_hints(TrainConfig)
    base = TrainConfig(corpus="c.npy", tokenizer="tok", out="run")
    given = {
        f.name: _other_value(f, getattr(base, f.name), kinds[f.name]) for f in spec.options() if f.name != "hidden"
    }
    given["hidden"] = base.hidden * given["heads"]  # divisible by the heads
    argv = []
    for name, value in given.items():
        flag = f"--{name.replace('_', '-')}"
        argv += [flag] if kinds[name] is bool else [flag, str(value)]
    cfg = spec.from_args(_parser().parse_args(argv))
    assert {name: getattr(cfg, name) for name in given} == given
    assert all(given[name] != getattr(base, name) for name in given)


def test_checks_come_from_the_metadata():
    ok = dict(corpus="c.npy", tokenizer="tok", out="run")
    with pytest.raises(WqkError, match="--steps must be at least 1"):
        TrainConfig(**ok, steps=0)
    with pytest.raises(WqkError, match="--max-grad-norm must be greater than 0"):
        TrainConfig(**ok, max_grad_norm=0.0)
    with pytest.raises(WqkError, match="objective must be one of"):
        TrainConfig(**ok, objective="sideways")
    with pytest.raises(WqkError, match="not divisible"):
        TrainConfig(**ok, hidden=30, heads=4)
    assert TrainConfig(**ok, keep_checkpoints=0).size == "L4-H128"


# --- the run folder ---------------------------------------------------------------------


def test_run_json_records_what_a_run_computes():
    cfg = TrainConfig(corpus="data/c.npy", tokenizer="tok", out="runs/a")
    rec = spec.recorded(cfg)
    where = {f.name for f in fields(cfg) if not f.metadata["setting"].recorded}
    assert where and set(rec) == {f.name for f in fields(cfg)} - where
    assert set(spec.resume_keys()) - set(rec) == {"corpus_sha256", "tokenizer_sha256"}


def test_resume_refuses_every_changed_setting_that_changes_the_run(tmp_path):
    """A finished run in the folder; each setting of resume_keys changed alone is refused,
    naming it; a setting that changes where or how a run computes is not."""
    from wqk.training import corpus, tokenizer
    from wqk.training.train import train

    text = tmp_path / "pydoc.txt"
    corpus.write_corpus(corpus.pydoc(), text, max_chars=20_000)
    tok = tokenizer.build(tmp_path / "tok", text, vocab_size=300)
    settings = dict(layers=1, hidden=16, heads=2, intermediate=32, seq_len=8, batch_size=2, steps=2, save_every=2,
                    log_every=1, warmup=1, lr=1e-3, device="cpu", score_device="cpu", threads=1)  # fmt: skip
    base = TrainConfig(corpus=str(text), tokenizer=str(tok), out=str(tmp_path / "run"), **settings)
    done = train(base)
    kinds = typing.get_type_hints(TrainConfig)
    checked = [f for f in fields(TrainConfig) if f.metadata["setting"].resume_check]
    weights = {*_by_source(SIZE), "objective", "init", "seq_len", "batch_size", "grad_accum", "steps", "lr",
               "warmup", "weight_decay", "seed", "fp16", "max_grad_norm"}  # fmt: skip
    assert weights <= {f.name for f in checked}
    for f in checked:
        changed = {**settings, f.name: _other_value(f, getattr(base, f.name), kinds[f.name])}
        if f.name == "heads":
            changed["hidden"] = base.hidden * 2
        cfg = TrainConfig(corpus=str(text), tokenizer=str(tok), out=str(tmp_path / "run"), **changed)
        with pytest.raises(WqkError, match=rf"other settings \(.*\b{f.name}\b"):
            train(cfg)
    unchecked = {"threads": 2, "keep_checkpoints": 3, "keep_matrices": True}
    assert not set(unchecked) & set(spec.resume_keys())
    assert train(TrainConfig(corpus=str(text), tokenizer=str(tok), out=str(tmp_path / "run"),
                             **{**settings, **unchecked})) == done  # fmt: skip


# --- the workflow -----------------------------------------------------------------------


def test_config_schema_ends_with_the_schema_of_the_spec():
    """config.schema.yaml's generated part is what the spec gives today (else: run
    `python -m wqk.training.spec`)."""
    text = SCHEMA.read_text()
    assert text.endswith("\n" + spec.schema_block()), "run `python -m wqk.training.spec` to regenerate it"
    schema = yaml.safe_load(text)
    training = schema["properties"]["training"]
    assert training["$ref"] == "#/$defs/training_settings" and training["unevaluatedProperties"] is False
    assert training["properties"]["sizes"]["additionalProperties"] == {"$ref": "#/$defs/training_size"}
    assert not set(training["properties"]) & set(schema["$defs"]["training_settings"]["properties"])


def test_the_workflow_keys_are_the_config_and_size_fields():
    kinds = typing.get_type_hints(TrainConfig)
    defs = spec.workflow_schema()
    keys, size = defs["training_settings"]["properties"], defs["training_size"]["properties"]
    assert list(keys) == _by_source(CONFIG) and list(size) == _by_source(SIZE)
    assert defs["training_size"]["required"] == list(size) and all("default" not in v for v in size.values())
    by_name = {f.name: f for f in fields(TrainConfig)}
    for name, key in keys.items():
        workflow = by_name[name].metadata["setting"].workflow
        assert key["type"] == {bool: "boolean", int: "integer", float: "number", str: "string"}[kinds[name]]
        if name in defs["training_settings"]["required"]:
            assert "default" not in key and workflow["default"] is spec.REQUIRED
        else:
            assert key["default"] == workflow.get("default", by_name[name].default), name
    assert keys["device"]["enum"] == list(spec.DEVICES)


def test_the_grid_names_runs_and_gives_each_its_seeds():
    training = {"sizes": {"s": {"layers": 1, "hidden": 8, "heads": 2, "intermediate": 16}}, "datasets": ["pydoc"],
                "inits": {"default": ["bidirectional", "autoregressive"], "symmetric": ["bidirectional"]},
                "seed": 3, "comparison_seeds": [3, 4], "steps": 25, "save_every": 10}  # fmt: skip
    runs = grid.runs(training)
    assert list(runs) == sorted(runs)
    assert {name: r["seed"] for name, r in runs.items()} == {
        "s-decoder-default-pydoc": 3,
        "s-encoder-default-pydoc": 3,
        "s-encoder-default-pydoc-s4": 4,
        "s-encoder-symmetric-pydoc": 3,
        "s-encoder-symmetric-pydoc-s4": 4,
    }
    assert grid.saved_steps(training) == ["000000", "000010", "000020", "000025"]
    assert spec.checkpoint_steps(25, 10) == [0, 10, 20, 25]
    with pytest.raises(WqkError, match="no `training:` section"):
        grid.runs({})
    with pytest.raises(WqkError, match="training.datasets: unknown dataset 'redpajama'"):
        grid.check_datasets({**training, "datasets": ["pydoc", "redpajama"]})


def _overlay(base: dict) -> dict:
    """A `training` section giving every config key of the spec a value other than its
    default and than every other key's (so that a value sent to the wrong flag shows)."""
    keys = spec.workflow_schema()["training_settings"]["properties"]
    out, n = {}, 0
    for name, key in keys.items():
        n += 1
        if key["type"] == "boolean":
            out[name] = not key.get("default", False)
        elif "enum" in key:
            out[name] = next(v for v in key["enum"] if v != key.get("default"))
        elif key["type"] == "integer":
            out[name] = 10 + n
        elif key["type"] == "number":
            out[name] = 0.5 + n / 64
        else:
            out[name] = f"{name}-value"
    out["steps"], out["save_every"] = 40, 15  # saved steps 0, 15, 30, 40
    size = {name: 3 * (i + 1) for i, name in enumerate(spec.workflow_schema()["training_size"]["properties"])}
    size["hidden"] = 8 * size["heads"]  # divisible by the heads
    out["sizes"] = {"odd": size}
    assert all(out[k] != v.get("default") for k, v in keys.items()) and all(out[k] != base.get(k) for k in keys)
    return out


@pytest.mark.slow
def test_every_setting_of_a_config_reaches_the_train_job(tmp_path):
    """A config setting every key to a value of its own: each value is in the printed train
    command of every run, as the option of its name; the grid's and the size's values too."""
    from rehearse import copy_workflow
    from workflow_runs import TEST_CONFIG, planned_jobs, snakemake

    wf = copy_workflow(tmp_path / "wf")
    base = yaml.safe_load((wf / TEST_CONFIG).read_text())
    training = {**base["training"], **_overlay(base["training"])}
    assert training["device"] != "cuda"  # score.device: another value than the training's
    config = {**base, "training": training, "score": {**base.get("score", {}), "device": "cuda"}}
    (wf / "every.yaml").write_text(yaml.safe_dump(config))
    r = snakemake(wf, "-n", "-p", "--cores", "2", "--configfile", "every.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    commands = [shlex.split(line.split("wqk train ", 1)[1].split(" > ")[0]) for line in r.stdout.splitlines()
                if "wqk train " in line]  # fmt: skip
    runs = grid.runs(training)
    assert len(commands) == len(runs) == sum(rule == "train" for rule, _ in planned_jobs(r.stdout)) == 5
    size = training["sizes"]["odd"]
    for argv in commands:
        cfg = spec.from_args(_parser().parse_args(argv))
        name = Path(cfg.out).name
        assert cfg.out == f"results/training/runs/{name}" and name in runs
        for key in _by_source(CONFIG):
            expected = runs[name]["seed"] if key == "seed" else training[key]
            assert getattr(cfg, key) == expected, (name, key)
        for key in _by_source(SIZE):
            assert getattr(cfg, key) == size[key], (name, key)
        for key in _by_source(GRID):
            assert getattr(cfg, key) == runs[name][key], (name, key)
        job = {"corpus": f"results/training/corpus/{cfg.dataset}.npy", "score_device": "cuda",
               "tokenizer": f"results/training/tokenizer/corpus-{cfg.dataset}",
               "scores_out": f"results/training/scores/{name}", "out": f"results/training/runs/{name}"}  # fmt: skip
        assert set(job) == set(_by_source(JOB)) and {k: getattr(cfg, k) for k in job} == job
    saved = re.findall(r"results/training/scores/[^/\s]+/step-(\d{6})\.parquet", r.stdout)
    assert sorted(set(saved)) == ["000000", "000015", "000030", "000040"]


# --- a new setting ----------------------------------------------------------------------


def test_dropout_is_a_probability_below_one():
    for bad, why in ((1.0, "--dropout must be less than 1"), (-0.1, "--dropout must be at least 0")):
        with pytest.raises(WqkError, match=why):
            TrainConfig(corpus="c", tokenizer="t", out="o", dropout=bad)
    key = spec.workflow_schema()["training_settings"]["properties"]["dropout"]
    assert (key["minimum"], key["exclusiveMaximum"], key["default"]) == (0, 1, 0.1)
    assert "dropout" in spec.resume_keys()  # a resumed run must train with the same


def test_seeds_repeat_every_run_and_comparison_seeds_the_compared_ones():
    """training.seeds: every run once per seed (the spread of the final scores); comparison_seeds:
    the runs the symmetric-initialisation table compares (an objective under several inits),
    by default the seeds; a run of another seed than training.seed is named -s<seed>."""
    base = {"sizes": {"s": {}}, "datasets": ["pydoc"], "seed": 0,
            "inits": {"default": ["bidirectional", "autoregressive"], "symmetric": ["bidirectional"]}}  # fmt: skip
    assert list(grid.runs(base)) == ["s-decoder-default-pydoc", "s-encoder-default-pydoc", "s-encoder-symmetric-pydoc"]
    both = grid.runs({**base, "seeds": [0, 1]})
    assert {r["seed"] for r in both.values()} == {0, 1} and len(both) == 6
    assert (
        both["s-decoder-default-pydoc-s1"]["seed"] == 1 and both["s-encoder-symmetric-pydoc-s1"]["init"] == "symmetric"
    )
    three = grid.runs({**base, "seeds": [0, 1], "comparison_seeds": [0, 1, 2]})
    assert sorted(r for r in three if r.endswith("-s2")) == [
        "s-encoder-default-pydoc-s2",
        "s-encoder-symmetric-pydoc-s2",
    ]
    assert set(grid.runs({**base, "comparison_seeds": [0, 1, 2]})) == set(three) - {"s-decoder-default-pydoc-s1"}


def test_a_new_field_is_an_option_a_workflow_key_a_flag_and_a_resume_check():
    """A field added to the spec (here a subclass with one more field) is, with no other
    edit: an option of `wqk train`, checked; a key of the workflow's schema with its default
    and minimum; a flag of the train rule; a key of run.json that a resumed run must match."""
    extended = make_dataclass(
        "Extended",
        [
            (
                "label_smoothing",
                float,
                spec.setting(0.1, "label smoothing of the loss", minimum=0, resume_check=True, source=CONFIG),
            )
        ],
        bases=(TrainConfig,),
    )
    a = _actions(extended)["label_smoothing"]
    assert a.option_strings == ["--label-smoothing"] and a.type is float and a.default == 0.1
    args = _parser(extended).parse_args(["--corpus", "c", "--tokenizer", "t", "--out", "o", "--objective",
                                         "autoregressive", "--label-smoothing", "0.25"])  # fmt: skip
    cfg = spec.from_args(args, extended)
    assert cfg.label_smoothing == 0.25 and cfg.objective == "autoregressive"
    with pytest.raises(WqkError, match="--label-smoothing must be at least 0"):
        extended(corpus="c", tokenizer="t", out="o", label_smoothing=-1.0)

    key = spec.workflow_schema(extended)["training_settings"]["properties"]["label_smoothing"]
    assert key == {"description": "label smoothing of the loss", "type": "number", "minimum": 0, "default": 0.1}
    assert "label_smoothing:" in spec.schema_block(extended) and "label_smoothing:" not in spec.schema_block()

    training = {"sizes": {"s": {"layers": 1, "hidden": 8, "heads": 2, "intermediate": 16}}, "datasets": ["pydoc"],
                "inits": {"default": ["bidirectional"]}, "seed": 0, "steps": 4, "save_every": 2}  # fmt: skip
    for key_, schema in spec.workflow_schema()["training_settings"]["properties"].items():
        training.setdefault(key_, schema.get("default"))
    training["label_smoothing"] = 0.3
    run = grid.runs(training)["s-encoder-default-pydoc"]
    assert "--label-smoothing 0.3" in grid.run_flags(training, run, extended)
    assert "--label-smoothing" not in grid.run_flags(training, run)
    assert "label_smoothing" in spec.resume_keys(extended) and spec.recorded(cfg)["label_smoothing"] == 0.25
