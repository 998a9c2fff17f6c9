"""Every figure renders from toy aggregates, twice to identical PDF and PNG bytes."""

from __future__ import annotations

import hashlib
from importlib import import_module
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import toy_scores as toy
from wqk import aggregate as agg
from wqk import figures
from wqk.blocks import AttentionBlock
from wqk.cli import main as wqk_main
from wqk.contracts import ModelInfo
from wqk.figures import wqk_heatmaps
from wqk.matrices import block_table


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def aggregates(tmp_path_factory):
    s, cat = toy.toy_world()
    tables = agg.aggregate(s, cat)
    null = tables["models"][["model", "stack"]].copy()
    null["null_symmetry_median"], null["null_directionality_median"] = 0.01, -0.02
    tables["models"] = tables["models"].merge(null, on=["model", "stack"])
    folder = tmp_path_factory.mktemp("aggregate")
    agg.write_outputs(tables, folder)
    return tables, folder


def write_matrices(path: Path, model: str, stack: str, d: int, n_heads=2, n_kv=1, k=8, layers=2, symmetric=False):
    gen = torch.Generator().manual_seed(0)
    parts = []
    for layer in range(layers):
        q = torch.randn(n_heads, d, k, generator=gen)
        key = q[:: n_heads // n_kv].clone() if symmetric else torch.randn(n_kv, d, k, generator=gen)
        parts.append(block_table(ModelInfo(model, "toy", "toy", "toy", False), AttentionBlock(stack, layer, q, key)))
    pq.write_table(pa.concat_tables(parts), path)


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    folder = tmp_path_factory.mktemp("matrices")
    write_matrices(folder / "enc.parquet", "toy/enc", "encoder", d=64, n_heads=2, n_kv=2, symmetric=True)
    write_matrices(folder / "dec.parquet", "toy/dec", "decoder", d=24, n_heads=4, n_kv=2)
    return folder


CASES = [
    ("scores_vs_params", {"modality": "text"}),
    ("scores_vs_params", {"modality": "vision"}),  # no vision model: an empty panel
    ("scores_vs_params", {"modality": "audio", "figure": "audio"}),
    ("encdec_stacks", {}),
    ("head_distributions", {}),
    ("depth_profile", {}),
    ("depth_profile", {"modality": "vision"}),
]


@pytest.mark.parametrize("name,params", CASES, ids=[f"{n}-{'-'.join(map(str, p.values()))}" for n, p in CASES])
def test_figure_renders_byte_identically(aggregates, tmp_path, name, params):
    tables, _ = aggregates
    digests = []
    for run in ("a", "b"):
        fig = import_module(f"wqk.figures.{name}").draw(dict(tables), **params)
        pdf, png = figures.save(fig, tmp_path / run / f"{name}.pdf")
        assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
        digests.append((sha(pdf), sha(png)))
    assert digests[0] == digests[1]
    assert b"CreationDate" not in pdf.read_bytes()
    # paper size and readable fonts
    assert fig.get_size_inches()[0] <= figures.DOUBLE
    texts = [t for ax in fig.axes for t in (ax.xaxis.label, ax.yaxis.label, ax.title)]
    assert all(t.get_fontsize() >= 7 for t in texts if t.get_text())
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)


def test_scores_vs_params_draws_one_point_per_model_stack(aggregates):
    tables, _ = aggregates
    fig = import_module("wqk.figures.scores_vs_params").draw(tables, modality="text")
    ax = fig.axes[0]
    # text self-attention stacks: 2 encoders, 2 decoders (1 synthetic), t5 encoder + decoder
    xs = sorted(x for line in ax.lines if line.get_marker() == "o" for x in line.get_xdata())
    assert xs == sorted([4e6, 3.4e8, 1.2e8, 2e4, 6e7, 6e7])
    assert ax.get_xscale() == "log" and ax.get_ylim() == pytest.approx((-1.05, 1.05))
    assert ax.get_xlim()[0] <= 2e4 and ax.get_xlim()[1] >= 1e12
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "autoregressive (synthetic)" in labels and "bidirectional" in labels
    assert "null (random Q, K)" in labels
    hollow = [line for line in ax.lines if line.get_marker() == "o" and line.get_markerfacecolor() == "none"]
    assert [list(line.get_xdata()) for line in hollow] == [[2e4]]


def test_empty_modality_says_so(aggregates):
    tables, _ = aggregates
    fig = import_module("wqk.figures.scores_vs_params").draw(tables, modality="vision")
    assert any("no vision models" in t.get_text() for t in fig.axes[0].texts)


def test_heatmap_block_is_top_left_of_qk(matrices, tmp_path):
    data = {
        k: wqk_heatmaps.load(k, matrices / f"{f}.parquet", layer=1) for k, f in (("encoder", "enc"), ("decoder", "dec"))
    }
    assert set(data["encoder"]["layer"]) == {1}
    m, layer = wqk_heatmaps.block(data["encoder"], "encoder", 1, 50)
    df = data["encoder"].sort_values("head")
    q = np.concatenate([np.asarray(r, dtype=np.float64).reshape(64, 8) for r in df["q"]], axis=1)
    k = np.concatenate([np.asarray(r, dtype=np.float64).reshape(64, 8) for r in df["k"]], axis=1)
    np.testing.assert_allclose(m, (q @ k.T)[:50, :50], rtol=1e-10)
    assert layer == 1 and m.shape == (50, 50)
    assert np.allclose(m, m.T)  # the symmetric toy encoder
    # GQA: 4 query heads on 2 key heads, d smaller than 50 -> all dims
    dm, _ = wqk_heatmaps.block(data["decoder"], "decoder", 1, 50)
    dd = data["decoder"].sort_values("head")
    kv = {int(r.kv_head): np.asarray(r.k, dtype=np.float64).reshape(24, 8) for r in dd.itertuples()}
    expected = sum(np.asarray(r.q, dtype=np.float64).reshape(24, 8) @ kv[int(r.kv_head)].T for r in dd.itertuples())
    assert dm.shape == (24, 24)
    np.testing.assert_allclose(dm, expected, rtol=1e-10)
    # falls back to the last layer when asked for one beyond the model's depth
    assert set(wqk_heatmaps.load("decoder", matrices / "dec.parquet", layer=7)["layer"]) == {1}


def test_figure_cli_heatmaps_twice_identical(matrices, tmp_path):
    digests = []
    for run in ("a", "b"):
        out = tmp_path / run / "wqk_heatmaps.pdf"
        argv = ["figure", "wqk_heatmaps", "--in", f"encoder={matrices / 'enc.parquet'}",
                f"decoder={matrices / 'dec.parquet'}", "--param", "layer=1", "--out", str(out)]  # fmt: skip
        assert wqk_main(argv) == 0
        digests.append((sha(out), sha(out.with_suffix(".png"))))
    assert digests[0] == digests[1]


def test_figure_cli_reads_aggregates(aggregates, tmp_path):
    _, folder = aggregates
    out = tmp_path / "depth.pdf"
    argv = [
        "figure",
        "depth_profile",
        "--in",
        f"layers={folder / 'layers.parquet'}",
        "--param",
        "bins=5",
        "--out",
        str(out),
    ]
    assert wqk_main(argv) == 0 and out.with_suffix(".png").is_file()
    assert wqk_main(["figure", "no_such_figure", "--out", str(out)]) == 1


def test_head_distributions_handles_no_heads(aggregates):
    tables, _ = aggregates
    empty = {"heads": tables["heads"].iloc[0:0]}
    fig = import_module("wqk.figures.head_distributions").draw(empty)
    assert any("no heads" in t.get_text() for t in fig.axes[0].texts)
    assert pd.api.types.is_bool_dtype(tables["heads"]["synthetic"])


def training_layers_table(sizes=(("mini", 4), ("base", 12))) -> pd.DataFrame:
    """layers.csv of an encoder and a decoder run per size, one dataset."""
    rows = []
    for size, n_layers in sizes:
        for objective, sign in (("bidirectional", 1), ("autoregressive", -1)):
            for step in (0, 100, 200):
                rows += [{"run": f"{size}-{objective}", "size": size, "objective": objective, "init": "default",
                          "dataset": "wikipedia", "step": step, "layer": layer,
                          "symmetry": sign * step / 400 * (layer + 1) / n_layers,
                          "directionality": -sign * step / 400 * (layer + 1) / n_layers}
                         for layer in range(n_layers)]  # fmt: skip
    return pd.DataFrame(rows)


def test_training_layers_draws_each_size_in_its_own_panels(tmp_path):
    """The paper config trains two sizes (mini, base): the base runs (the paper's figure 5)
    come first, the mini runs in panels of their own, each with its own layer colour bar."""
    draw = import_module("wqk.figures.training_layers").draw
    layers = training_layers_table()
    digests = []
    for run in ("a", "b"):
        fig = draw({"layers": layers}, dataset="wikipedia")
        pdf, png = figures.save(fig, tmp_path / run / "training_layers_wikipedia.pdf")
        digests.append((sha(pdf), sha(png)))
    assert digests[0] == digests[1]
    panels = [ax for ax in fig.axes if ax.get_ylabel().endswith("score")]
    bars = [ax for ax in fig.axes if ax not in panels]
    assert len(panels) == 8 and len(bars) == 2
    assert [ax.get_title() for ax in panels if ax.get_title()] == [
        "encoder (bidirectional), wikipedia, base", "decoder (autoregressive), wikipedia, base",
        "encoder (bidirectional), wikipedia, mini", "decoder (autoregressive), wikipedia, mini",
    ]  # fmt: skip
    assert [len(ax.lines) - 1 for ax in panels] == [12] * 4 + [4] * 4  # a line per layer (+ the zero line)
    assert [b.get_ylabel() for b in bars] == ["layer (base)", "layer (mini)"]
    assert fig.get_size_inches()[0] <= figures.DOUBLE
    # the same table in another row order: the same figure
    shuffled = layers.sample(frac=1, random_state=0)
    fig = draw({"layers": shuffled}, dataset="wikipedia")
    pdf, png = figures.save(fig, tmp_path / "c" / "training_layers_wikipedia.pdf")
    assert (sha(pdf), sha(png)) == digests[0]
    # one size on request
    fig = draw({"layers": layers}, dataset="wikipedia", size="mini")
    assert len([ax for ax in fig.axes if ax.get_ylabel().endswith("score")]) == 4


def test_training_layers_figure_command_with_two_sizes(tmp_path):
    """As the workflow's rule runs it on the paper config's layers.csv."""
    csv_path = tmp_path / "layers.csv"
    training_layers_table().to_csv(csv_path, index=False)
    out = tmp_path / "training_layers_wikipedia.pdf"
    argv = ["figure", "training_layers", "--in", f"layers={csv_path}", "--param", "dataset=wikipedia",
            "--out", str(out)]  # fmt: skip
    assert wqk_main(argv) == 0 and out.with_suffix(".png").is_file()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_heatmap_load_decodes_as_wqk_matrices_without_torch(tmp_path, dtype):
    """The heatmaps' numpy reader (figures run in the light env) gives wqk.matrices' values."""
    from wqk.matrices import read_blocks

    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(4, 12, 3, generator=gen).to(dtype), torch.randn(2, 12, 3, generator=gen).to(dtype)
    path = tmp_path / "m.parquet"
    info = ModelInfo("toy/m", "toy", "toy", "toy", False)
    pq.write_table(block_table(info, AttentionBlock("decoder", 0, q, k)), path)
    _, blk = next(read_blocks(path))
    df = wqk_heatmaps.load("decoder", path, layer=0).sort_values("head")
    assert list(df["head"]) == [0, 1, 2, 3] and list(df["kv_head"]) == [0, 0, 1, 1]
    for r in df.itertuples():
        assert r.q.dtype == np.float32 and r.k.dtype == np.float32
        np.testing.assert_array_equal(r.q, blk.q[r.head].float().numpy().reshape(-1))
        np.testing.assert_array_equal(r.k, blk.k[r.kv_head].float().numpy().reshape(-1))


def test_a_quantised_model_is_a_diamond_labelled_with_its_storage_in_figures_and_tables(aggregates):
    """A model whose q/k were stored quantised (a GGUF: the models table's `storage`) is marked
    wherever it is drawn or listed; the others are drawn and named as before."""
    from wqk.tables._common import model_name

    tables, _ = aggregates
    models = tables["models"].copy()
    gpt = models["model"] == models.loc[models["n_params"] == 1.2e8, "model"].iloc[0]
    models["storage"] = None
    models.loc[gpt, "storage"] = "Q5_0"
    fig = import_module("wqk.figures.scores_vs_params").draw(tables | {"models": models}, modality="text")
    ax = fig.axes[0]
    diamonds = [x for line in ax.lines if line.get_marker() == "D" for x in line.get_xdata()]
    circles = sorted(x for line in ax.lines if line.get_marker() == "o" for x in line.get_xdata())
    assert diamonds == [1.2e8] and circles == sorted([4e6, 3.4e8, 2e4, 6e7, 6e7])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "autoregressive (quantised: Q5_0)" in labels and "autoregressive" in labels
    names = models.apply(model_name, axis=1)
    assert set(names[gpt]) == {f"{models.loc[gpt, 'model'].iloc[0]} (quantised: Q5_0)"}
    assert not names[~gpt].str.contains("quantised").any()

    layers = tables["layers"].copy()
    layers["storage"] = np.where(layers["model"].isin(models.loc[gpt, "model"]), "Q5_0", None)
    fig = import_module("wqk.figures.depth_profile").draw({"layers": layers})
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert any(label.startswith("autoregressive (n=") and label.endswith(", 1 quantised)") for label in labels), labels
    assert not any("quantised" in label for label in labels if label.startswith("bidirectional"))
