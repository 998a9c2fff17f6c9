"""The workflow's training runs, from its config's `training` section (validated, defaults
filled): the grid of runs and their names, each run's `wqk train` flags, the saved steps,
the corpora's token budget, where a corpus and its tokenizer come from.

Torch-free: common.smk calls it when Snakemake parses the workflow.
"""

from itertools import product

from ..errors import WqkError
from ..ids import slug
from .corpus import NAMES as CORPUS_NAMES
from .spec import TrainConfig, checkpoint_steps, flags

# Name of each objective in run names, as the paper names its runs.
OBJECTIVE_SHORT = {"bidirectional": "encoder", "autoregressive": "decoder"}


def check_datasets(training: dict) -> None:
    """Every training.datasets name is a corpus of `wqk corpus` (wqk.training.corpus.NAMES)."""
    unknown = [d for d in training.get("datasets", []) if d not in CORPUS_NAMES]
    if unknown:
        raise WqkError(
            f"config training.datasets: unknown dataset {', '.join(map(repr, unknown))}; "
            f"the accepted names are {', '.join(CORPUS_NAMES)}"
        )


def runs(training: dict) -> dict[str, dict]:
    """Run name -> grid values (size, objective, init, dataset, seed), sorted by name, from
    sizes x objectives x inits x datasets. Every run is trained once per seed of
    training.seeds (default [training.seed]); an objective trained under several inits (the
    symmetric-initialisation comparison) once per seed of training.comparison_seeds (default:
    training.seeds). A run of another seed than training.seed is named with the suffix -s<seed>."""
    if not training:
        raise WqkError("activate: training is true but the config has no `training:` section")
    pairs = [(init, o) for init, objectives in training["inits"].items() for o in objectives]
    compared = {o for _, o in pairs if [p for _, p in pairs].count(o) > 1}
    base = training["seed"]
    every = training.get("seeds") or [base]
    out = {}
    for size, (init, objective), dataset in product(training["sizes"], pairs, training["datasets"]):
        seeds = (training.get("comparison_seeds") or every) if objective in compared else every
        for seed in seeds:
            name = f"{size}-{OBJECTIVE_SHORT[objective]}-{init}-{dataset}"
            name += "" if seed == base else f"-s{seed}"
            out[name] = dict(size=size, objective=objective, init=init, dataset=dataset, seed=seed)
    return dict(sorted(out.items()))


def run_flags(training: dict, run: dict, cls=TrainConfig) -> str:
    """Every setting of one run as `wqk train` flags: the config's keys, its size's, its own."""
    return flags({**training, **training["sizes"][run["size"]], **run}, cls)


def saved_steps(training: dict) -> list[str]:
    """The steps every run saves and scores, as the six digits of their file names."""
    return [f"{s:06d}" for s in checkpoint_steps(training["steps"], training["save_every"])]


def token_budget(training: dict) -> int:
    """Tokens one run reads: steps x batch_size x grad_accum x seq_len. The token file of a
    corpus holds at most that many (its first ones): a web snapshot is far larger."""
    return training["steps"] * training["batch_size"] * training["grad_accum"] * training["seq_len"]


def source_options(training: dict, dataset: str) -> str:
    """Where `wqk corpus` and `wqk tokenizer` find a dataset that is not on the hub."""
    if dataset == "jigsaw":
        return f"--jigsaw-dir {training['jigsaw_dir']}"
    if dataset == "red_pajama":
        return f"--red-pajama-url {training['red_pajama_url']}"
    return ""


def corpus_options(training: dict, dataset: str) -> str:
    return f"--max-tokens {token_budget(training)} {source_options(training, dataset)}".strip()


def tokenizer_dir(training: dict, dataset: str) -> str:
    tok = training.get("tokenizer", {})
    if "pretrained" in tok:
        return f"results/training/tokenizer/pretrained-{slug(tok['pretrained'])}"
    return f"results/training/tokenizer/corpus-{dataset}"
