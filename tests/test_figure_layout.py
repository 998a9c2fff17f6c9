"""The layout check of every figure (wqk.figures._layout): texts inside the canvas, clear of
each other, and a legend that names only what is drawn. Each defect on a synthetic figure,
the fix that clears it, and the texts the check must leave alone."""

from __future__ import annotations

import hashlib
import io
from importlib import import_module
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.lines import Line2D

import figure_inputs
from wqk import figures
from wqk.cli import main as wqk_main
from wqk.errors import WqkError
from wqk.figures import DOUBLE, _layout, new_figure, style

LONG = [
    "encoder (bidirectional)",
    "paper, encoder (bidirectional) (steps scaled)",
    "decoder (autoregressive)",
    "paper, decoder (autoregressive) (steps scaled)",
]


def legend_figure(labels, ncols):
    with style():
        fig, axes = new_figure(DOUBLE, 2.4, ncols=2)
        for i, name in enumerate(labels):
            for ax in axes[0]:
                ax.plot([0, 1], [i, i + 1], ls=("-", ":")[i % 2], color=("navy", "purple")[i // 2], label=name)
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=ncols)
    return fig


def test_a_legend_past_the_edges_fails_and_fitted_columns_pass():
    problems = _layout.check(legend_figure(LONG, ncols=4), "training_scores_wikipedia")
    assert any('"encoder (bidirectional)" is cut off at the left edge' in p for p in problems), problems
    assert any("cut off at the right edge" in p for p in problems), problems
    assert all(p.startswith("training_scores_wikipedia: ") for p in problems)
    ncols = figures.legend_columns(LONG, 4)
    assert 1 <= ncols < 4
    assert _layout.check(legend_figure(LONG, ncols), "fitted") == []
    # short labels keep the columns asked for
    assert figures.legend_columns(["a", "b", "c", "d"], 4) == 4


def loss_panels(use_offset: bool):
    with style():
        fig, axes = new_figure(DOUBLE, 2.4, ncols=3)
        for ax, title in zip(axes[0], ("mini, jigsaw", "mini, red_pajama", "mini, wikipedia")):
            ax.plot([5, 10, 15, 20], 10.32 + np.array([0.006, 0.0096, 0.0023, -0.0003]))  # an offset on y
            ax.set_title(title)
            ax.ticklabel_format(axis="y", useOffset=use_offset)
    return fig


def test_an_offset_text_beside_a_title_fails():
    problems = _layout.check(loss_panels(use_offset=True), "training_loss")
    assert any('offset text "+1.032e1"' in p and "row of title" in p for p in problems), problems
    assert _layout.check(loss_panels(use_offset=False), "training_loss") == []


def test_overlapping_titles_fail():
    with style():
        fig, axes = new_figure(DOUBLE, 2.4, ncols=2)
        axes[0][0].set_title("a rather long title in the centre of the panel")
        axes[0][0].set_title("a long title on the left of it", loc="left")
    problems = _layout.check(fig, "titles")
    assert problems == [
        'titles: title "a rather long title in the centre of the panel" overlaps title "a long title on the left of it"'
    ]


def legend_of_lines(lines) -> list[str]:
    """A figure of (x, y, style, label) lines with a figure legend of them; its problems."""
    with style():
        fig, axes = new_figure(DOUBLE, 2.4)
        ax = axes[0][0]
        for x, y, kw, name in lines:
            ax.plot(x, y, label=name, **kw)
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=2)
    return _layout.check(fig, "training_loss")


def test_a_legend_entry_for_nothing_drawn_fails():
    x = [5, 10, 15, 20]
    y = [6.9, 6.8, 6.7, 6.6]
    solid, dashed = {"color": "navy", "ls": "-"}, {"color": "navy", "ls": "--"}
    problems = legend_of_lines([(x, y, solid, "default init"), ([], [], dashed, "symmetric init")])
    assert problems == ['training_loss: legend entry "symmetric init" names nothing drawn in any panel']
    # drawn, but only outside the view
    with style():
        fig, axes = new_figure(DOUBLE, 2.4)
        axes[0][0].plot(x, y, label="shown")
        axes[0][0].plot([100, 200], [0, 0], label="off the view")
        axes[0][0].set_xlim(0, 25)
        fig.legend(loc="outside lower center")
    assert _layout.check(fig, "f") == ['f: legend entry "off the view" names nothing drawn in any panel']
    # drawn exactly under a solid line of its colour: nothing to see
    problems = legend_of_lines([(x, y, solid, "default init"), (x, y, dashed, "symmetric init")])
    assert problems == ['training_loss: legend entry "symmetric init" names nothing visible: what it names lies '
                        "exactly under another line of the same colour"]  # fmt: skip
    # two runs of one entry that coincide: still one visible curve
    assert legend_of_lines([(x, y, solid, "default init"), (x, y, solid, None)]) == []
    # the same curves told apart by colour, or apart: both visible
    light = {"color": figures.tint("navy"), "ls": "--"}
    assert legend_of_lines([(x, y, solid, "default init"), (x, y, light, "symmetric init")]) == []
    assert legend_of_lines([(x, y, solid, "default init"), (x, [6.95, 6.9, 6.8, 6.7], dashed, "symmetric")]) == []


def test_proxy_handles_match_what_they_stand_for():
    """Keys of shape (grey markers) match points of any colour; a hollow key needs hollow points."""

    def problems(points_filled: bool, wanted: list) -> list[str]:
        with style():
            fig, axes = new_figure(DOUBLE, 2.4)
            ax = axes[0][0]
            ax.plot([1], [1], ls="", marker="s", color="navy", mfc="navy" if points_filled else "none")
            ax.legend(handles=wanted, loc="upper right")
        return _layout.check(fig, "spectral_signatures")

    square = Line2D([], [], ls="", marker="s", color="grey", label="vision")
    hollow = Line2D([], [], ls="", marker="s", color="grey", mfc="none", label="synthetic (hollow)")
    triangle = Line2D([], [], ls="", marker="^", color="grey", label="audio")
    assert problems(False, [square, hollow]) == []
    assert problems(True, [square]) == []
    assert problems(True, [hollow]) == [
        'spectral_signatures: legend entry "synthetic (hollow)" names nothing drawn in any panel'
    ]
    assert problems(True, [triangle]) == ['spectral_signatures: legend entry "audio" names nothing drawn in any panel']


def test_texts_a_reader_does_not_see_are_not_judged():
    """Invisible and empty texts anywhere, ticks beyond the view, crowded rotated labels
    that do not touch, tick labels side by side."""
    with style():
        fig, axes = new_figure(DOUBLE, 2.4, ncols=2)
        left, right = axes[0]
        left.plot(range(10), range(10))
        left.set_xticks(range(-5, 15))  # ticks outside the view (0..9) are not drawn
        left.set_xlim(0, 9)
        left.text(-3, 0.5, "hidden far off", transform=left.transAxes, visible=False)
        left.text(3, 0.5, "", transform=left.transAxes)
        left.set_title("")
        right.plot(range(6), range(6))
        right.set_xticks(range(6), [f"text (synthetic) {i}" for i in range(6)], rotation=30, ha="right",
                         rotation_mode="anchor")  # fmt: skip
    assert _layout.check(fig, "quiet") == []
    # rotated labels that do touch are judged
    for label in right.get_xticklabels():
        label.set_rotation(8)
    assert any("x tick label" in p and "overlaps" in p for p in _layout.check(fig, "crowded"))
    for label in right.get_xticklabels():
        label.set_rotation(30)
    # a visible text past the edge is judged
    fig.text(-0.02, 0.5, "far off")
    assert _layout.check(fig, "loud") == [
        f'loud: figure text "far off" is cut off at the left edge of the figure (by {0.02 * DOUBLE * 72:.1f} pt)'
    ]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_save_refuses_an_unreadable_figure_and_writes_nothing(tmp_path):
    with pytest.raises(WqkError) as e:
        figures.save(legend_figure(LONG, ncols=4), tmp_path / "training_scores_wikipedia.pdf")
    message = str(e.value)
    assert "figure training_scores_wikipedia is not readable" in message
    assert '"encoder (bidirectional)" is cut off at the left edge' in message
    assert list(tmp_path.iterdir()) == []


def test_the_check_changes_nothing_drawn(tmp_path):
    """save (which checks on the PNG's draw) writes the bytes a plain savefig writes."""
    pdf, png = figures.save(legend_figure(LONG[:2], ncols=2), tmp_path / "f.pdf")
    plain = legend_figure(LONG[:2], ncols=2)
    with style():
        for path, fmt, meta in ((pdf, "pdf", {"Creator": None, "Producer": None, "CreationDate": None,
                                              "ModDate": None}), (png, "png", {"Software": None})):  # fmt: skip
            buf = io.BytesIO()
            plain.savefig(buf, format=fmt, metadata=meta, dpi=figures.DPI)
            assert sha(buf.getvalue()) == sha(path.read_bytes()), fmt


def equal_runs_losses() -> pd.DataFrame:
    """losses.csv of an encoder with and without symmetric init whose curves coincide (as
    short runs' do), two seeds, in two datasets, at a loss near ln(vocabulary)."""
    rows = []
    for dataset in ("jigsaw", "wikipedia"):
        for init in ("default", "symmetric"):
            for seed in (0, 1):
                for step, loss in zip((5, 10, 15, 20), (0.006, 0.0096, 0.0023, -0.0003)):
                    rows.append({"run": f"mini-encoder-{init}-{dataset}-s{seed}", "size": "mini",
                                 "objective": "bidirectional", "init": init, "dataset": dataset, "seed": seed,
                                 "step": step, "loss": 10.32 + loss + 0.001 * seed, "lr": 1e-4})  # fmt: skip
    return pd.DataFrame(rows)


def test_training_loss_draws_coinciding_inits_readably(tmp_path):
    fig = import_module("wqk.figures.training_loss").draw({"losses": equal_runs_losses()})
    assert _layout.check(fig, "training_loss") == []
    figures.save(fig, tmp_path / "training_loss.pdf")


def test_figure_command_reports_an_unreadable_figure(monkeypatch, tmp_path, capsys):
    module = import_module("wqk.figures.training_loss")
    monkeypatch.setattr(module, "draw", lambda data, **kw: legend_figure(LONG, ncols=4))
    csv_path = tmp_path / "losses.csv"
    equal_runs_losses().to_csv(csv_path, index=False)
    out = tmp_path / "training_loss.pdf"
    assert wqk_main(["figure", "training_loss", "--in", f"losses={csv_path}", "--out", str(out)]) == 1
    assert "figure training_loss is not readable" in capsys.readouterr().err
    assert not out.exists() and not out.with_suffix(".png").exists()


RUNS = Path(__file__).parent / "figure_runs"  # snapshots by tests/figure_inputs.py


SWEEP_FIGURES = {"sweep_dynamics"}  # the quick start sweeps no revisions
QUANTISATION_FIGURES = {"quantisation_changes"}  # the paper config quantises nothing
# the paper config computes none of the follow-up papers' families (score.metrics: [default, folded])
FOLLOW_UP_FIGURES = {"fingerprint_signatures", "head_types", "qk_spectra_signatures"}


@pytest.mark.parametrize(
    "run,untrained",
    [("quickstart", SWEEP_FIGURES), ("rehearsal_sample", QUANTISATION_FIGURES | FOLLOW_UP_FIGURES)],
    ids=["quickstart", "rehearsal"],
)
@pytest.mark.slow
def test_every_figure_of_a_run_passes_the_check(run, untrained, tmp_path):
    """Every figure of the quick start and of the rehearsal sample (`tests/rehearse.py
    --sample`), from the inputs those runs gave it, rendered as the workflow renders it:
    `wqk figure`, whose `save` refuses a figure that fails the layout check. (The quick
    start's snapshot has its training figures, from its real runs; the next test draws them
    from curves of every run and seed of its config.)"""
    argvs = figure_inputs.commands(RUNS / run, tmp_path)
    modules = {p.stem for p in Path(figures.__file__).parent.glob("[!_]*.py")}
    assert {argv[1] for argv in argvs} == modules - untrained  # every figure the package has
    for argv in argvs:
        assert wqk_main(argv) == 0, argv
    assert len(list(tmp_path.glob("*.png"))) == len(argvs)


def quickstart_training(folder: Path) -> dict[str, Path]:
    """summary.csv, layers.csv and losses.csv shaped as the quick start's training writes them
    (config/quickstart.yaml: its runs, seeds, steps, checkpoint and log steps), with smooth
    made-up curves."""
    from wqk.training.grid import runs as grid_runs

    training = yaml.safe_load((Path(__file__).parents[1] / "config" / "quickstart.yaml").read_text())["training"]
    summary, layers, losses = [], [], []
    for name, grid in grid_runs(training).items():
        size, objective, init, seed = grid["size"], grid["objective"], grid["init"], grid["seed"]
        n_layers = training["sizes"][size]["layers"]
        kind = "encoder" if objective == "bidirectional" else "decoder"
        run = dict(run=name, size=size, objective=objective, init=init, dataset=grid["dataset"], seed=seed)
        sign = 1 if kind == "encoder" else -1
        for step in range(0, training["steps"] + 1, training["save_every"]):
            t = step / training["steps"]
            per_layer = [
                (sign * 0.4 * t * (i + 1) / n_layers, -sign * 0.6 * t * (i + 1) / n_layers) for i in range(n_layers)
            ]
            layers += [run | dict(step=step, stack=kind, layer=i, symmetry=s, directionality=d)
                       for i, (s, d) in enumerate(per_layer)]  # fmt: skip
            s, d = np.array(per_layer).T
            summary.append(run | dict(step=step, loss=6.2 - 2 * t + 0.01 * seed, n_layers=n_layers, stack=kind,
                                      symmetry_median=np.median(s), symmetry_q25=s.min(), symmetry_q75=s.max(),
                                      directionality_median=np.median(d), directionality_q25=d.min(),
                                      directionality_q75=d.max()))  # fmt: skip
        for step in range(training["log_every"], training["steps"] + 1, training["log_every"]):
            loss = 4 + 2.2 * np.exp(-step / 300) + 0.02 * seed + (0.05 if init == "symmetric" else 0)
            losses.append(run | dict(step=step, loss=loss, lr=training["lr"]))
    paths = {}
    for name, rows in (("summary", summary), ("layers", layers), ("losses", losses)):
        paths[name] = folder / f"{name}.csv"
        pd.DataFrame(rows).to_csv(paths[name], index=False)
    return paths


def test_the_quickstart_training_figures_pass_the_check(tmp_path):
    """The quick start's three training figures, from tables of the quick start's shape (every
    run and seed of its config), as its workflow renders them."""
    paths = quickstart_training(tmp_path)
    datasets = sorted(pd.read_csv(paths["summary"])["dataset"].unique())
    argvs = [["figure", "training_loss", "--in", f"losses={paths['losses']}"]]
    for dataset in datasets:
        argvs += [["figure", "training_scores", "--in", f"summary={paths['summary']}", "--param", f"dataset={dataset}"],
                  ["figure", "training_layers", "--in", f"layers={paths['layers']}", "--param", f"dataset={dataset}"]]  # fmt: skip
    for argv in argvs:
        name = "_".join([argv[1], *(a.split("=")[1] for a in argv if a.startswith("dataset="))])
        assert wqk_main([*argv, "--out", str(tmp_path / "figures" / f"{name}.pdf")]) == 0, argv
    assert len(list((tmp_path / "figures").glob("*.png"))) == 1 + 2 * len(datasets)


def test_the_spectra_panel_reads_each_heads_sv2_as_a_cumulative_share():
    """qk_spectra_signatures' fourth panel: a flat spectrum is the diagonal, a rank-one head is
    all its energy at once; heads without a list (or with none of it) are left out; the
    figure with it passes the layout check."""
    module = import_module("wqk.figures.qk_spectra_signatures")
    grid = module.GRID
    flat, rank_one = module.cumulative_shares([np.ones(8), np.array([4.0, 0, 0, 0]), None, np.zeros(3)])
    np.testing.assert_allclose(flat, grid)
    np.testing.assert_allclose(rank_one, np.minimum(1.0, 4 * grid))
    rng = np.random.default_rng(0)
    heads = pd.DataFrame({
        "stack": ["encoder"] * 6 + ["decoder"] * 6, "objective": ["bidirectional"] * 6 + ["autoregressive"] * 6,
        "synthetic": False, "sv2": [np.sort(rng.exponential(size=16))[::-1] for _ in range(12)],
    })  # fmt: skip
    models = pd.read_csv(RUNS / "quickstart" / "aggregate-models.csv.gz")
    fig = module.draw({"models": models, "heads": heads})
    panel = fig.axes[len(module.METRICS)]
    assert panel.get_title() == "spectrum of sigma^2 (sv2)"
    assert {line.get_label() for line in panel.get_lines()} >= {
        figures.label("bidirectional"),
        figures.label("autoregressive"),
    }
    assert _layout.check(fig, "qk_spectra_signatures") == []
