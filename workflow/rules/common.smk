"""Config and catalogue loading, wildcards, input functions and the target list.

Everything here runs at parse time (again in every cluster job): keep it cheap and
deterministic. The catalogue is validated line by line so an error names the file, the
line and the column.
"""

import os
import sys
from itertools import product
from pathlib import Path

from snakemake.exceptions import WorkflowError

# The catalogue loader and the source parser are the package's own; they need no torch,
# so the source tree is enough when wqk is not installed.
sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))
from wqk.ids import slug as model_slug  # noqa: E402
from wqk.catalogue import CatalogueError, load_catalogue, write_catalogue  # noqa: E402
from wqk.errors import WqkError  # noqa: E402
from wqk.checkpoints.source import parse_source  # noqa: E402
from wqk.metric_catalogue import select as select_metrics  # noqa: E402
from wqk.training.corpus import NAMES as CORPUS_NAMES  # noqa: E402

# Rules call the `wqk` command: find it beside the Python that runs Snakemake, so that
# `.venv/bin/snakemake` works without activating the venv.
shell.prefix(f'set -euo pipefail; PATH="{Path(sys.executable).parent}:$PATH"; ')

# Long name of each training objective in run names, as the paper names its runs.
OBJECTIVE_SHORT = {"bidirectional": "encoder", "autoregressive": "decoder"}
# Figure key of a scores-vs-parameters figure -> modality of its models.
GROUP_MODALITY = {"language": "text", "vision": "vision", "audio": "audio"}


# ---------------------------------------------------------------- catalogue

try:
    CATALOGUE = load_catalogue(config["catalogue"])
except CatalogueError as e:
    raise WorkflowError(str(e)) from None
MODELS = {row["slug"]: row for row in CATALOGUE}
SLUGS = list(MODELS)

# Metric names are checked here, not in the first scoring job an hour into a run.
try:
    select_metrics(config["score"]["metrics"])
except WqkError as e:
    raise WorkflowError(f"config score.metrics: {e}") from None


def source_kind(source):
    """folder, pypi, tiny or hub (wqk.checkpoints.source, as the command line reads it)."""
    return parse_source(source).kind


def figure_groups(key):
    """Slugs of the models that belong to a figure key (language, vision, audio, encdec)."""
    return [s for s, row in MODELS.items() if key in row["figure"].split(",")]


# ---------------------------------------------------------------- training runs

TRAINING = config.get("training", {})


def check_training_datasets():
    """Every training.datasets name is a corpus of `wqk corpus` (wqk.training.corpus.NAMES):
    a wrong one stops the workflow here, before any job runs."""
    unknown = [d for d in TRAINING.get("datasets", []) if d not in CORPUS_NAMES]
    if unknown:
        raise WorkflowError(
            f"config training.datasets: unknown dataset {', '.join(map(repr, unknown))}; "
            f"the accepted names are {', '.join(CORPUS_NAMES)}"
        )


check_training_datasets()


def training_runs():
    """Run name -> settings, from the grid sizes x objectives x inits x datasets; an objective
    trained under several inits (the symmetric-initialisation comparison) once per seed of
    training.comparison_seeds, each other run with training.seed. A run of another seed than
    training.seed is named with the suffix -s<seed>."""
    if not config["activate"]["training"]:
        return {}
    if not TRAINING:
        raise WorkflowError(
            "activate: training is true but the config has no `training:` section"
        )
    pairs = [
        (init, o) for init, objectives in TRAINING["inits"].items() for o in objectives
    ]
    compared = {o for _, o in pairs if [p for _, p in pairs].count(o) > 1}
    base = TRAINING["seed"]
    runs = {}
    for size, (init, objective), dataset in product(
        TRAINING["sizes"], pairs, TRAINING["datasets"]
    ):
        seeds = TRAINING.get("comparison_seeds") or [base]
        for seed in seeds if objective in compared else [base]:
            name = f"{size}-{OBJECTIVE_SHORT[objective]}-{init}-{dataset}"
            name += "" if seed == base else f"-s{seed}"
            runs[name] = dict(
                size=size, objective=objective, init=init, dataset=dataset, seed=seed
            )
    return dict(sorted(runs.items()))


RUNS = training_runs()


def checkpoint_steps():
    """Steps at which `wqk train` saves and scores the model: 0, every save_every, the last."""
    steps, every = TRAINING["steps"], TRAINING["save_every"]
    return sorted({0, steps, *range(every, steps + 1, every)})


STEPS = [f"{s:06d}" for s in checkpoint_steps()] if RUNS else []


def tokenizer_dir(dataset):
    tok = TRAINING.get("tokenizer", {})
    if "pretrained" in tok:
        return f"results/training/tokenizer/pretrained-{model_slug(tok['pretrained'])}"
    return f"results/training/tokenizer/corpus-{dataset}"


# ---------------------------------------------------------------- wildcards


def _alternatives(names):
    import re

    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


wildcard_constraints:
    slug=_alternatives(SLUGS),
    run=_alternatives(RUNS),
    step=r"\d{6}",
    dataset=r"[a-z0-9_]+",
    group=r"language|vision|audio",


# ---------------------------------------------------------------- input functions


def get_extract_input(wildcards):
    """The local folder extraction reads, when the workflow makes it (hub, tiny)."""
    kind = source_kind(MODELS[wildcards.slug]["source"])
    if kind == "hub":
        return f"results/fetch/{wildcards.slug}"
    if kind == "tiny":
        return f"results/tiny/{wildcards.slug}"
    return []


def get_extract_source(wildcards):
    """What `wqk extract` is given: the fetched or built folder, else the source itself."""
    row = MODELS[wildcards.slug]
    return get_extract_input(wildcards) or row["source"]


def get_tiny_model_type(wildcards):
    return MODELS[wildcards.slug]["source"].removeprefix("tiny:")


def get_revision(wildcards):
    return MODELS[wildcards.slug]["revision"]


def get_all_scores(wildcards=None):
    return expand("results/scores/{slug}.parquet", slug=SLUGS)


def get_all_null(wildcards=None):
    if not config["activate"]["null_reference"]:
        return []
    return expand("results/null/{slug}.parquet", slug=SLUGS)


def get_run_scores(run):
    """Scores of every saved step of a run: outputs of its train job, one file a step."""
    return expand(
        "results/training/scores/{run}/step-{step}.parquet", run=run, step=STEPS
    )


def get_training_scores(wildcards=None):
    return [p for run in RUNS for p in get_run_scores(run)]


def get_training_dones(wildcards=None):
    return expand("results/training/runs/{run}/done.json", run=RUNS)


def get_train_settings(wildcards):
    """Every setting of one run as `wqk train` flags (a params: so changes rerun it)."""
    run = RUNS[wildcards.run]
    size = TRAINING["sizes"][run["size"]]
    t = TRAINING
    flags = [
        f"--size {run['size']} --dataset {run['dataset']}",
        f"--objective {run['objective']} --init {run['init']}",
        f"--layers {size['layers']} --hidden {size['hidden']} --heads {size['heads']}",
        f"--intermediate {size['intermediate']} --seq-len {t['seq_len']}",
        f"--batch-size {t['batch_size']} --grad-accum {t['grad_accum']} --steps {t['steps']}",
        f"--lr {t['lr']} --warmup {t['warmup']} --weight-decay {t['weight_decay']}",
        f"--save-every {t['save_every']} --log-every {t['log_every']} --seed {run['seed']}",
        f"--threads {t['threads']} --keep-checkpoints {t['keep_checkpoints']}",
    ]
    if t["fp16"]:
        flags.append("--fp16")
    if t["keep_matrices"]:
        flags.append("--keep-matrices")
    return " ".join(flags)


def source_options(dataset):
    """Where `wqk corpus` and `wqk tokenizer` find a dataset that is not on the hub."""
    if dataset == "jigsaw":
        return f"--jigsaw-dir {TRAINING['jigsaw_dir']}"
    if dataset == "red_pajama":
        return f"--red-pajama-url {TRAINING['red_pajama_url']}"
    return ""


def token_budget():
    """Tokens one run reads: steps x batch_size x grad_accum x seq_len. The token file of
    a corpus holds at most that many (its first ones): a web snapshot is far larger."""
    t = TRAINING
    return t["steps"] * t["batch_size"] * t["grad_accum"] * t["seq_len"]


def get_corpus_options(wildcards):
    options = f"--max-tokens {token_budget()} {source_options(wildcards.dataset)}"
    return options.strip()


def get_train_corpus(wildcards):
    return f"results/training/corpus/{RUNS[wildcards.run]['dataset']}.npy"


def get_train_tokenizer(wildcards):
    return tokenizer_dir(RUNS[wildcards.run]["dataset"])


def heatmap_matrices(which):
    """Matrices Parquet of the encoder or decoder model shown in the heatmap figure."""

    def inner(wildcards):
        name = config["figures"]["wqk_heatmaps"][which]
        if name not in MODELS:
            raise WorkflowError(
                f"figures: wqk_heatmaps: {which}: '{name}' is not a slug of the catalogue {config['catalogue']}"
            )
        return f"results/matrices/{name}.parquet"

    return inner


def params_of(kind, name, **extra):
    """`--param key=value ...` from the config section of one figure or table ('' if none)."""
    params = dict(
        config.get(kind, {}).get(name) or {}, **extra
    )  # extra: None drops a key
    pairs = " ".join(f"{k}={v}" for k, v in sorted(params.items()) if v is not None)
    return f"--param {pairs}" if pairs else ""


def score_flags():
    """`wqk score` flags of config score.metrics and score.rotary_offsets; none for the
    defaults ("default", null), which `wqk score` applies itself.
    """
    metrics = config["score"]["metrics"]
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    flags = []
    if metrics != ["default"]:
        flags.append(f"--metrics {','.join(metrics)}")
    offsets = config["score"]["rotary_offsets"]
    if offsets is not None:
        flags.append(f"--rotary-offsets {','.join(str(int(d)) for d in offsets)}")
    return " ".join(flags)


def table_outputs(name):
    return multiext(f"results/tables/{name}", ".csv", ".md", ".tex")


def module(kind, name):
    """The figure/table module, an input so that editing it reruns only that rule."""
    return f"workflow/wqk/{kind}/{name}.py"


# ---------------------------------------------------------------- targets


def scores_vs_params_groups():
    groups = config["figures"]["scores_vs_params"]["groups"]
    return [g for g in groups if figure_groups(g)]


def training_datasets():
    return sorted({run["dataset"] for run in RUNS.values()})


def get_figures():
    figs = ["wqk_heatmaps"] if "wqk_heatmaps" in config["figures"] else []
    figs += [f"scores_vs_params_{g}" for g in scores_vs_params_groups()]
    if figure_groups("encdec"):
        figs.append("encdec_stacks")
    figs += ["head_distributions", "depth_profile"]
    figs += [
        "spectral_signatures",
        "rotary_symmetry",
    ]  # beyond the paper: score.metrics
    if RUNS:
        figs += [f"training_scores_{d}" for d in training_datasets()]
        figs += [f"training_layers_{d}" for d in training_datasets()]
        figs.append("training_loss")
    return figs


def get_tables():
    tables = ["scores_all", "robustness"]
    if figure_groups("language"):
        tables.append("scores_language")
    if config["activate"]["validation"]:
        tables += ["paper_comparison", "errata"]
    if RUNS and {"default", "symmetric"} <= set(TRAINING["inits"]):
        tables.append("symmetric_init")
    if RUNS and config["activate"]["validation"]:
        tables.append("training_comparison")
    return tables


def get_final_output():
    targets = ["results/aggregate/models.parquet"]
    if config["activate"]["figures"]:
        targets += expand(
            "figures/{name}.{ext}", name=get_figures(), ext=["pdf", "png"]
        )
    if config["activate"]["tables"]:
        targets += expand(
            "results/tables/{name}.{ext}", name=get_tables(), ext=["csv", "md", "tex"]
        )
    if config["activate"]["validation"]:
        targets.append("results/validation/paper_comparison.csv")
    if RUNS:
        targets.append("results/training/summary.csv")
    return targets
