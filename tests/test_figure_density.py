"""Figures that draw one marker per model draw a density above MAX_MARKERS markers a panel
(a hub atlas), the paper's models (models.parquet's in_paper) still as markers on top; at or
below it, every model's marker as before (tests/test_figures.py: byte-identical reruns).
The switch is tested at a threshold of 40, not the shipped 300: the same decision, drawn on an
atlas an eighth the size."""

from __future__ import annotations

from importlib import import_module

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgb

import toy_scores as toy
from wqk import aggregate as agg
from wqk import figures
from wqk.figures import _density
from wqk.figures._density import DENSITY_GID
from wqk.figures.spectral_signatures import MARKERS, METRICS, VIOLIN

MAX_MARKERS = 40


@pytest.fixture(autouse=True)
def few_markers(monkeypatch):
    assert _density.MAX_MARKERS > MAX_MARKERS
    monkeypatch.setattr(_density, "MAX_MARKERS", MAX_MARKERS)


@pytest.fixture(scope="module")
def atlas():
    """models.parquet of an atlas with more than MAX_MARKERS points in every panel."""
    s, cat = toy.atlas_world(per_group=MAX_MARKERS // 2 + 10, paper_every=8)
    return agg.aggregate(s, cat)["models"]


def draw(name: str, models, tmp_path, **params):
    """The figure, saved as the workflow saves it: `save` refuses one that fails the layout check."""
    fig = import_module(f"wqk.figures.{name}").draw({"models": models}, **params)
    figures.save(fig, tmp_path / f"{name}.pdf")
    return fig


def points(ax, filled: bool = True) -> int:
    """Points of the per-model circles of a scores-against-parameters panel."""
    lines = [line for line in ax.lines if line.get_marker() == "o"]
    return sum(len(line.get_xdata()) for line in lines if (line.get_markerfacecolor() != "none") == filled)


def hexbins(ax) -> list:
    return [c for c in ax.collections if c.get_gid() == DENSITY_GID]


def legend_texts(fig) -> list[str]:
    return [t.get_text() for legend in (*fig.legends, *(ax.get_legend() for ax in fig.axes)) if legend
            for t in legend.get_texts()]  # fmt: skip


def paper(models, stacks=("encoder", "decoder")):
    return models[models["stack"].isin(stacks) & models["in_paper"] & ~models["synthetic"]]


def test_in_paper_marks_the_stacks_the_catalogue_names():
    s, cat = toy.toy_world()
    cat["paper_stacks"] = ["encoder", "", "", "", "encoder,decoder", ""]  # enc-small; t5's self-attention
    models = agg.aggregate(s, cat)["models"].set_index(["model", "stack"])
    assert set(models.index[models["in_paper"]]) == {
        ("toy/enc-small", "encoder"), ("toy/t5", "encoder"), ("toy/t5", "decoder"),
    }  # fmt: skip


@pytest.mark.parametrize("name,stacks", [("scores_vs_params", ("encoder", "decoder")), ("encdec_stacks", None)])
def test_scatter_panels_draw_hexbins_and_the_paper_models_on_top(atlas, tmp_path, name, stacks):
    rows = atlas if stacks else atlas[atlas["model"].str.startswith("atlas/s2s")]
    expected = len(paper(rows))
    assert 0 < expected < MAX_MARKERS < len(rows[rows["stack"] != "cross"])
    fig = draw(name, atlas, tmp_path, **({"modality": "text"} if stacks else {}))
    panels, bars = fig.axes[:2], fig.axes[2:]
    for ax in panels:
        assert len(hexbins(ax)) == 2 and all(isinstance(c, PolyCollection) for c in hexbins(ax))
        assert points(ax) == expected  # the paper's models only
        assert points(ax, filled=False) == (1 if stacks else 0)  # the synthetic decoder, hollow
    groups = ["bidirectional", "autoregressive"] if stacks else ["encoder stack", "decoder stack"]
    assert sorted(b.get_ylabel() for b in bars) == sorted(f"{g}: models per bin" for g in groups)
    assert [t for t in legend_texts(fig) if t.endswith("the paper's models")] == [
        f"{g}: the paper's models" for g in groups
    ]
    # one colour scale: the same shade means as many models in every panel and group
    assert len({(c.norm.vmin, c.norm.vmax) for ax in panels for c in hexbins(ax)}) == 1


def test_spectral_signatures_draws_violins_and_the_paper_models(atlas, tmp_path):
    expected = len(paper(atlas))
    fig = draw("spectral_signatures", atlas, tmp_path)
    panels = [ax for ax in fig.axes if ax.get_title() in {title for title, _, _ in METRICS.values()}]
    assert len(panels) == len(METRICS)
    for ax in panels:
        violins = [c for c in ax.collections if np.allclose(c.get_facecolor()[:, :3], to_rgb(VIOLIN))]
        assert len(violins) == 3  # bidirectional, autoregressive, cross-attention
        marks = [line for line in ax.lines if line.get_marker() in MARKERS.values()]
        assert sum(line.get_markerfacecolor() != "none" for line in marks) == expected
        assert sum(line.get_markerfacecolor() == "none" for line in marks) == 1
    assert "density of all models (violin)" in legend_texts(fig) and "text: the paper's models" in legend_texts(fig)


def test_rotary_symmetry_draws_bands_and_the_paper_models(atlas, tmp_path):
    rotary = atlas[atlas["head_rotary_symmetry_d0_median"].notna()]
    expected = len(paper(rotary))
    assert 0 < expected and len(rotary) > MAX_MARKERS
    fig = draw("rotary_symmetry", atlas, tmp_path)
    ax = fig.axes[0]
    thin = [line for line in ax.lines if line.get_marker() == "o"]
    assert sum(line.get_linestyle() == "-" for line in thin) == expected
    assert sum(line.get_linestyle() == "--" for line in thin) == 1  # the synthetic decoder
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 2  # 10-90%, 25-75%
    assert "autoregressive: the paper's models" in legend_texts(fig)


def test_a_table_without_in_paper_draws_the_density_alone(atlas, tmp_path):
    fig = draw("scores_vs_params", atlas.drop(columns="in_paper"), tmp_path, modality="text")
    assert all(len(hexbins(ax)) == 2 and points(ax) == 0 for ax in fig.axes[:2])


def test_at_the_threshold_every_model_is_a_marker(atlas, tmp_path):
    cut = atlas[atlas["stack"] != "cross"].iloc[:MAX_MARKERS]
    fig = draw("scores_vs_params", cut, tmp_path, modality="text")
    assert len(fig.axes) == 2  # no colour bars
    for ax in fig.axes:
        assert not hexbins(ax) and points(ax) + points(ax, filled=False) == MAX_MARKERS
    fig = draw("spectral_signatures", cut, tmp_path)
    assert not any(isinstance(c, PolyCollection) for ax in fig.axes for c in ax.collections)
    assert len([line for line in fig.axes[0].lines if line.get_marker() in MARKERS.values()]) == MAX_MARKERS
    decoders = atlas[atlas["stack"] == "decoder"].iloc[:MAX_MARKERS]
    fig = draw("rotary_symmetry", decoders, tmp_path)
    assert not fig.axes[0].collections
    assert len([line for line in fig.axes[0].lines if line.get_marker() == "o"]) == MAX_MARKERS
