"""The explorer page (wqk.explorer) from toy aggregates: what it carries, in which bytes, inline
or one file per model, and the page in headless Chromium. The page of a real run is tested in
tests/test_release.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toy_scores as toy
from wqk import aggregate as agg
from wqk import explorer
from wqk.cli import main as wqk_main
from wqk.explorer import data

SPECTRA = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")
OFFSETS = (0, 1, 2, 4, 8)
FOLLOW_UPS = ("dir_frac", "D_head", "symmetric_energy", "head_type", "sv2_skew")  # one of each family and more


def with_metrics(
    scores: pd.DataFrame, rotary: set[str], seed: int = 0, follow: frozenset = frozenset()
) -> pd.DataFrame:
    """Spectra on head rows, rotary s(d) on every row of the models in `rotary` (NaN elsewhere),
    some of the follow-up families' columns on the head rows of the models in `follow`."""
    rng = np.random.default_rng(seed)
    out = scores.copy()
    heads = (out["scope"] == "head").to_numpy()
    for m in SPECTRA:
        values = rng.uniform(1, 30, len(out)) if m.endswith("rank") else rng.uniform(0, 1, len(out))
        out[m] = np.where(heads, values, np.nan)
    for d in OFFSETS:
        s = out["symmetry"].to_numpy() if d == 0 else rng.uniform(-1, 1, len(out))
        out[f"rotary_symmetry_d{d}"] = np.where(out["model"].isin(rotary), s, np.nan)
    if follow:
        for m in FOLLOW_UPS:
            values = rng.integers(-1, 2, len(out)).astype(float) if m == "head_type" else rng.uniform(0, 1, len(out))
            out[m] = np.where(heads & out["model"].isin(follow).to_numpy(), values, np.nan)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Aggregates of the toy models with spectra and rotary columns, and a null folder."""
    scores, cat = toy.toy_world()
    scores = with_metrics(scores, rotary={"toy/dec-small"}, follow=frozenset({"toy/dec-small"}))
    null_dir = tmp_path_factory.mktemp("null")
    for i, (model, rows) in enumerate(scores.groupby("model", sort=True)):
        null = with_metrics(rows, rotary=set(), seed=100 + i)
        rng = np.random.default_rng(i)
        null["symmetry"] = rng.normal(0, 0.05, len(null))
        null["directionality"] = rng.uniform(-0.3, 0.3, len(null))
        null["model"] = model + " (null)"
        null.to_parquet(null_dir / f"{model.replace('/', '--')}.parquet", index=False)
    tables = agg.aggregate(scores, cat)
    return tables, null_dir


def model_data(built: dict[str, bytes]) -> tuple[dict, dict]:
    page = built["index.html"].decode()

    def script(name):
        return json.loads(
            re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', page, re.S).group(1)
        )

    models = script("wqk-models")
    for path, content in built.items():
        if path.startswith("data/"):
            text = content.decode()
            assert text.startswith("wqkModel(") and text.endswith(");\n")
            entry = json.loads(text[len("wqkModel(") : -3])
            models[entry["slug"]] = entry
    return script("wqk-index"), models


def build(world, **kw) -> dict[str, bytes]:
    tables, null_dir = world
    return explorer.build(tables["models"], tables["layers"], tables["heads"], null_dir=null_dir, **kw)


def test_the_page_carries_every_head_as_its_table_has_it(world):
    tables, _ = world
    index, models = model_data(build(world))
    assert [m["slug"] for m in index["models"]] == list(dict.fromkeys(tables["models"]["slug"]))
    heads = tables["heads"]
    for (slug, stack), rows in heads.groupby(["slug", "stack"]):
        columns = models[slug]["stacks"][stack]["heads"]
        assert columns["layer"] == rows["layer"].tolist() and columns["head"] == rows["head"].tolist()
        for m in ("symmetry", "directionality", *SPECTRA):
            n = data.decimals(m)
            # the page divides by 10**n and prints n decimals: exactly Python's digits
            shown = [f"{v / 10**n:.{n}f}" for v in columns[m]]
            assert shown == [f"{v:.{n}f}".replace("-0." + "0" * n, "0." + "0" * n) for v in rows[m]], (slug, m)
        rotary = sorted(c for c in columns if c.startswith("rotary"))
        if slug == "toy--dec-small":
            # s(0) is the symmetry: not carried twice
            assert rotary == sorted(f"rotary_symmetry_d{d}" for d in OFFSETS if d)
        else:
            assert rotary == [], slug
    assert index["rotary_offsets"] == list(OFFSETS)


def test_the_null_reference_spread_is_the_null_files_quantiles(world):
    _, null_dir = world
    index, models = model_data(build(world))
    null = pd.read_parquet(null_dir / "toy--t5.parquet")
    rows = null[(null["stack"] == "decoder") & (null["scope"] == "head")]
    spread = models["toy--t5"]["stacks"]["decoder"]["null"]["heads"]
    for m in ("symmetry", "directionality", "stable_rank"):
        expected = np.quantile(rows[m], [0.05, 0.25, 0.5, 0.75, 0.95])
        got = [spread[m][k] for k in ("q05", "q25", "q50", "q75", "q95")]
        assert got == pytest.approx(expected, abs=1e-4)
    assert "rotary_symmetry_d1" not in spread  # NaN for random Q, K
    # without the files: the quartiles the models table carries
    tables, _ = world
    models_table = agg.aggregate(*toy.toy_world(), pd.read_parquet(null_dir / "toy--t5.parquet"))["models"]
    _, per_model = explorer.page_data(models_table, tables["layers"], tables["heads"])
    layer_spread = per_model["toy--t5"]["stacks"]["decoder"]["null"]["layers"]["symmetry"]
    row = models_table[(models_table["slug"] == "toy--t5") & (models_table["stack"] == "decoder")].iloc[0]
    assert layer_spread == {
        k: round(row[f"null_symmetry_{s}"], 4) for k, s in (("q25", "q25"), ("q50", "median"), ("q75", "q75"))
    }


def test_same_bytes_on_rebuild_and_no_address_outside_the_page(world):
    first, second = build(world), build(world)
    assert first == second
    page = first["index.html"].decode()
    assert page.count(explorer.plotly_js()) == 1  # plotly.js inline, from the plotly package
    outside = page.replace(explorer.plotly_js(), "")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", outside), "a tag loads something from afar"
    assert "default-src 'none'" in outside  # and the page's own policy refuses any other load


def test_many_models_go_to_one_file_each_and_stale_files_are_removed(world, tmp_path):
    inline = build(world)
    split = build(world, inline_limit=0)
    assert list(inline) == ["index.html"]
    slugs = sorted(dict.fromkeys(world[0]["models"]["slug"]))
    assert sorted(split) == sorted(["index.html", *(f"data/{s}.js" for s in slugs)])
    assert model_data(split)[1] == model_data(inline)[1]
    assert json.loads(re.search(r'id="wqk-models">(.*?)</script>', split["index.html"].decode()).group(1)) == {}
    out = tmp_path / "explorer"
    explorer.write(split, out)
    (out / "data" / "not-a-model.js").write_text("stale")
    explorer.write(inline, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == ["index.html"]
    assert (out / "index.html").read_bytes() == inline["index.html"]


def test_bytes_per_head_keep_the_paper_config_within_its_budget():
    """The paper config's explorer must stay under 20 MB: plotly.js (about 4.8 MB) and the index
    inline, each model's data in a file. At most 200,000 heads (an upper bound of its 141 models,
    README.md), each with the paper's two scores and the spectra, cost at most 55 bytes."""
    n = 320 * 32
    rng = np.random.default_rng(0)
    rows = {"layer": np.repeat(np.arange(n // 32), 32), "head": np.tile(np.arange(32), n // 32)}
    rows |= {"symmetry": rng.uniform(-0.2, 0.6, n), "directionality": rng.uniform(-1, 1, n)}
    rows |= {m: rng.uniform(1, 60, n) if m.endswith("rank") else rng.uniform(0, 1, n) for m in SPECTRA}
    heads = pd.DataFrame(rows)
    columns = data._columns(heads, ["layer", "head"], ["symmetry", "directionality", *SPECTRA])
    per_head = len(explorer._json(columns)) / n
    assert per_head < 55, per_head
    assert 200_000 * per_head + len(explorer.plotly_js()) < 20e6


def test_cli_writes_the_page(world, tmp_path):
    tables, null_dir = world
    paths = {}
    for name in ("models", "layers", "heads"):
        paths[name] = tmp_path / f"{name}.parquet"
        tables[name].to_parquet(paths[name], index=False)
    out = tmp_path / "explorer"
    args = ["explorer", "--out-dir", str(out), "--null-dir", str(null_dir), "--inline-limit", "0"]
    args += [a for name, p in paths.items() for a in (f"--{name}", str(p))]
    assert wqk_main(args) == 0
    assert (out / "index.html").read_bytes() == build(world, inline_limit=0)["index.html"]
    assert len(list((out / "data").glob("*.js"))) == len(set(tables["models"]["slug"]))


# ---------------------------------------------------------------- in a browser

SHOTS = Path("/tmp/explorer_shots")


@pytest.mark.slow
@pytest.mark.parametrize("split", [False, True], ids=["inline", "one-file-per-model"])
def test_the_page_in_chromium_shows_the_picked_heads_values(world, tmp_path, split, chromium):
    """Pick a model, a layer and a head with the page's controls: the values shown are the
    heads table's; the pick is in the URL and a reload restores it; search and filters narrow
    the list; no request leaves the page's folder, no JavaScript error."""
    from explorer_browser import Explorer

    out = tmp_path / "explorer"
    explorer.write(build(world, inline_limit=0 if split else explorer.INLINE_LIMIT), out)
    heads = world[0]["heads"]
    row = heads[(heads["slug"] == "toy--dec-small") & (heads["layer"] == 2) & (heads["head"] == 1)].iloc[0]
    with Explorer(out / "index.html", tmp_path / "shots", chromium) as page:
        page.open()
        page.pick("toy--dec-small", "decoder", 2, 1)
        shown = page.values()
        for m in ("symmetry", "directionality", *SPECTRA, "rotary_symmetry_d4", *FOLLOW_UPS):
            n = data.decimals(m)
            assert shown[m]["head"] == f"{row[m]:.{n}f}", m
        assert set(page.drawn()) >= {
            "plot-overview",
            "plot-heads",
            "plot-null",
            "plot-depth",
            "plot-spectra",
            "plot-rotary",
            "plot-fingerprint",
            "plot-bilinear",
            "plot-qk-spectra",
        }
        assert page.covered_titles() == {}, "the mode bar covers a panel's title"
        page.screenshot("toy-dec-small")
        url = page.driver.current_url
        assert "model=toy--dec-small" in url and "layer=2" in url and "head=1" in url
        page.driver.get("about:blank")
        page.driver.get(url)
        assert page.wait_for(lambda: page.shown() == "toy--dec-small|decoder|2|1")
        # a model id (as the tables and figures spell it) picks its slug's model
        page.driver.get("about:blank")
        page.driver.get(url.replace("model=toy--dec-small", "model=toy%2Fdec-small"))
        assert page.wait_for(lambda: page.shown() == "toy--dec-small|decoder|2|1")
        assert page.message() == "" and "model=toy--dec-small" in page.driver.current_url
        # a pick of the URL that names no model (or layer) of the page is said, not passed over
        page.driver.get("about:blank")
        page.driver.get(url.replace("model=toy--dec-small", "model=no--such-model").replace("layer=2", "layer=99"))
        assert page.wait_for(lambda: page.shown().startswith(world[0]["models"]["slug"].iloc[0] + "|"))
        assert "No model no--such-model in this explorer: showing" in page.message(), page.message()
        assert "No layer 99 in" in page.message(), page.message()
        page.pick("toy--dec-small", "decoder", 2, 1)
        assert page.message() == ""  # said once: the next pick clears it
        page.search("whisper")
        assert page.wait_for(lambda: page.options("model") == ["toy--whisper"])
        page.search("")
        page.select("filter-objective", "autoregressive")
        assert page.wait_for(lambda: "toy--enc-small" not in page.options("model"))
        page.collect_logs()
    page.copy_screenshots(SHOTS / ("toy-split" if split else "toy-inline"))
    assert not page.errors(), page.errors()
    assert page.requests and all(u.startswith("file://") for u in page.requests), page.requests
    assert any(u.endswith("/data/toy--dec-small.js") for u in page.requests) == split
