"""The figure and table registry (wqk.registry) and the code inputs it gives each rule
(wqk.code_graph): which files rendering a figure may run, read from the source."""

from __future__ import annotations

import pytest
import yaml

from rehearse import ROOT
from wqk import code_graph, registry
from wqk.errors import WqkError
from wqk.registry import PRODUCTS, Plan


def config(name: str) -> dict:
    """A config as the workflow sees it after validation (only the keys the registry reads)."""
    cfg = yaml.safe_load((ROOT / name).read_text())
    cfg.setdefault("figures", {})
    cfg.setdefault("validation", {}).setdefault("training_curves", "config/paper/training_curves.csv")
    return cfg


def test_every_figure_and_table_module_is_registered_once_with_its_caption():
    registered = [(p.kind, p.name) for p in PRODUCTS]
    assert len(registered) == len(set(registered))
    on_disk = {
        (kind, f.stem)
        for kind in ("figure", "table")
        for f in (ROOT / "workflow" / "wqk" / f"{kind}s").glob("*.py")
        if not f.stem.startswith("_")
    }
    assert set(registered) == on_disk
    assert registry.check_modules() == []


def test_the_check_names_a_missing_module_and_caption(tmp_path):
    pkg = tmp_path / "workflow" / "wqk"
    (pkg / "figures").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "figures" / "__init__.py").write_text("")
    (pkg / "figures" / "depth_profile.py").write_text("")
    (tmp_path / "workflow" / "report").mkdir()
    problems = registry.check_modules(pkg)
    assert "figure_depth_profile: no caption" in " ".join(problems)
    assert "figure_wqk_heatmaps: no module wqk.figures.wqk_heatmaps" in problems


def test_the_quickstart_plan_makes_what_its_catalogue_and_training_ask_for():
    plan = Plan(
        config=config("config/quickstart.yaml"),
        groups=frozenset({"language", "audio", "encdec", "table"}),
        datasets=("pydoc",),
        slugs=frozenset({"sentence-transformers--all-minilm-l6-v2", "openai--whisper-tiny.en"}),
    )
    figures = registry.stems(plan, "figure")
    assert figures == [
        "wqk_heatmaps",
        "scores_vs_params_language",
        "scores_vs_params_audio",
        "encdec_stacks",
        "head_distributions",
        "depth_profile",
        "spectral_signatures",
        "rotary_symmetry",
        "fingerprint_signatures",
        "head_types",
        "qk_spectra_signatures",
        "quantisation_changes",
        "training_scores_pydoc",
        "training_layers_pydoc",
        "training_loss",
    ]  # fmt: skip
    # (vision: no model; validation off: no paper tables)
    assert registry.stems(plan, "table") == [
        "scores_all", "robustness", "quantisation", "scores_language", "symmetric_init", "training_finals",
    ]  # fmt: skip
    targets = registry.targets(plan)
    assert "figures/training_loss.pdf" in targets and "results/tables/symmetric_init.tex" in targets
    assert len(targets) == 15 * 2 + 6 * 4
    paper = Plan(config=config("config/config.yaml"), groups=plan.groups, datasets=(), slugs=plan.slugs)
    assert not {"fingerprint_signatures", "head_types", "qk_spectra_signatures"} & set(registry.stems(paper, "figure"))


def test_validation_and_training_switch_their_products_on_and_off():
    cfg = config("config/config.yaml")
    trained = Plan(config=cfg, groups=frozenset({"language"}), datasets=("wikipedia", "jigsaw"))
    tables = registry.stems(trained, "table")
    assert {"paper_comparison", "errata", "training_comparison", "symmetric_init"} <= set(tables)
    assert registry.stems(trained, "figure")[-5:] == [
        "training_scores_wikipedia", "training_scores_jigsaw", "training_layers_wikipedia",
        "training_layers_jigsaw", "training_loss",
    ]  # fmt: skip
    off = dict(cfg, activate=dict(cfg["activate"], validation=False, figures=False))
    untrained = Plan(config=off, groups=frozenset({"language"}))
    assert registry.stems(untrained, "table") == ["scores_all", "robustness", "scores_language"]
    assert not any(t.startswith("figures/") for t in registry.targets(untrained))
    training_scores = next(p for p in PRODUCTS if p.name == "training_scores")
    assert set(training_scores.data(trained)) == {"summary", "published"}  # the paper's curves overlaid
    assert set(training_scores.data(untrained)) == {"summary"}


def test_params_are_the_config_section_and_the_wildcards_keywords():
    cfg = config("config/config.yaml")
    plan = Plan(config=cfg, slugs=frozenset({cfg["figures"]["wqk_heatmaps"]["encoder"]}))
    by_name = {p.name: p for p in PRODUCTS}
    assert by_name["scores_vs_params"].param_flags(plan, "vision") == "--param figure=vision modality=vision"
    assert by_name["wqk_heatmaps"].param_flags(plan) == (
        "--param decoder_stack=decoder encoder_stack=encoder layer=1 size=50"
    )  # the two models are inputs, not keywords
    assert by_name["training_layers"].param_flags(plan, "pydoc") == "--param dataset=pydoc"
    assert by_name["depth_profile"].param_flags(plan) == ""
    assert by_name["scores_language"].param_flags(plan) == "--param figure=table"
    assert by_name["scores_vs_params"].outputs() == [
        "figures/scores_vs_params_{group}.pdf",
        "figures/scores_vs_params_{group}.png",
    ]
    assert by_name["scores_vs_params"].labels() == {"figure": "scores vs parameters", "models": "{group}"}
    encoder = by_name["wqk_heatmaps"].inputs["encoder"](plan)
    assert encoder == f"results/matrices/{cfg['figures']['wqk_heatmaps']['encoder']}.parquet"
    with pytest.raises(WqkError, match="decoder: 'roneneldan--tinystories-3m' is not a slug of the catalogue"):
        by_name["wqk_heatmaps"].data(plan)


def _package(tmp_path, files: dict[str, str]):
    pkg = tmp_path / "wqk"
    for name, text in {"__init__.py": "", **files}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def test_code_inputs_follow_imports_down_and_the_parents_that_load_first(tmp_path):
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "from .front import f\n",
            "front.py": "def f():\n    from .heavy import x\n",  # loaded with the package, never called
            "heavy.py": "",
            "style.py": "",
            "shared.py": "def g():\n    from .deep import y\n",
            "deep.py": "",
            "figures/__init__.py": "from ..style import RC\n",
            "figures/one.py": "from . import save\nfrom ..shared import g\n",
            "figures/two.py": "def draw():\n    from ..shared import g\n",
            "figures/three.py": "",
        },
    )
    one = code_graph.files(["wqk.figures.one"], pkg)
    assert one == [
        "__init__.py",
        "deep.py",
        "figures/__init__.py",
        "figures/one.py",
        "front.py",
        "shared.py",
        "style.py",
    ]  # fmt: skip
    # (heavy.py: only a function of a module loaded with the package imports it)
    assert "shared.py" in code_graph.files(["wqk.figures.two"], pkg)  # a function-level import counts
    assert code_graph.files(["wqk.figures.three"], pkg) == ["__init__.py", "figures/__init__.py", "figures/three.py", "front.py", "style.py"]  # fmt: skip
    # a module first reached as loaded-only and later imported for use is followed fully
    both = code_graph.files(["wqk.figures.three", "wqk.front"], pkg)
    assert "heavy.py" in both


def test_the_real_registry_code_inputs_name_shared_modules_only_where_imported():
    by_name = {p.name: p for p in PRODUCTS}
    depth = by_name["depth_profile"].code()
    assert "figures/depth_profile.py" in depth and "figures/__init__.py" in depth
    assert "commands/figure.py" in depth and "cli.py" in depth
    assert "report_data.py" not in depth and "figures/scores_vs_params.py" not in depth
    assert "scoring.py" not in depth  # wqk/__init__.py loads wqk.api, whose scoring import runs only in a call
    assert "figures/scores_vs_params.py" in by_name["encdec_stacks"].code()
    assert "report_data.py" in by_name["scores_language"].code()
    assert not any(f.startswith("figures/") for f in by_name["scores_all"].code())
    # the training figures share report_data with the tables, not the training code itself
    assert not any(f.startswith("training/") for f in by_name["training_loss"].code())
