"""Every figure and table, registered once: its data inputs, its parameters, when a run makes
it, and its report entry. The workflow generates one rule per entry (workflow/rules/products.smk)
and its targets from this list; nothing else names a figure or a table.

An entry's module is wqk.figures.<name> or wqk.tables.<name>, rendered by `wqk figure` or
`wqk table`. Its code inputs are the files that rendering may run (wqk.code_graph), so that
editing shared code reruns exactly the figures and tables that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import code_graph
from .errors import WqkError

# Figure key of a scores-vs-parameters figure -> modality of its models.
GROUP_MODALITY = {"language": "text", "vision": "vision", "audio": "audio"}
SUFFIXES = {"figure": (".pdf", ".png"), "table": (".csv", ".md", ".tex", ".html")}  # wqk.figures.save, wqk.tables.write
FOLDERS = {"figure": "figures", "table": "results/tables"}
MODELS = "results/aggregate/models.parquet"
SWEEPS = "results/aggregate_sweeps/models.parquet"  # the swept models' revisions (wqk.sweeps)
QUANTISATION = "results/quantisation/summary.csv"  # `wqk quantisation --summary-out` of quantisation.models


@dataclass(frozen=True)
class Plan:
    """What decides which figures and tables a run makes, and from which files."""

    config: Mapping
    groups: frozenset = frozenset()  # the catalogue's figure keys that have a model
    datasets: tuple = ()  # datasets of the training runs; () when nothing is trained
    slugs: frozenset = frozenset()  # the catalogue's models
    sweeps: bool = False  # some are revisions of a swept model (wqk.sweeps)
    population: bool = True  # some are not (the models of the catalogue's own lines): aggregated

    @property
    def validation(self) -> bool:
        return bool(self.config["activate"]["validation"])

    def section(self, kind: str, name: str) -> dict:
        """The config section of one figure or table ({} if none)."""
        return dict(self.config.get(f"{kind}s", {}).get(name) or {})


@dataclass(frozen=True)
class Product:
    kind: str  # "figure" or "table"
    name: str  # its module, and the stem of its files unless `per` is set
    category: str  # report category
    title: str  # report subcategory and label: what the figure or table shows
    inputs: Mapping[str, str | Callable[[Plan], str | None]]  # key -> a path, or a path from the plan (None: not used)
    made: Callable[[Plan], bool | list[str]] = lambda plan: True  # made at all, or the values of `per`
    per: str = ""  # a wildcard: one file per value (group, dataset)
    params: Callable[[str], dict] = lambda value: {}  # keywords from the wildcard's value; None drops a config key

    @property
    def rule(self) -> str:
        return f"{self.kind}_{self.name}"

    @property
    def stem(self) -> str:
        """The file stem, with the wildcard of `per`: scores_vs_params_{group}."""
        return f"{self.name}_{{{self.per}}}" if self.per else self.name

    def outputs(self) -> list[str]:
        return [f"{FOLDERS[self.kind]}/{self.stem}{ext}" for ext in SUFFIXES[self.kind]]

    def stems(self, plan: Plan) -> list[str]:
        """The file stems a run with this plan makes."""
        made = self.made(plan)
        if not self.per:
            return [self.name] if made else []
        return [f"{self.name}_{v}" for v in made]

    def data(self, plan: Plan) -> dict[str, str]:
        """Data inputs by key (the keys of `wqk figure/table --in`)."""
        out = {}
        for key, path in self.inputs.items():
            path = path(plan) if callable(path) else path
            if path is not None:
                out[key] = path
        return out

    def param_flags(self, plan: Plan, value: str = "") -> str:
        """`--param key=value ...` of the config section and the wildcard's keywords ('' if none)."""
        params = {**plan.section(self.kind, self.name), **self.params(value)}
        pairs = " ".join(f"{k}={v}" for k, v in sorted(params.items()) if v is not None)
        return f"--param {pairs}" if pairs else ""

    def code(self, package=code_graph.PACKAGE) -> list[str]:
        """Files of the package (relative to its folder) that rendering this entry may run."""
        return code_graph.command_files(f"wqk.{self.kind}s.{self.name}", self.kind, package)

    @property
    def caption(self) -> str:
        return f"{self.name}.rst"

    def labels(self) -> dict[str, str]:
        label = {"group": "models", "dataset": "dataset"}.get(self.per)
        return {self.kind: self.title, **({label: f"{{{self.per}}}"} if label else {})}


def _heatmap_model(which: str) -> Callable[[Plan], str]:
    def path(plan: Plan) -> str:
        name = plan.config["figures"]["wqk_heatmaps"][which]
        if name not in plan.slugs:
            raise WqkError(
                f"figures: wqk_heatmaps: {which}: '{name}' is not a slug of the catalogue {plan.config['catalogue']}"
            )
        return f"results/matrices/{name}.parquet"

    return path


def _groups(plan: Plan) -> list[str]:
    return [g for g in plan.config["figures"]["scores_vs_params"]["groups"] if g in plan.groups]


def _published_curves(plan: Plan) -> str | None:
    """With validation active, the training-score figures overlay the paper's published curves."""
    return plan.config["validation"]["training_curves"] if plan.validation else None


def _population(plan: Plan) -> bool:
    """The aggregate of the catalogue's own models exists (a catalogue of sweeps only has none)."""
    return plan.population


def _validated(plan: Plan) -> bool:
    """Validation compares the catalogue's own models (not revisions of sweeps) with the paper."""
    return plan.validation and plan.population


def _computes(family: str) -> Callable[[Plan], bool]:
    """Made where the run's scores compute the metric family (score.metrics) of a population."""

    def made(plan: Plan) -> bool:
        from .metric_catalogue import select

        return plan.population and family in select((plan.config.get("score") or {}).get("metrics") or ["default"])

    return made


def _quantises(plan: Plan) -> bool:
    return bool((plan.config.get("quantisation") or {}).get("models"))


def _trained(plan: Plan) -> bool:
    return bool(plan.datasets)


def _compares_inits(plan: Plan) -> bool:
    return _trained(plan) and {"default", "symmetric"} <= set(plan.config["training"]["inits"])


PRETRAINED, BEYOND, TRAINING = "Pretrained models", "Beyond the paper", "Training"
SCORES, PAPER = "Scores", "Comparison with the paper"

PRODUCTS = (
    Product(
        "figure", "wqk_heatmaps", PRETRAINED, "W_q W_k^T heatmaps",
        inputs={"encoder": _heatmap_model("encoder"), "decoder": _heatmap_model("decoder")},
        made=lambda plan: "wqk_heatmaps" in plan.config["figures"],
        params=lambda value: {"encoder": None, "decoder": None},
    ),
    Product(
        "figure", "scores_vs_params", PRETRAINED, "scores vs parameters",
        inputs={"models": MODELS}, made=_groups, per="group",
        params=lambda group: {"groups": None, "modality": GROUP_MODALITY[group], "figure": group},
    ),
    Product(
        "figure", "encdec_stacks", PRETRAINED, "encoder-decoder stacks",
        inputs={"models": MODELS}, made=lambda plan: "encdec" in plan.groups,
    ),
    Product("figure", "head_distributions", BEYOND, "head distributions", inputs={"heads": "results/aggregate/heads.parquet"}, made=_population),
    Product("figure", "depth_profile", BEYOND, "depth profile", inputs={"layers": "results/aggregate/layers.parquet"}, made=_population),
    Product("figure", "spectral_signatures", BEYOND, "spectral signatures", inputs={"models": MODELS}, made=_population),
    Product("figure", "rotary_symmetry", BEYOND, "rotary-aware symmetry", inputs={"models": MODELS}, made=_population),
    Product(
        "figure", "fingerprint_signatures", BEYOND, "fingerprint metrics (qk-spectral-fingerprint)",
        inputs={"models": MODELS}, made=_computes("fingerprint"),
    ),
    Product(
        "figure", "head_types", BEYOND, "head types (attention-bilinear-forms)",
        inputs={"heads": "results/aggregate/heads.parquet"}, made=_computes("bilinear_forms"),
    ),
    Product(
        "figure", "qk_spectra_signatures", BEYOND, "squared singular value spectra (qk-spectral-analysis)",
        inputs={"models": MODELS, "heads": "results/aggregate/heads.parquet"}, made=_computes("qk_spectra"),
    ),
    Product(
        "figure", "quantisation_changes", BEYOND, "what quantisation does",
        inputs={"quantisation": QUANTISATION}, made=_quantises,
    ),
    Product(
        "figure", "training_scores", TRAINING, "scores during training",
        inputs={"summary": "results/training/summary.csv", "published": _published_curves},
        made=lambda plan: list(plan.datasets), per="dataset", params=lambda dataset: {"dataset": dataset},
    ),
    Product(
        "figure", "training_layers", TRAINING, "scores per layer during training",
        inputs={"layers": "results/training/layers.csv"},
        made=lambda plan: list(plan.datasets), per="dataset", params=lambda dataset: {"dataset": dataset},
    ),
    Product(
        "figure", "training_loss", TRAINING, "loss during training",
        inputs={"losses": "results/training/losses.csv"}, made=_trained,
    ),
    Product(
        "figure", "sweep_dynamics", TRAINING, "public training histories",
        inputs={"sweeps": SWEEPS, "summary": lambda plan: "results/training/summary.csv" if _trained(plan) else None},
        made=lambda plan: plan.sweeps,
    ),
    Product("table", "scores_all", SCORES, "scores of every model", inputs={"models": MODELS}, made=_population),
    Product("table", "robustness", BEYOND, "robustness of the findings", inputs={"models": MODELS}, made=_population),
    Product(
        "table", "quantisation", BEYOND, "what quantisation does",
        inputs={"quantisation": QUANTISATION}, made=_quantises,
    ),
    Product(
        "table", "scores_language", SCORES, "scores of the paper's language models",
        inputs={"models": MODELS}, made=lambda plan: "language" in plan.groups,
    ),
    Product(
        "table", "paper_comparison", PAPER, "ours against the paper",
        inputs={"comparison": "results/validation/paper_comparison.csv"}, made=_validated,
    ),
    Product(
        "table", "errata", PAPER, "errata",
        inputs={"comparison": "results/validation/paper_comparison.csv"}, made=_validated,
    ),
    Product(
        "table", "symmetric_init", TRAINING, "symmetric initialisation",
        inputs={"losses": "results/training/losses.csv", "summary": "results/training/summary.csv"},
        made=_compares_inits,
    ),
    Product(
        "table", "training_finals", TRAINING, "final scores of the runs over seeds",
        inputs={"summary": "results/training/summary.csv"}, made=_trained,
    ),
    Product(
        "table", "sweep_scores", TRAINING, "scores along public training histories",
        inputs={"sweeps": SWEEPS}, made=lambda plan: plan.sweeps,
    ),
    Product(
        "table", "training_comparison", TRAINING, "training against the paper",
        inputs={"summary": "results/training/summary.csv", "published": lambda plan: plan.config["validation"]["training_curves"]},
        made=lambda plan: _trained(plan) and plan.validation,
    ),
)  # fmt: skip


def products(kind: str | None = None) -> list[Product]:
    return [p for p in PRODUCTS if kind is None or p.kind == kind]


def stems(plan: Plan, kind: str) -> list[str]:
    """The file stems of every figure or table a run with this plan makes, in registry order."""
    return [s for p in products(kind) for s in p.stems(plan)]


def targets(plan: Plan) -> list[str]:
    """Every file of the figures and tables a run makes (as its config activates them)."""
    active = plan.config["activate"]
    out = []
    for kind, on in (("figure", active["figures"]), ("table", active["tables"])):
        if on:
            out += [f"{FOLDERS[kind]}/{s}{ext}" for ext in SUFFIXES[kind] for s in stems(plan, kind)]
    return out


def check_modules(package=code_graph.PACKAGE) -> list[str]:
    """Entries whose module or report caption does not exist (empty when the registry is whole)."""
    found = code_graph.modules(package)
    report = package.parent / "report"
    problems = [
        f"{p.rule}: no module wqk.{p.kind}s.{p.name}" for p in PRODUCTS if f"wqk.{p.kind}s.{p.name}" not in found
    ]
    problems += [f"{p.rule}: no caption {report / p.caption}" for p in PRODUCTS if not (report / p.caption).is_file()]
    return problems
