"""Metrics beyond the paper's two: their aggregation, the spectral and rotary figures and the
robustness table, from synthetic scores frames whose answers are known."""

from __future__ import annotations

import hashlib
from importlib import import_module
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toy_scores as toy
from wqk import aggregate as agg
from wqk import figures
from wqk.cli import main as wqk_main
from wqk.contracts import METRICS
from wqk.tables import robustness

SPECTRA = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")
FOLDED = ("symmetry_gain", "directionality_gain", "symmetry_bias", "directionality_bias")


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def with_metrics(scores: pd.DataFrame, seed: int = 0, rotary=(), offsets=(0, 1, 2, 4, 8), folded=True):
    """Scores plus the registry's columns: spectra on head rows (layer rows NaN), rotary
    symmetry for the models in `rotary` (NaN for the others), folded forms on every row."""
    rng = np.random.default_rng(seed)
    out = scores.copy()
    head = (out["scope"] == "head").to_numpy()
    for c in SPECTRA:
        v = rng.uniform(1, 8, len(out)) if c.endswith("rank") else rng.uniform(0, 1, len(out))
        out[c] = np.where(head, v, np.nan)
    is_rot = out["model"].isin(rotary).to_numpy()
    for d in offsets:
        out[f"rotary_symmetry_d{d}"] = np.where(is_rot, out["symmetry"] * np.exp(-d / 4), np.nan)
    if folded:
        out["symmetry_gain"] = out["symmetry"] + 0.05
        out["directionality_gain"] = out["directionality"] - 0.05
        out["symmetry_bias"] = np.nan  # no q/k bias anywhere: all NaN
        out["directionality_bias"] = np.nan
    return out


@pytest.fixture(scope="module")
def world():
    s, cat = toy.toy_world()
    return with_metrics(s, rotary=["toy/dec-small", "toy/dec-tiny-random"]), s, cat


@pytest.fixture(scope="module")
def tables(world):
    scores, _, cat = world
    return agg.aggregate(scores, cat, null_reference(scores))


def null_reference(scores: pd.DataFrame) -> pd.DataFrame:
    """A stand-in for `wqk null` outputs with spectra: head rows per model at known values."""
    rows = scores[["model", "stack", "layer", "n_layers", "scope", "head", *METRICS, *SPECTRA]].copy()
    rows["model"] = rows["model"] + " (null)"
    rows[list(METRICS)] = 0.0
    odd = rows["head"].to_numpy(dtype=float, na_value=0) % 2  # two heads: 0.5 + i and 0.6 + i
    for i, c in enumerate(SPECTRA):
        rows[c] = np.where(rows["scope"] == "head", 0.5 + i + 0.1 * odd, np.nan)
    return rows


# ------------------------------------------------------------------ aggregation
def test_metric_columns_are_the_paper_two_then_every_extra_float():
    s, _ = toy.toy_world()
    assert agg.metric_columns(s) == list(METRICS)  # fro_norm, E_r, E_c are schema columns
    extra = with_metrics(s, rotary=["toy/dec-small"], offsets=(4, 0, 16, 1))
    assert agg.metric_columns(extra) == [
        *METRICS, *SPECTRA, "rotary_symmetry_d0", "rotary_symmetry_d1", "rotary_symmetry_d4", "rotary_symmetry_d16",
        *FOLDED,
    ]  # fmt: skip


def test_rotary_offsets_stay_together_whichever_file_comes_first():
    """Models with different offset sets: the union, in numeric order, at the family's place."""
    s, _ = toy.toy_world()
    short = with_metrics(s[s["model"] == "toy/enc-small"], rotary=["toy/enc-small"], offsets=(0, 1))
    long = with_metrics(s[s["model"] == "toy/dec-small"], rotary=["toy/dec-small"], offsets=(0, 1, 2, 64))
    for frames in ((short, long), (long, short)):
        cols = agg.metric_columns(pd.concat(frames, ignore_index=True))
        rot = [c for c in cols if c.startswith("rotary")]
        assert rot == [f"rotary_symmetry_d{d}" for d in (0, 1, 2, 64)]
        assert cols.index(rot[-1]) - cols.index(rot[0]) == 3 and cols.index(FOLDED[0]) > cols.index(rot[-1])


def test_scores_without_new_columns_aggregate_as_before(world):
    """The paper's columns keep their names, order and values; new ones come after them."""
    scores, plain, cat = world
    old, new = agg.aggregate(plain, cat), agg.aggregate(scores, cat)
    for name in ("models", "groups", "layers", "heads"):
        before = list(old[name].columns)
        assert list(new[name].columns[: len(before)]) == before, name
        pd.testing.assert_frame_equal(new[name][before], old[name], obj=name)
    assert list(new["groups"].columns) == list(old["groups"].columns)  # the groups stay on the paper's two


def test_models_table_quartiles_of_new_metrics_by_hand(tables, world):
    scores, _, _ = world
    m = tables["models"].set_index(["model", "stack"])
    heads = scores[(scores["model"] == "toy/t5") & (scores["stack"] == "decoder") & (scores["scope"] == "head")]
    q25, med, q75 = np.percentile(heads["stable_rank"], [25, 50, 75])
    row = m.loc[("toy/t5", "decoder")]
    assert (row["head_stable_rank_median"], row["head_stable_rank_q25"], row["head_stable_rank_q75"]) == pytest.approx(
        (med, q25, q75)
    )
    layers = scores[(scores["model"] == "toy/dec-small") & (scores["scope"] == "layer")]
    q25, med, q75 = np.percentile(layers["rotary_symmetry_d4"], [25, 50, 75])
    row = m.loc[("toy/dec-small", "decoder")]
    assert (row["rotary_symmetry_d4_median"], row["rotary_symmetry_d4_q25"]) == pytest.approx((med, q25))
    assert row["rotary_symmetry_d4_q75"] == pytest.approx(q75)
    # a non-rotary model: NaN there; folded forms over layers
    assert np.isnan(m.loc[("toy/enc-small", "encoder"), "head_rotary_symmetry_d4_median"])
    enc = scores[(scores["model"] == "toy/enc-small") & (scores["scope"] == "layer")]
    assert m.loc[("toy/enc-small", "encoder"), "symmetry_gain_median"] == pytest.approx(
        np.median(enc["symmetry"]) + 0.05
    )


def test_all_nan_columns_are_left_out_of_the_summaries_not_of_the_long_tables(tables):
    cols = set(tables["models"].columns)
    # spectra: NaN on layer rows (no layer_spectra), so over heads only
    assert "head_stable_rank_median" in cols and "stable_rank_median" not in cols
    # the bias-augmented form is NaN everywhere: no summary at all
    assert not {c for c in cols if "_bias_" in c}
    for name in ("layers", "heads"):
        assert set(FOLDED) | set(SPECTRA) <= set(tables[name].columns), name
        assert tables[name]["symmetry_bias"].isna().all()
    assert tables["heads"]["stable_rank"].notna().all() and tables["layers"]["stable_rank"].isna().all()


def test_null_reference_of_new_metrics(tables, world):
    scores, _, _ = world
    null = null_reference(scores)
    m = tables["models"].set_index(["model", "stack"])
    sel = (null["model"] == "toy/whisper (null)") & (null["stack"] == "encoder") & (null["scope"] == "head")
    assert m.loc[("toy/whisper", "encoder"), "null_head_effective_rank_median"] == pytest.approx(
        np.median(null.loc[sel, "effective_rank"])
    )
    assert "null_stable_rank_median" not in m.columns  # NaN on the null's layer rows
    assert "null_symmetry_median" in m.columns and "null_head_symmetry_median" not in m.columns


# ------------------------------------------------------------------ figures
def render_twice(name: str, data: dict, tmp_path: Path, **params):
    digests = []
    for run in ("a", "b"):
        fig = import_module(f"wqk.figures.{name}").draw(data, **params)
        pdf, png = figures.save(fig, tmp_path / run / f"{name}.pdf")
        assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
        digests.append((sha(pdf), sha(png)))
    assert digests[0] == digests[1]
    assert fig.get_size_inches()[0] <= figures.DOUBLE
    return fig


def texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_spectral_signatures_renders_with_few_models_and_nan_panels(tables, tmp_path):
    fig = render_twice("spectral_signatures", tables, tmp_path)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == 5 and not texts(fig)
    # the null's median is a line in every panel (per model 0.55 + i for metric i)
    for i, ax in enumerate(panels):
        assert any(np.allclose(line.get_ydata(), 0.55 + i) for line in ax.lines), ax.get_title()
    models = tables["models"].copy()
    models["head_spectral_radius_median"] = np.nan
    models = models.drop(columns=[c for c in models if "real_eig_share" in c])
    fig = render_twice("spectral_signatures", {"models": models}, tmp_path / "nan")
    assert texts(fig).count("NaN for every model") == 1 and texts(fig).count("not computed in this run") == 1
    # one real model only, and no null reference: still a figure
    one = tables["models"][tables["models"]["model"] == "toy/enc-small"]
    render_twice("spectral_signatures", {"models": one.drop(columns=[c for c in one if "null" in c])}, tmp_path / "one")


def test_rotary_symmetry_draws_rotary_models_only(tables, tmp_path):
    fig = render_twice("rotary_symmetry", tables, tmp_path)
    ax = fig.axes[0]
    assert ax.get_xscale() == "symlog" and ax.get_xlim()[0] == 0
    # two rotary decoders (one synthetic), one median line over the real one
    thin = [line for line in ax.lines if line.get_marker() == "o"]
    assert len(thin) == 2 and sorted(line.get_linestyle() for line in thin) == ["-", "--"]
    real = tables["models"].set_index(["model", "stack"]).loc[("toy/dec-small", "decoder")]
    solid = next(line for line in thin if line.get_linestyle() == "-")
    assert list(solid.get_xdata()) == [0, 1, 2, 4, 8]
    assert solid.get_ydata()[2] == pytest.approx(real["head_rotary_symmetry_d2_median"])
    assert not texts(fig)


def test_rotary_symmetry_empty_state(tables, tmp_path):
    models = tables["models"]
    for data in (models.drop(columns=[c for c in models if "rotary" in c]), models[models["model"] == "toy/t5"]):
        fig = render_twice("rotary_symmetry", {"models": data}, tmp_path)
        assert "no rotary models in this run" in texts(fig)


def test_figure_cli_renders_the_new_figures(tables, tmp_path):
    agg.write_outputs(tables, tmp_path / "aggregate")
    for name in ("spectral_signatures", "rotary_symmetry"):
        out = tmp_path / f"{name}.pdf"
        argv = ["figure", name, "--in", f"models={tmp_path / 'aggregate' / 'models.parquet'}", "--out", str(out)]
        assert wqk_main(argv) == 0 and out.with_suffix(".png").stat().st_size > 1000


# ------------------------------------------------------------------ robustness table
def known_models(bi_sym=(0.6, 0.5, 0.4), ar_sym=(0.1, 0.2), ar_dir=(-0.3, -0.1), folded=True) -> pd.DataFrame:
    rows = []
    for i, s in enumerate(bi_sym):
        rows.append(dict(model=f"bi{i}", stack="encoder", objective="bidirectional", synthetic=False,
                         symmetry_median=s, directionality_median=0.0))  # fmt: skip
    for i, (s, d) in enumerate(zip(ar_sym, ar_dir)):
        rows.append(dict(model=f"ar{i}", stack="decoder", objective="autoregressive", synthetic=False,
                         symmetry_median=s, directionality_median=d))  # fmt: skip
    rows.append(dict(model="junk", stack="decoder", objective="autoregressive", synthetic=True,
                     symmetry_median=0.99, directionality_median=0.9))  # fmt: skip
    rows.append(dict(model="x", stack="cross", objective="cross-attention", synthetic=False,
                     symmetry_median=0.99, directionality_median=0.9))  # fmt: skip
    df = pd.DataFrame(rows)
    if folded:
        df["symmetry_gain_median"] = df["symmetry_median"]
        df["directionality_gain_median"] = df["directionality_median"]
        df.loc[df["objective"] == "bidirectional", "symmetry_gain_median"] = np.nan  # no gain: bi side empty
        df["symmetry_bias_median"] = 1 - df["symmetry_median"]
        df["directionality_bias_median"] = -df["directionality_median"]
    return df


def test_robustness_verdicts_known_and_flipped(tmp_path):
    t = robustness.build({"models": known_models()}).set_index("variant")
    paper = t.loc["paper"]
    assert (paper["n_bidirectional"], paper["n_autoregressive"]) == (3, 2)  # synthetic and cross left out
    assert paper["symmetry_bidirectional"] == pytest.approx(0.5)
    assert paper["symmetry_autoregressive"] == pytest.approx(0.15)
    assert paper["directionality_autoregressive"] == pytest.approx(-0.2)
    assert paper["bidirectional_more_symmetric"] and paper["autoregressive_column_dominant"]
    assert paper["verdict"] == f"{robustness.MORE_SYMMETRIC}; {robustness.COLUMN_DOMINANT}"
    gain = t.loc["gain-folded"]
    assert gain["n_bidirectional"] == 0 and gain["verdict"] == "not enough models"
    assert pd.isna(gain["bidirectional_more_symmetric"])
    # the bias variant: symmetry mirrored (1 - s), directionality negated -> both flip
    bias = t.loc["bias-augmented"]
    assert not bias["bidirectional_more_symmetric"] and not bias["autoregressive_column_dominant"]
    assert bias["verdict"] == f"not {robustness.MORE_SYMMETRIC}; not {robustness.COLUMN_DOMINANT}"
    # swapping the data swaps the answer
    swapped = robustness.build({"models": known_models(bi_sym=(0.1, 0.2, 0.0), ar_sym=(0.6, 0.5), ar_dir=(0.3, 0.1))})
    p = swapped.set_index("variant").loc["paper"]
    assert not p["bidirectional_more_symmetric"] and not p["autoregressive_column_dominant"]
    # variants this run did not score; synthetic models on request
    t = robustness.build({"models": known_models(folded=False)}, synthetic=True).set_index("variant")
    assert t.loc["gain-folded", "verdict"] == "not computed in this run" and t.loc["paper", "n_autoregressive"] == 3
    # via the CLI: three files, the booleans as yes/no in Markdown
    path = tmp_path / "models.parquet"
    known_models().to_parquet(path, index=False)
    stem = tmp_path / "tables" / "robustness"
    assert wqk_main(["table", "robustness", "--in", f"models={path}", "--out", str(stem)]) == 0
    csv = pd.read_csv(stem.with_suffix(".csv"))
    assert list(csv["variant"]) == ["paper", "gain-folded", "bias-augmented"]
    assert "| yes | yes |" in stem.with_suffix(".md").read_text()


def test_robustness_on_aggregated_toy_world(tables):
    t = robustness.build(tables).set_index("variant")
    assert t.loc["paper", "verdict"] == t.loc["gain-folded", "verdict"]
    assert t.loc["bias-augmented", "verdict"] == "not computed in this run"  # all NaN: no summary columns
    assert t.loc["paper", "n_bidirectional"] == 4 and t.loc["paper", "n_autoregressive"] == 3
