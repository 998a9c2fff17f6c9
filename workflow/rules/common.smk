"""Config and catalogue loading, wildcards, input functions and the target list.

Everything here runs at parse time (again in every cluster job): keep it cheap and
deterministic. The catalogue is validated line by line so an error names the file, the
line and the column.
"""

import os
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace as Namespace

from snakemake.exceptions import WorkflowError
from snakemake.sourcecache import LocalSourceFile

# The catalogue loader, the source parser, the training grid and the figure registry are the
# package's own; they need no torch, so the workflow's source tree is enough when wqk is not
# installed. The tree is found from this file: workflow.basedir is the folder of the main
# Snakefile, which is the user's when this workflow is used as a module.
if not isinstance(workflow.current_basedir, LocalSourceFile):
    raise WorkflowError(
        f"wqk's workflow must be a local copy (its Python package is imported here and run by "
        f"the jobs), not {workflow.current_basedir.get_path_or_uri(secret_free=True)}: "
        "git clone it and give the module `snakefile:` the path of its workflow/Snakefile"
    )
WORKFLOW_DIR = Path(str(workflow.current_basedir)).parent
sys.path.insert(0, str(WORKFLOW_DIR))
from wqk.catalogue import (
    CatalogueError,
    fetch_source,
    load_catalogues_cached,
    write_catalogue,
)  # noqa: E402
from wqk.errors import WqkError  # noqa: E402
from wqk.ids import SLUG_PATTERN  # noqa: E402
from wqk.sweeps import SWEEP_COLUMNS  # noqa: E402
from wqk.checkpoints.source import parse_source  # noqa: E402
from wqk.metric_catalogue import score_flags as metric_score_flags  # noqa: E402
from wqk.metric_catalogue import select as select_metrics  # noqa: E402
from wqk.registry import PRODUCTS, Plan, targets as registry_targets  # noqa: E402

# Rules call the `wqk` command: found beside the Python that runs Snakemake, so that
# `.venv/bin/snakemake` works without activating the venv (with `--sdm conda`, the job's env
# has its own); it imports the package of this workflow's own source (the code the figure and
# table rules list as inputs), wherever the workflow is deployed, whichever wqk is installed.
from snakemake.settings.types import DeploymentMethod  # noqa: E402

WQK_ON_PATH = (
    ""
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else f'PATH="{Path(sys.executable).parent}:$PATH"; '
)
shell.prefix(
    f"set -euo pipefail; {WQK_ON_PATH}"
    # braces doubled twice: for the f-string, then for Snakemake's formatting of the command
    f'export PYTHONPATH="{WORKFLOW_DIR}${{{{PYTHONPATH:+:$PYTHONPATH}}}}"; '
)


# ---------------------------------------------------------------- catalogue

# One file, or several read in order (e.g. the paper's and a revision sweep's)
CATALOGUE_FILES = (
    [config["catalogue"]]
    if isinstance(config["catalogue"], str)
    else list(config["catalogue"])
)
CATALOGUE_NAME = ", ".join(CATALOGUE_FILES)
# Every Snakemake process that parses this workflow loads the catalogue: the run's, and one
# per member of each SLURM job group (each member is a `snakemake` of its own); they read the
# rows the first one validated (wqk.catalogue.load_catalogues_cached), not every line again.
try:
    CATALOGUE = load_catalogues_cached(config["catalogue"], Path(".snakemake") / "wqk")
except CatalogueError as e:
    raise WorkflowError(str(e)) from None
MODELS = {row["slug"]: row for row in CATALOGUE}
SLUGS = list(MODELS)
# The revisions of a swept model (wqk.sweeps) are aggregated and drawn along training, apart
# from the other models: a checkpoint at 1% of its training is no member of their population.
SWEPT = [slug for slug in SLUGS if MODELS[slug].get("sweep")]
# POPULATION is empty for a catalogue of sweeps only.
POPULATION = [slug for slug in SLUGS if not MODELS[slug].get("sweep")]

# Metric names are checked here, not in the first scoring job an hour into a run.
try:
    select_metrics(config["score"]["metrics"])
except WqkError as e:
    raise WorkflowError(f"config score.metrics: {e}") from None


def source_kind(source):
    """folder, pypi, tiny or hub (wqk.checkpoints.source, as the command line reads it)."""
    return parse_source(source).kind


# ---------------------------------------------------------------- training runs

# The keys of `training` are checked, and defaulted, by the schema (the settings' part of it
# generated from wqk.training.spec); the runs, their flags and saved steps are the grid's.
from wqk.training import grid as training_grid  # noqa: E402

TRAINING = config.get("training", {})
try:
    training_grid.check_datasets(TRAINING)
    RUNS = training_grid.runs(TRAINING) if config["activate"]["training"] else {}
except WqkError as e:
    raise WorkflowError(str(e)) from None
STEPS = training_grid.saved_steps(TRAINING) if RUNS else []


def tokenizer_dir(dataset):
    return training_grid.tokenizer_dir(TRAINING, dataset)


# ---------------------------------------------------------------- wildcards


def _alternatives(names):
    import re

    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


wildcard_constraints:
    slug=SLUG_PATTERN,
    run=_alternatives(RUNS),
    step=r"\d{6}",
    dataset=r"[a-z0-9_]+",
    group=r"language|vision|audio",


# ---------------------------------------------------------------- input functions


def catalogue_row(slug):
    """The catalogue line of a {slug} (the wildcard is a pattern, not the list of slugs)."""
    if slug not in MODELS:
        raise WorkflowError(
            f"{slug!r} is the slug of no model of the catalogue {CATALOGUE_NAME} "
            "(a slug is the model id in lower case, `/` as `--`: wqk.slug)"
        )
    return MODELS[slug]


def get_extract_input(wildcards):
    """The local folder extraction reads, when the workflow makes it (hub, tiny)."""
    kind = source_kind(catalogue_row(wildcards.slug)["source"])
    if kind == "hub":
        return f"results/fetch/{wildcards.slug}"
    if kind == "tiny":
        return f"results/tiny/{wildcards.slug}"
    return []


def get_extract_source(wildcards):
    """What `wqk extract` is given: the fetched or built folder, else the source itself."""
    row = catalogue_row(wildcards.slug)
    return get_extract_input(wildcards) or row["source"]


def quantisation_rows():
    """The catalogue lines of quantisation.models (checked: every one a slug of the catalogue)."""
    return [catalogue_row(slug) for slug in config["quantisation"]["models"]]


def get_quantisation_input(wildcards=None):
    """The folders the workflow makes for quantisation.models (hub fetches, tiny models)."""
    return [
        p
        for slug in config["quantisation"]["models"]
        if (p := get_extract_input(Namespace(slug=slug)))
    ]


def get_quantisation_sources(wildcards=None):
    """The sources `wqk quantisation` reads (fetched or built folders, else the source) and
    their model ids, both in the order of quantisation.models."""
    slugs = config["quantisation"]["models"]
    sources = [get_extract_source(Namespace(slug=slug)) for slug in slugs]
    return " ".join(shlex.quote(s) for s in sources)


def get_quantisation_names(wildcards=None):
    return shlex.quote(",".join(r["model_id"] for r in quantisation_rows()))


def get_tiny_model_type(wildcards):
    return catalogue_row(wildcards.slug)["source"].removeprefix("tiny:")


def get_revision(wildcards):
    return catalogue_row(wildcards.slug)["revision"]


def get_null(slugs):
    if not config["activate"]["null_reference"]:
        return []
    return expand("results/null/{slug}.parquet", slug=slugs)


def get_population_null(wildcards=None):
    """The null references of the models outside revision sweeps."""
    return get_null(POPULATION)


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
    return training_grid.run_flags(TRAINING, RUNS[wildcards.run])


def source_options(dataset):
    """Where `wqk corpus` and `wqk tokenizer` find a dataset that is not on the hub."""
    return training_grid.source_options(TRAINING, dataset)


def get_corpus_options(wildcards):
    return training_grid.corpus_options(TRAINING, wildcards.dataset)


def get_train_corpus(wildcards):
    return f"results/training/corpus/{RUNS[wildcards.run]['dataset']}.npy"


def get_train_tokenizer(wildcards):
    return tokenizer_dir(RUNS[wildcards.run]["dataset"])


def score_flags():
    return metric_score_flags(
        config["score"]["metrics"], config["score"]["rotary_offsets"]
    )


# ---------------------------------------------------------------- aggregates


# Our scores, the authors' method's (what validation proves causes with) and, when the
# catalogue sweeps revisions, the swept models': one rule each, over its catalogue's models.
CATALOGUES, AGGREGATES = {}, {}
if POPULATION:
    CATALOGUES["catalogue"] = ("results/catalogue.tsv", POPULATION)
    AGGREGATES["aggregate"] = dict(
        scores="results/scores",
        catalogue="catalogue",
        null=get_population_null,
    )
    AGGREGATES["aggregate_authors"] = dict(
        scores="results/scores_authors",
        catalogue="catalogue",
        null=lambda wildcards: [],
    )
if SWEPT:
    CATALOGUES["catalogue_sweeps"] = ("results/catalogue_sweeps.tsv", SWEPT)
    AGGREGATES["aggregate_sweeps"] = dict(
        scores="results/scores",
        catalogue="catalogue_sweeps",
        null=lambda wildcards: get_null(SWEPT),
    )


def write_catalogue_file(path, log):
    """The catalogue (of CATALOGUES) written at `path`, found by its path: the rule's name
    changes when the workflow is used as a module. Without sweep columns when it holds no
    swept model, so that a catalogue listed beside a sweep's is aggregated as on its own.
    """
    slugs = next(s for p, s in CATALOGUES.values() if p == path)
    rows = [MODELS[slug] for slug in slugs]
    if not any(row.get("sweep") for row in rows):
        rows = [{k: v for k, v in r.items() if k not in SWEEP_COLUMNS} for r in rows]
    write_catalogue(rows, path)
    Path(log).write_text(f"{len(rows)} models from {CATALOGUE_NAME}\n")


def aggregate_null_flag(wildcards, input):
    return f"--null-dir {os.path.dirname(input.null[0])}" if input.null else ""


# ---------------------------------------------------------------- figures and tables (rules/products.smk)


def package_file(name):
    """A file of the package as an input path: relative to the working directory when the
    workflow lives under it (a checkout), absolute otherwise (a module used from elsewhere).
    """
    path = WORKFLOW_DIR / "wqk" / name
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def product_inputs(product):
    """Data inputs by key, and `code`: asked when the DAG needs the rule, not at parse time."""

    def inputs(wildcards):
        try:
            data = product.data(PLAN)
        except WqkError as e:
            raise WorkflowError(str(e)) from None
        return {**data, "code": [package_file(f) for f in product.code()]}

    return inputs


def product_outputs(product):
    """The files of one entry by extension; the PNG or the HTML table is shown in the report."""
    paths = {Path(p).suffix[1:]: p for p in product.outputs()}
    shown = "png" if product.kind == "figure" else "html"
    paths[shown] = report(
        paths[shown],
        caption=f"../report/{product.caption}",
        category=product.category,
        subcategory=product.title,
        labels=product.labels(),
    )
    return paths


def product_in_flags(wildcards, input):
    """`--in key=path ...`: the data inputs, every named input but the code."""
    return " ".join(f"{key}={path}" for key, path in input.items() if key != "code")


def product_param_flags(product):
    return lambda wildcards: product.param_flags(PLAN, wildcards.get(product.per, ""))


# ---------------------------------------------------------------- targets


def plan():
    """What decides which figures and tables this run makes (wqk.registry.Plan)."""
    return Plan(
        config=config,
        groups=frozenset(
            g for slug in POPULATION for g in MODELS[slug]["figure"].split(",") if g
        ),
        datasets=tuple(sorted({run["dataset"] for run in RUNS.values()})),
        slugs=frozenset(SLUGS),
        sweeps=bool(SWEPT),
        population=bool(POPULATION),
    )


PLAN = plan()


def get_final_output():
    targets = registry_targets(PLAN)
    # the aggregate of the catalogue's own lines, its explorer and validation
    if POPULATION:
        targets += ["results/aggregate/models.parquet", *get_explorer_output()]
        if config["activate"]["validation"]:
            targets.append("results/validation/paper_comparison.csv")
    if SWEPT:
        targets.append("results/aggregate_sweeps/models.parquet")
    if RUNS:
        targets.append("results/training/summary.csv")
    return targets


# ---------------------------------------------------------------- explorer and release (rules/release.smk)

from wqk import code_graph  # noqa: E402
from wqk.explorer import code_files as explorer_assets  # noqa: E402
from wqk.release import write_config as write_release_config  # noqa: E402
from wqk.release import redistributable  # noqa: E402
from wqk.release.files import SWEEP_CSV_TABLES, SWEEP_TABLES  # noqa: E402
from wqk.release.files import aggregate_files as release_aggregate_files  # noqa: E402
from wqk.version import __version__ as WQK_VERSION  # noqa: E402

EXPLORER = "results/explorer"
# Named after the catalogue: config/catalogue/paper.tsv -> release/wqk-paper-0.1.0
RELEASE_NAME = f"wqk-{Path(CATALOGUE_FILES[0]).stem}"
RELEASE = f"release/{RELEASE_NAME}-{WQK_VERSION}"
# The checkout's (or the deployed clone's) own files: the software's citation and the lock.
REPO_FILES = {
    "citation": WORKFLOW_DIR.parent / "CITATION.cff",
    "lock": WORKFLOW_DIR.parent / "requirements.lock",
}


def get_explorer_output(wildcards=None):
    """The explorer's targets, for the default target list."""
    return [EXPLORER]


def get_explorer_code(wildcards=None):
    """The package files the explorer runs, and its page's own files: editing them remakes it."""
    code = code_graph.command_files("wqk.explorer", "explorer")
    return [package_file(f) for f in code + explorer_assets()]


def get_release_input(wildcards=None):
    if not POPULATION:
        raise WorkflowError(
            f"catalogue {CATALOGUE_NAME} holds revision sweeps only: a release is the dataset of a "
            "catalogue's own models (its aggregate tables), with the sweeps beside them; add the "
            "models of their own lines (e.g. each swept model's main revision) to release it"
        )
    products = registry_targets(PLAN)
    # matrices of the population's models only; the swept revisions' scores and aggregate apart
    licensed = [s for s in POPULATION if redistributable(MODELS[s].get("licence"))]
    validation = config["activate"]["validation"]
    return {
        "aggregate": expand("results/aggregate/{name}", name=release_aggregate_files()),
        "catalogue": "results/catalogue.tsv",
        "scores": expand("results/scores/{slug}.parquet", slug=POPULATION + SWEPT),
        "sweeps": (
            expand(
                "results/aggregate_sweeps/{name}",
                name=release_aggregate_files(SWEEP_TABLES, SWEEP_CSV_TABLES),
            )
            if SWEPT
            else []
        ),
        "catalogue_sweeps": ["results/catalogue_sweeps.tsv"] if SWEPT else [],
        "null": get_population_null(),
        "matrices": expand("results/matrices/{slug}.parquet", slug=licensed),
        "validation": (
            ["results/validation/paper_comparison.csv"] if validation else []
        ),
        "tables": [p for p in products if p.startswith("results/tables/")],
        "figures": [p for p in products if p.startswith("figures/")],
        "config": "results/release/config.yaml",
        **{key: str(path) for key, path in REPO_FILES.items()},
    }


def release_folder_flags(wildcards, input):
    """The folders of the per-model files (a command line that does not grow with the catalogue)."""
    flags = [
        f"--aggregate-dir {os.path.dirname(input.aggregate[0])}",
        f"--scores-dir {os.path.dirname(input.scores[0])}",
        "--matrices-dir results/matrices",
    ]
    if input.null:
        flags.append(f"--null-dir {os.path.dirname(input.null[0])}")
    if input.sweeps:
        flags.append(f"--sweeps-dir {os.path.dirname(input.sweeps[0])}")
        flags.append(f"--sweeps-catalogue {input.catalogue_sweeps[0]}")
    return " ".join(flags)
