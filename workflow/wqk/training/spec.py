"""The settings of a training run, defined once.

`TrainConfig` holds the settings of one run of `wqk train`; each field's `setting(...)` says
how it is checked and where the workflow takes it from. Derived from the fields:
- the options of `wqk train` (`add_arguments`) and the config they give (`from_args`);
- the checks of a config (`TrainConfig.__post_init__`);
- run.json (`recorded`) and the settings a resumed run must share with it (`resume_keys`);
- the workflow config's `training` keys (`workflow_schema`: the end of
  workflow/schemas/config.schema.yaml, written by `python -m wqk.training.spec`);
- the train rule's flags (`flags`).
A new setting is one new field here.

Torch-free: common.smk imports it when Snakemake parses the workflow.
"""

import shlex
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

from ..contracts import OBJECTIVES
from ..errors import WqkError

INITS = ("default", "symmetric")
DEVICES = ("auto", "cpu", "cuda")

# Where the workflow takes a setting from (Setting.source):
CONFIG = "config"  # the key of its name in the config's `training` section
GRID = "grid"  # the run's place in the grid of runs (wqk.training.grid)
SIZE = "size"  # the run's size: training.sizes.<size>.<name>
JOB = "job"  # the rule's own wiring: its input and output paths, score.device
FROM_WORKFLOW = (CONFIG, GRID, SIZE)  # what the rule's flags carry
REQUIRED = object()  # a workflow default that is none: the config must give the key

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
# config.schema.yaml ends with the settings' schema, written after this line by `python -m wqk.training.spec`.
SCHEMA_MARKER = "# ---- generated from wqk.training.spec by `python -m wqk.training.spec`: do not edit below"


@dataclass(frozen=True)
class Setting:
    """How a field of TrainConfig is checked, recorded and given (its dataclass metadata)."""

    help: str = ""
    choices: tuple = ()
    minimum: float | None = None  # the value is at least this
    above: float | None = None  # the value is greater than this
    below: float | None = None  # the value is less than this
    resume_check: bool = False  # changes the weights, losses or saved steps: a resumed run must match
    recorded: bool = True  # in run.json (False: where or how fast a run computes, not what)
    option: bool = True  # an option of `wqk train`
    required: bool = False  # an option that must be given although the field has a default
    source: str = ""  # where the workflow takes it from ("": nowhere)
    workflow: dict = field(default_factory=dict)  # the workflow key's schema, where it differs


def setting(default=MISSING, help="", *, default_factory=MISSING, **meta):
    return field(default=default, default_factory=default_factory, metadata={"setting": Setting(help=help, **meta)})


@dataclass
class TrainConfig:
    corpus: str = setting(
        help="token ids from `wqk corpus --tokenizer` (.npy, memory-mapped), or a text file (tokenised first)",
        source=JOB,
    )
    tokenizer: str = setting(help="folder from `wqk tokenizer` (tokenizer.json)", source=JOB)
    out: str = setting(help="run folder", source=JOB)
    objective: str = setting("bidirectional", choices=OBJECTIVES, required=True, resume_check=True, source=GRID)
    init: str = setting(
        "default", "symmetric: W_q := W_k at initialisation", choices=INITS, resume_check=True, source=GRID
    )
    layers: int = setting(4, minimum=1, resume_check=True, source=SIZE)
    hidden: int = setting(128, minimum=1, resume_check=True, source=SIZE)
    heads: int = setting(4, minimum=1, resume_check=True, source=SIZE)
    intermediate: int = setting(512, minimum=1, resume_check=True, source=SIZE)
    seq_len: int = setting(64, minimum=1, resume_check=True, source=CONFIG, workflow={"default": 128, "minimum": 8})
    batch_size: int = setting(32, minimum=1, resume_check=True, source=CONFIG)
    grad_accum: int = setting(1, minimum=1, resume_check=True, source=CONFIG)
    steps: int = setting(
        1000, "optimizer steps", minimum=1, resume_check=True, source=CONFIG, workflow={"default": REQUIRED}
    )
    lr: float = setting(5e-4, above=0, resume_check=True, source=CONFIG, workflow={"default": 5e-5})
    warmup: int = setting(100, minimum=0, resume_check=True, source=CONFIG, workflow={"default": 0})
    weight_decay: float = setting(0.01, minimum=0, resume_check=True, source=CONFIG)
    dropout: float = setting(
        0.1,
        "dropout probability of the hidden states and the attention probabilities (BERT's 0.1)",
        minimum=0,
        resume_check=True,
        source=CONFIG,
        below=1,
    )
    save_every: int = setting(
        100,
        "save and score every N steps (and at 0 and the end)",
        minimum=1,
        resume_check=True,
        source=CONFIG,
        workflow={"default": REQUIRED},
    )
    log_every: int = setting(10, "log the mean loss every N steps", minimum=1, resume_check=True, source=CONFIG)
    seed: int = setting(0, minimum=0, resume_check=True, source=CONFIG)  # per run: the grid's seeds
    device: str = setting(
        "auto", "where the run trains (auto: CUDA when torch sees one)", choices=DEVICES, recorded=False, source=CONFIG
    )
    fp16: bool = setting(False, "mixed precision (CUDA only)", resume_check=True, source=CONFIG)
    max_grad_norm: float = setting(  # the transformers Trainer default the authors trained with
        1.0, "gradients clipped to this norm", above=0, resume_check=True, source=CONFIG
    )
    threads: int = setting(
        0,
        "CPU threads for torch (0: its default); results may depend on it",
        minimum=0,
        recorded=False,
        source=CONFIG,
        workflow={
            "default": 2,
            "minimum": 1,
            "description": "CPU threads of torch in each run, fixed so that results do not depend "
            "on the machine's core count",
        },
    )
    size: str = setting("", "size label for summaries (default L{layers}-H{hidden})", source=GRID)
    dataset: str = setting("", "dataset label for summaries (default: corpus file stem)", source=GRID)
    keep_checkpoints: int = setting(
        1,
        "checkpoints kept for resuming: the last N (0: every one; default 1)",
        minimum=0,
        source=CONFIG,
        workflow={
            "description": "checkpoints (model + optimizer state) a run keeps for resuming: the last N; 0 keeps "
            "every saved step's (bert-base: ~1.3 GB each). Every saved step is scored either way."
        },
    )
    keep_matrices: bool = setting(
        False,
        "also keep the q/k matrices of every saved step (RUN/matrices/step-N.parquet)",
        source=CONFIG,
    )
    score_device: str = setting("auto", "where the saved steps are scored", choices=DEVICES, recorded=False, source=JOB)
    scores_out: str = setting(
        "",
        "folder to copy the scores of every saved step to once the run is complete"
        " (its other step-*.parquet files are removed)",
        recorded=False,
        source=JOB,
    )
    extra: dict = setting(default_factory=dict, option=False)

    def __post_init__(self):
        for f in fields(self):
            _check(f, getattr(self, f.name))
        if self.hidden % self.heads:
            raise WqkError(f"hidden size {self.hidden} is not divisible by {self.heads} heads")
        self.size = self.size or f"L{self.layers}-H{self.hidden}"
        self.dataset = self.dataset or Path(self.corpus).stem


def _meta(f) -> Setting:
    return f.metadata["setting"]


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _check(f, value) -> None:
    s = _meta(f)
    if s.choices and value not in s.choices:
        raise WqkError(f"{f.name} must be one of {s.choices}, got {value!r}")
    if s.minimum is not None and value < s.minimum:
        raise WqkError(f"{_flag(f.name)} must be at least {s.minimum}")
    if s.above is not None and value <= s.above:
        raise WqkError(f"{_flag(f.name)} must be greater than {s.above}")
    if s.below is not None and value >= s.below:
        raise WqkError(f"{_flag(f.name)} must be less than {s.below}")


def checkpoint_steps(steps: int, save_every: int) -> list[int]:
    """The steps a run saves and scores: 0, every save_every, the last."""
    return sorted({0, steps, *range(save_every, steps + 1, save_every)})


# --- the command line -------------------------------------------------------------------


def options(cls=TrainConfig) -> list:
    """The fields that are options of `wqk train`, in the order of the class."""
    return [f for f in fields(cls) if _meta(f).option]


def add_arguments(parser, cls=TrainConfig) -> None:
    kinds = typing.get_type_hints(cls)
    for f in options(cls):
        s, kind = _meta(f), kinds[f.name]
        kw = {"help": s.help.replace("%", "%%") or None}
        if kind is bool:
            if f.default is not False:
                raise TypeError(f"{cls.__name__}.{f.name}: a bool setting defaults to False (its option sets it)")
            kw["action"] = "store_true"
        else:
            kw["type"] = kind
            if s.choices:
                kw["choices"] = s.choices
            if s.required or f.default is MISSING:
                kw["required"] = True
            else:
                kw["default"] = f.default
        parser.add_argument(_flag(f.name), **kw)


def from_args(args, cls=TrainConfig):
    return cls(**{f.name: getattr(args, f.name) for f in options(cls)})


# --- the run folder ---------------------------------------------------------------------


def recorded(cfg) -> dict:
    """The settings run.json records: what the run computes, not where."""
    values = asdict(cfg)
    return {f.name: values[f.name] for f in fields(cfg) if _meta(f).recorded}


def resume_keys(cls=TrainConfig) -> tuple[str, ...]:
    """The keys of run.json a resumed run must match: its settings that change what it
    computes, and the hashes of its data."""
    return (*(f.name for f in fields(cls) if _meta(f).resume_check), "corpus_sha256", "tokenizer_sha256")


# --- the workflow -----------------------------------------------------------------------


def _schema(f, kind, with_default: bool) -> dict:
    s = _meta(f)
    out = {"description": s.help} if s.help else {}
    out["type"] = _JSON_TYPES[kind]
    if s.choices:
        out["enum"] = list(s.choices)
    if s.minimum is not None:
        out["minimum"] = s.minimum
    if s.above is not None:
        out["exclusiveMinimum"] = s.above
    if s.below is not None:
        out["exclusiveMaximum"] = s.below
    if with_default:
        out["default"] = f.default
    out.update(s.workflow)
    if out.get("default") is REQUIRED or not with_default:
        out.pop("default", None)
    return out


def workflow_schema(cls=TrainConfig) -> dict:
    """The JSON schemas of the settings the workflow config gives: training_settings, keys of
    its `training` section (config.schema.yaml's `training` adds the grid's keys), and
    training_size, the keys of each training.sizes entry."""
    kinds = typing.get_type_hints(cls)
    by_source = {src: [f for f in fields(cls) if _meta(f).source == src] for src in (CONFIG, SIZE)}
    size = {f.name: _schema(f, kinds[f.name], with_default=False) for f in by_source[SIZE]}
    return {
        "training_settings": {
            "description": "the settings of every run: the keys of `training` that are options of `wqk train`",
            "type": "object",
            "properties": {f.name: _schema(f, kinds[f.name], with_default=True) for f in by_source[CONFIG]},
            "required": [f.name for f in by_source[CONFIG] if _meta(f).workflow.get("default") is REQUIRED],
        },
        "training_size": {
            "description": "a size of the runs: the keys of a training.sizes entry",
            "type": "object",
            "additionalProperties": False,
            "required": list(size),
            "properties": size,
        },
    }


def schema_block(cls=TrainConfig) -> str:
    """The end of config.schema.yaml: the marker line, then workflow_schema as its $defs."""
    import yaml

    note = "# (tests/test_training_spec.py checks that this is what TrainConfig gives)\n"
    return f"{SCHEMA_MARKER}\n{note}" + yaml.safe_dump({"$defs": workflow_schema(cls)}, sort_keys=False, width=100)


def write_schema(path: Path, cls=TrainConfig) -> None:
    """Replace what follows the marker line of the schema file at path with schema_block."""
    text = path.read_text()
    if SCHEMA_MARKER not in text:
        raise WqkError(f"{path} has no line {SCHEMA_MARKER!r} to write the settings' schema after")
    path.write_text(text[: text.index(SCHEMA_MARKER)] + schema_block(cls))


def flags(values: dict, cls=TrainConfig) -> str:
    """The `wqk train` options of the settings the workflow gives (config keys, the grid, the
    size), from values: name -> value."""
    kinds = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        if _meta(f).source not in FROM_WORKFLOW:
            continue
        value = values[f.name]
        if kinds[f.name] is bool:
            out += [_flag(f.name)] if value else []
        else:
            out.append(f"{_flag(f.name)} {shlex.quote(str(value))}")
    return " ".join(out)


if __name__ == "__main__":
    import sys

    write_schema(
        Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[2] / "schemas" / "config.schema.yaml")
    )
