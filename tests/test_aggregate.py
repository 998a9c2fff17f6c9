"""Aggregation, null reference, tables and validation against the paper."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import toy_scores as toy
from wqk import aggregate as agg
from wqk import tables
from wqk.cli import main as wqk_main
from wqk.null import drawn_layers, null_scores, query_heads
from wqk.validate import compare, errata

ROOT = Path(__file__).resolve().parents[1]


def paper_file(name: str) -> Path:
    """The paper's CSVs, copied into the project from the authors' repository."""
    return ROOT / "config" / "paper" / name


STATS = [f"{m}_{s}" for m in ("symmetry", "directionality") for s in ("median", "q25", "q75")]


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------ the paper's statistic
def test_layer_quartiles_reproduce_published_scores():
    layers = pd.read_csv(paper_file("published_layer_scores.csv"))
    published = pd.read_csv(paper_file("published_scores.csv"))
    keys = ["group", "file", "model_key"]
    ours = agg.summarise(layers, keys)
    both = published.merge(ours, on=keys, suffixes=("", "_ours"), validate="one_to_one")
    assert len(both) == len(published) == 223
    for c in STATS:
        np.testing.assert_allclose(both[c + "_ours"], both[c], atol=1e-3, err_msg=c)
    # and not by accident: the mean is not the published statistic
    mean = layers.groupby(keys)["directionality"].mean().reset_index().merge(published, on=keys)
    assert (mean["directionality"] - mean["directionality_median"]).abs().max() > 1e-2


def test_quartiles_linear_interpolation_and_nan():
    assert agg.quartiles([0.1, 0.2, 0.3, 0.4]) == pytest.approx((0.25, 0.175, 0.325))
    assert agg.quartiles([np.nan, 1.0, 3.0]) == pytest.approx((2.0, 1.5, 2.5))
    assert all(np.isnan(agg.quartiles([np.nan])))


# ------------------------------------------------------------------ aggregation
def known_world():
    s = pd.concat(
        [
            toy.scores("org/enc", {"encoder": [(0.1, -0.4), (0.2, -0.3), (0.3, -0.2), (0.4, -0.1)]}),
            toy.scores("org/s2s", {"encoder": [(0.5, 0.0)], "decoder": [(0.0, -0.6), (0.2, -0.2), (np.nan, -0.4)]}),
        ],
        ignore_index=True,
    )
    cat = toy.catalogue(
        [
            dict(model_id="org/enc", family="E", modality="text", n_params=1e8, objective_encoder="bidirectional"),
            dict(model_id="org/s2s", family="S", modality="audio", n_params=2e8, objective_encoder="bidirectional",
                 objective_decoder="autoregressive"),
        ]
    )  # fmt: skip
    return s, cat


def test_models_table_known_medians():
    s, cat = known_world()
    out = agg.aggregate(s, agg.check_catalogue(cat))
    m = out["models"].set_index(["model", "stack"])
    enc = m.loc[("org/enc", "encoder")]
    assert enc["n_layers"] == 4 and enc["objective"] == "bidirectional" and enc["modality"] == "text"
    assert (enc["symmetry_median"], enc["symmetry_q25"], enc["symmetry_q75"]) == pytest.approx((0.25, 0.175, 0.325))
    assert enc["directionality_median"] == pytest.approx(-0.25)
    # heads: two per layer at layer +- 0.1 -> the same median, a wider spread
    assert enc["head_symmetry_median"] == pytest.approx(0.25)
    assert enc["head_symmetry_q75"] - enc["head_symmetry_q25"] > enc["symmetry_q75"] - enc["symmetry_q25"]
    dec = m.loc[("org/s2s", "decoder")]
    assert dec["objective"] == "autoregressive" and dec["n_layers"] == 3 and dec["n_layers_nan"] == 1
    assert dec["symmetry_median"] == pytest.approx(0.1)  # NaN layer left out
    # stable order: model, then encoder before decoder
    assert list(zip(out["models"]["model"], out["models"]["stack"])) == [
        ("org/enc", "encoder"), ("org/s2s", "encoder"), ("org/s2s", "decoder"),
    ]  # fmt: skip
    for c in ["model", "slug", "family", "stack", "objective", "modality", "n_params", "synthetic", "n_layers", *STATS]:
        assert c in out["models"].columns
    assert {f"head_{c}" for c in STATS} <= set(out["models"].columns)


def test_layers_relative_depth_and_groups():
    s, cat = known_world()
    out = agg.aggregate(s, cat)
    lay = out["layers"]
    enc = lay[lay["model"] == "org/enc"]
    assert enc["relative_depth"].tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    single = lay[(lay["model"] == "org/s2s") & (lay["stack"] == "encoder")]
    assert single["relative_depth"].tolist() == [0.0]
    g = out["groups"].set_index(["objective", "modality", "stack"])
    assert g.loc[("bidirectional", "text", "encoder"), "n_models"] == 1
    assert g.loc[("bidirectional", "audio", "encoder"), "n_layers"] == 1
    assert len(out["heads"]) == 2 * len(lay)


def test_catalogue_missing_column_is_named(tmp_path):
    _, cat = known_world()
    path = tmp_path / "catalogue.tsv"
    cat.drop(columns=["modality"]).to_csv(path, sep="\t", index=False)
    with pytest.raises(agg.CatalogueError, match=r"line 1 \(header\): missing column\(s\) \['modality'\]"):
        agg.read_catalogue(path)


def test_catalogue_comments_empty_slug_and_bad_values(tmp_path):
    _, cat = known_world()
    cat.loc[0, "slug"] = ""
    cat["source"] = "somewhere"  # extra columns are ignored
    path = tmp_path / "catalogue.tsv"
    path.write_text("# a comment line\n" + cat.to_csv(sep="\t", index=False))
    read = agg.read_catalogue(path)
    assert read["slug"].tolist() == ["org--enc", "org--s2s"] and set(read["source"]) == {"somewhere"}
    assert read["n_params"].tolist() == [1e8, 2e8] and read["synthetic"].dtype == bool
    cat.loc[1, "objective_decoder"] = "causal"
    with pytest.raises(agg.CatalogueError, match="objective_decoder"):
        agg.check_catalogue(cat)


def test_model_without_catalogue_line_is_named():
    s, cat = known_world()
    with pytest.raises(agg.CatalogueError, match="org/s2s"):
        agg.aggregate(s, cat[cat["model_id"] == "org/enc"])


def test_aggregate_cli_writes_deterministic_outputs(tmp_path):
    s, cat = known_world()
    cat.to_csv(tmp_path / "cat.tsv", sep="\t", index=False)
    paths = []
    for model, g in s.groupby("model"):
        p = tmp_path / f"{model.replace('/', '--')}.parquet"
        g.to_parquet(p, index=False)
        paths.append(str(p))
    hashes = []
    for run in ("a", "b"):
        out = tmp_path / run
        assert (
            wqk_main(["aggregate", "--scores", *paths, "--catalogue", str(tmp_path / "cat.tsv"), "--out-dir", str(out)])
            == 0
        )
        names = sorted(p.name for p in out.iterdir())
        expected = ["groups.csv", "groups.parquet", "heads.parquet", "layers.parquet", "models.csv", "models.parquet"]
        assert names == expected
        hashes.append({n: sha(out / n) for n in names})
    assert hashes[0] == hashes[1]
    assert pd.read_csv(tmp_path / "a" / "models.csv")["symmetry_median"].iloc[0] == pytest.approx(0.25)


def test_aggregate_cli_reads_the_catalogues_models_from_a_folder_as_from_a_list(tmp_path, capsys):
    """--scores-dir: the workflow's command line, which does not grow with the catalogue; the
    same bytes as the files listed one by one, and a model without its file is named."""
    s, cat = known_world()
    cat.to_csv(tmp_path / "cat.tsv", sep="\t", index=False)
    (tmp_path / "scores").mkdir()
    paths = []
    for model in cat["model_id"]:
        paths.append(str(tmp_path / "scores" / f"{model.replace('/', '--')}.parquet"))
        s[s["model"] == model].to_parquet(paths[-1], index=False)
    common = ["--catalogue", str(tmp_path / "cat.tsv"), "--out-dir"]
    assert wqk_main(["aggregate", "--scores", *paths, *common, str(tmp_path / "listed")]) == 0
    assert wqk_main(["aggregate", "--scores-dir", str(tmp_path / "scores"), *common, str(tmp_path / "dir")]) == 0
    for name in ("models.parquet", "groups.parquet", "layers.parquet", "heads.parquet", "models.csv"):
        assert sha(tmp_path / "listed" / name) == sha(tmp_path / "dir" / name), name
    Path(paths[1]).unlink()
    assert wqk_main(["aggregate", "--scores-dir", str(tmp_path / "scores"), *common, str(tmp_path / "x")]) != 0
    assert f"scores file {paths[1]} not found: run `wqk score` for that model first" in capsys.readouterr().err


def test_metric_columns_of_files_with_different_metrics_in_the_catalogue_order():
    """Files scored with different metrics: the scores files' one order (wqk.metric_catalogue),
    catalogued columns first, whichever file comes first; an unknown float column after them."""
    from wqk.metric_catalogue import order_columns

    s, _ = toy.toy_world()
    rotary = s[s["model"] == "toy/enc-small"].assign(rotary_symmetry_d1=0.5, rotary_symmetry_d0=0.4, extra_x=0.1)
    spectra = s[s["model"] == "toy/dec-small"].assign(stable_rank=1.0, symmetry_gain=0.2)
    expected = ["symmetry", "directionality", "stable_rank", "rotary_symmetry_d0", "rotary_symmetry_d1",
                "symmetry_gain", "extra_x"]  # fmt: skip
    for frames in ((rotary, spectra), (spectra, rotary)):
        both = pd.concat(frames, ignore_index=True)
        assert agg.metric_columns(both) == expected
        assert agg.metric_columns(both)[2:] == order_columns(c for c in both.columns if c in expected[2:])


# ------------------------------------------------------------------ null reference
def shapes_scores(d=256, k=64, h=4, h_kv=2, layers=2, stacks=("encoder",)):
    return pd.concat(
        [
            toy.scores("org/gqa", {s: [(0.5, -0.5)] * layers}, n_heads=h, n_kv_heads=h_kv, d=d, head_dim=k)
            for s in stacks
        ],
        ignore_index=True,
    )


def test_null_reference_shapes_and_chance_level():
    s = shapes_scores(stacks=("encoder", "decoder"))
    null = null_scores(s, seed=0)
    assert set(null["model"]) == {"org/gqa (null)"} and null["synthetic"].all()
    drawn = drawn_layers([0, 1])  # of each stack's 2 layers
    assert sorted(map(tuple, null[null["scope"] == "layer"][["stack", "layer"]].to_numpy())) == sorted(
        (stack, layer) for stack in ("encoder", "decoder") for layer in drawn
    )
    for c in ("stack", "n_heads", "n_kv_heads", "d_q", "d_k", "head_dim", "n_layers"):  # the model's shapes
        assert set(null[c]) == set(s[c]), c
    per_layer = 2 * query_heads({"n_heads": 4, "n_kv_heads": 2}, len(drawn))  # every key head's drawn query heads
    assert (null["scope"] == "head").sum() == 2 * len(drawn) * per_layer and (
        null["scope"] == "layer"
    ).sum() == 2 * len(drawn)
    assert null["head"].dtype == "Int32" and null.loc[null["scope"] == "layer", "head"].isna().all()
    # random Q, K: symmetry at chance (~0, spread ~1/sqrt(d)); the toy "model" sits at 0.5
    assert abs(np.median(null["symmetry"])) < 0.1
    assert null["symmetry"].abs().max() < 0.3
    assert null["directionality"].between(-1, 1).all()


def test_null_reference_is_seeded():
    s = shapes_scores(d=32, k=8)
    a, b, c = null_scores(s, seed=0), null_scores(s, seed=0), null_scores(s, seed=1)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["symmetry"], c["symmetry"])
    # a layer's null does not depend on the other layers present
    (drawn,) = a.loc[a["scope"] == "layer", "layer"].unique()
    one = null_scores(s[s["layer"] == drawn], seed=0)
    assert len(one) and set(one["layer"]) == {drawn}
    np.testing.assert_array_equal(one["symmetry"].to_numpy(), a[a["layer"] == drawn]["symmetry"].to_numpy())


def test_null_columns_in_models_table(tmp_path):
    s = shapes_scores(d=32, k=8)
    cat = toy.catalogue(
        [dict(model_id="org/gqa", family="G", modality="text", n_params=1e6, objective_encoder="bidirectional")]
    )
    null = null_scores(s, seed=0)
    out = agg.aggregate(s, cat, null)["models"]
    assert out["null_symmetry_median"].iloc[0] == pytest.approx(
        np.median(null.loc[null["scope"] == "layer", "symmetry"])
    )
    assert "null_directionality_median" in out
    assert out["symmetry_median"].iloc[0] == pytest.approx(0.5)
    # via the CLI
    sp, np_ = tmp_path / "s.parquet", tmp_path / "n.parquet"
    s.to_parquet(sp, index=False)
    assert wqk_main(["null", "--scores", str(sp), "--out", str(np_), "--seed", "0"]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(np_), null, check_dtype=False)


# ------------------------------------------------------------------ tables
def test_tables_written_in_three_formats(tmp_path):
    s, cat = toy.toy_world()
    models = agg.aggregate(s, cat)["models"]
    from wqk.tables import scores_all, scores_language

    lang = scores_language.build({"models": models})
    assert set(lang["model"]) >= {"toy/enc-small", "toy/dec-tiny-random (synthetic)", "toy/t5"}
    assert "toy/whisper" not in set(lang["model"])  # audio
    assert lang["symmetry"].str.fullmatch(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]").all()
    assert lang["objective"].iloc[0] == "bidirectional"
    paths = tables.write(lang, tmp_path / "scores_language", caption="Scores of language models.")
    assert [p.suffix for p in paths] == [".csv", ".md", ".tex", ".html"]
    page = (tmp_path / "scores_language.html").read_text()
    assert page.count("<tr>") == len(lang) + 1 and "<caption>Scores of language models.</caption>" in page
    md = (tmp_path / "scores_language.md").read_text()
    assert "| model | stack |" in md and "toy/enc-small" in md
    tex = (tmp_path / "scores_language.tex").read_text()
    assert "\\begin{tabular}" in tex and "\\bottomrule" in tex and "dec-tiny-random" in tex
    assert pd.read_csv(tmp_path / "scores_language.csv").shape == lang.shape
    every = scores_all.build({"models": models})
    assert len(every) == len(models) and list(every["modality"]).index("audio") > list(every["modality"]).index("text")
    # via the CLI, twice: identical bytes
    models.to_parquet(tmp_path / "models.parquet", index=False)
    digests = []
    for i in range(2):
        stem = tmp_path / f"t{i}" / "scores_all"
        assert (
            wqk_main(["table", "scores_all", "--in", f"models={tmp_path / 'models.parquet'}", "--out", str(stem)]) == 0
        )
        digests.append([sha(stem.with_name(stem.name + e)) for e in (".csv", ".md", ".tex", ".html")])
    assert digests[0] == digests[1]


def test_the_html_table_escapes_text_and_aligns_numbers_right():
    df = pd.DataFrame({"model": ["<b>a & b</b>"], "x": [0.123456], "n": [3]})
    page = tables.to_html(df)
    assert "&lt;b&gt;a &amp; b&lt;/b&gt;" in page and "<b>" not in page
    cells = page.split("<tr>")[2]
    assert cells.startswith("<td>&lt;b&gt;") and '<td style="text-align:right">0.1235</td>' in cells
    assert '<td style="text-align:right">3</td>' in cells


def test_latex_and_markdown_escaping():
    df = pd.DataFrame({"model": ["a_b|c & 50%"], "x": [0.123456], "n": [3]})
    assert "a\\_b|c \\& 50\\%" in tables.to_latex(df)
    md = tables.to_markdown(df)
    assert "a_b\\|c & 50%" in md and "0.1235" in md and "---:" in md


# ------------------------------------------------------------------ validation
def paper_rows():
    """Our models.parquet rows for ids the paper reports (values chosen around theirs)."""
    pub = pd.read_csv(paper_file("published_scores.csv"))

    def row(model, stack, key, file, shift=0.0, n_layers=None):
        p = pub[(pub["model_key"] == key) & (pub["file"] == file)].iloc[0]
        r = {"model": model, "stack": stack, "synthetic": False, "n_layers": n_layers or int(p["n_layers"])}
        for c in STATS:
            r[c] = float(p[c]) + (shift if c.startswith("symmetry") else 0.0)
        return r

    return pd.DataFrame(
        [
            row("google-bert/bert-base-uncased", "encoder", "bert-base-uncased", "BERT.pkl"),  # name-part match
            row("meta-llama/Llama-3.2-1B", "decoder", "meta-llama/Llama-3.2-1B", "LLAMA.pkl", shift=0.15),
            row("google-t5/t5-small", "encoder", "google-t5/t5-small", "T5Encoder.pkl"),
            row("google-t5/t5-small", "decoder", "google-t5/t5-small", "T5Decoder.pkl", shift=-0.05),
            row("facebook/musicgen-small", "decoder", "facebook/musicgen-small", "MusicGenDecoder.pkl", shift=0.2),
            row("facebook/musicgen-small", "cross", "facebook/musicgen-small", "MusicGenDecoder.pkl", shift=0.2),
            row("microsoft/speecht5_asr", "decoder", "microsoft/speecht5_asr", "SpeechT5Decoder.pkl", shift=0.03, n_layers=6),
            row("EleutherAI/gpt-neo-125m", "decoder", "EleutherAI/gpt-neo-125m", "GPT-neo.pkl", shift=0.1),
            row("facebook/detr-resnet-50", "decoder", "facebook/detr-resnet-50", "DETR-Decoder.pkl"),
        ]
    )  # fmt: skip


def _model_medians(cmp: pd.DataFrame, metric: str = "symmetry") -> pd.DataFrame:
    rows = cmp[(cmp["level"] == "model") & (cmp["statistic"] == "median") & (cmp["metric"] == metric)]
    return rows.set_index(["model", "stack"])


def test_validation_flags_and_causes(tmp_path):
    models = paper_rows()
    published = pd.read_csv(paper_file("published_scores.csv"))
    paper_models = pd.read_csv(paper_file("models.csv"))
    cmp = compare(models, published, paper_models)
    assert set(cmp["level"]) == {"model"} and set(cmp["statistic"]) == {"median", "q25", "q75"}
    sym = _model_medians(cmp)
    # exact agreement: not flagged, no cause
    bert = sym.loc[("google-bert/bert-base-uncased", "encoder")]
    assert bert["paper_key"] == "bert-base-uncased" and not bert["flag"] and bert["difference"] == pytest.approx(0)
    assert not sym.loc[("google-t5/t5-small", "encoder"), "flag"]
    # stacks of encoder-decoder models come from the result file
    t5d = sym.loc[("google-t5/t5-small", "decoder")]
    assert t5d["file"] == "T5Decoder.pkl" and t5d["flag"] and t5d["expected_cause"] == "" and not t5d["explained"]
    # a known mistake applies, but nothing shows it produced the published number: not explained
    llama = sym.loc[("meta-llama/Llama-3.2-1B", "decoder")]
    assert llama["flag"] and not llama["explained"] and llama["difference"] == pytest.approx(0.15)
    assert "randomly initialised" in llama["expected_cause"] and "tiled" in llama["expected_cause"]
    # MusicGen's published "decoder" is its cross-attention: compared with ours, not our self-attention
    assert ("facebook/musicgen-small", "decoder") not in sym.index
    assert "cross-attention" in sym.loc[("facebook/musicgen-small", "cross"), "expected_cause"]
    s5 = sym.loc[("microsoft/speecht5_asr", "decoder")]
    assert s5["flag"] and "SpeechT5" in s5["expected_cause"] and "ours 6, paper 5" in s5["expected_cause"]
    assert "plotted" in sym.loc[("facebook/detr-resnet-50", "decoder"), "note"]
    # the legacy short key "gpt-neo-125m" (corrupt GPT.pkl entry) is not compared
    neo = cmp[cmp["model"] == "EleutherAI/gpt-neo-125m"]
    assert set(neo["paper_key"]) == {"EleutherAI/gpt-neo-125m"} and len(neo) == 2 * 3
    # directionality was not shifted: never flagged; quartiles shifted with the medians
    assert not cmp[cmp["metric"] == "directionality"]["flag"].any()
    assert cmp[(cmp["metric"] == "symmetry") & (cmp["model"] == "meta-llama/Llama-3.2-1B")]["flag"].all()
    # 1e-4 is the published precision: a shift of 2e-4 is flagged, 5e-5 is not
    for shift, flagged in ((2e-4, True), (5e-5, False)):
        m = models.copy()
        m.loc[m["model"] == "google-bert/bert-base-uncased", "symmetry_median"] += shift
        assert (
            _model_medians(compare(m, published, paper_models)).loc[
                ("google-bert/bert-base-uncased", "encoder"), "flag"
            ]
            == flagged
        )

    # proof by the authors' method: it reproduces the published value on the same weights
    authors = models.copy()
    is_llama = authors["model"] == "meta-llama/Llama-3.2-1B"
    authors.loc[is_llama, [c for c in STATS if c.startswith("symmetry")]] -= 0.15
    authors.loc[authors["model"] == "facebook/musicgen-small", "symmetry_median"] += 0.05  # still off
    proved = _model_medians(compare(models, published, paper_models, authors=authors))
    llama = proved.loc[("meta-llama/Llama-3.2-1B", "decoder")]
    assert llama["explained"] and llama["explained_by"] == "the authors' method reproduces it"
    assert llama["authors"] == pytest.approx(llama["paper"])
    music = proved.loc[("facebook/musicgen-small", "cross")]
    assert music["flag"] and not music["explained"] and music["expected_cause"]
    # random weights: the published value inside our null reference's spread, ours outside it
    with_null = models.copy()
    p = published[published["model_key"] == "meta-llama/Llama-3.2-1B"].iloc[0]
    with_null["null_symmetry_q25"], with_null["null_symmetry_q75"] = (
        p["symmetry_median"] - 0.01,
        p["symmetry_median"] + 0.01,
    )
    by_null = _model_medians(compare(with_null, published, paper_models)).loc[("meta-llama/Llama-3.2-1B", "decoder")]
    assert by_null["explained"] and "null reference" in by_null["explained_by"]
    assert not _model_medians(compare(with_null, published, paper_models)).loc[
        ("google-t5/t5-small", "decoder"), "explained"
    ]  # no random-weights cause: the null band proves nothing

    # errata: flagged medians, with the authors' value, the shift of the point and the proof
    err = errata(compare(models, published, paper_models, authors=authors))
    assert list(err.columns) == [
        "model",
        "metric",
        "paper",
        "authors_method",
        "ours",
        "point_moves_by",
        "cause",
        "status",
    ]
    assert len(err) == int(_model_medians(cmp)["flag"].sum()) == 5
    row = err[err["model"] == "meta-llama/Llama-3.2-1B [decoder]"].iloc[0]
    assert row["status"].startswith("proven") and row["point_moves_by"] == pytest.approx(0.15)
    assert (err.loc[err["model"] == "google-t5/t5-small [decoder]", "status"] == "no known cause").all()
    assert (err.loc[err["model"] == "facebook/musicgen-small [cross]", "status"] == "not proven").all()

    # CLI and the two tables
    models.to_parquet(tmp_path / "models.parquet", index=False)
    out = tmp_path / "validation" / "paper_comparison.csv"
    argv = ["validate", "--models", str(tmp_path / "models.parquet"), "--published", str(paper_file("published_scores.csv")),
            "--paper-models", str(paper_file("models.csv")), "--out", str(out)]  # fmt: skip
    assert wqk_main(argv) == 0
    assert len(pd.read_csv(out)) == len(cmp)
    for name in ("errata", "paper_comparison"):
        stem = tmp_path / "tables" / name
        assert wqk_main(["table", name, "--in", f"comparison={out}", "--out", str(stem)]) == 0
        assert stem.with_suffix(".md").read_text().count("\n") > 3
    assert "Llama-3.2-1B" in (tmp_path / "tables" / "errata.md").read_text()


def test_validation_per_layer(tmp_path):
    """Every published layer against ours: one layer off by more than the precision is flagged."""
    models = paper_rows()
    published = pd.read_csv(paper_file("published_scores.csv"))
    pub_layers = pd.read_csv(paper_file("published_layer_scores.csv"))
    paper_models = pd.read_csv(paper_file("models.csv"))
    bert = pub_layers[(pub_layers["model_key"] == "bert-base-uncased") & (pub_layers["file"] == "BERT.pkl")]
    ours = bert.assign(model="google-bert/bert-base-uncased", stack="encoder")[
        ["model", "stack", "layer", "symmetry", "directionality"]
    ]
    ours.loc[ours["layer"] == 3, "directionality"] += 3e-4
    cmp = compare(models, published, paper_models, layers=ours, published_layers=pub_layers)
    layer_rows = cmp[(cmp["level"] == "layer") & (cmp["model"] == "google-bert/bert-base-uncased")]
    assert len(layer_rows) == 2 * len(bert) == 24
    flagged = layer_rows[layer_rows["flag"]]
    assert list(zip(flagged["layer"], flagged["metric"])) == [(3, "directionality")]
    # a published layer we do not have (none of ours for llama): flagged, ours undefined
    llama = cmp[(cmp["level"] == "layer") & (cmp["model"] == "meta-llama/Llama-3.2-1B")]
    assert len(llama) and llama["flag"].all() and llama["ours"].isna().all()
    # CLI with the layer inputs
    models.to_parquet(tmp_path / "models.parquet", index=False)
    ours.to_parquet(tmp_path / "layers.parquet", index=False)
    out = tmp_path / "cmp.csv"
    argv = ["validate", "--models", str(tmp_path / "models.parquet"), "--layers", str(tmp_path / "layers.parquet"),
            "--published", str(paper_file("published_scores.csv")),
            "--published-layers", str(paper_file("published_layer_scores.csv")),
            "--paper-models", str(paper_file("models.csv")), "--out", str(out)]  # fmt: skip
    assert wqk_main(argv) == 0
    assert (pd.read_csv(out)["level"] == "layer").sum() == (cmp["level"] == "layer").sum()
