"""`wqk score --method authors`: the paper authors' published code path, mistakes included.

Each mistake is checked on a tiny random checkpoint against an independent re-implementation
written here from the description of the authors' code (raw safetensors weights, M formed
explicitly in float64, the scores from DESIGN.md's definitions with the authors' "0 when
nothing exceeds the threshold"), and shown to differ from `--method exact` where it matters.
Nothing here calls the project's adapters or metrics for an expected value.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import transformers as tf
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
from call_walk import climbs
from tiny_zoo import tiny_config
from wqk import score
from wqk.cli import main
from wqk.contracts import SCORES_SCHEMA
from wqk.tiny import build_tiny


def _save(cls: str, model_type: str, folder: Path, **overrides) -> Path:
    config = tf.AutoConfig.for_model(model_type, **{**tiny_config(model_type), **overrides})
    torch.manual_seed(0)
    getattr(tf, cls)(config).save_pretrained(folder)
    return folder


def _raw(folder: Path) -> dict[str, torch.Tensor]:
    return {k: v.double() for k, v in load_file(str(folder / "model.safetensors")).items()}


def _per_layer(raw: dict, pattern: str) -> dict[int, torch.Tensor]:
    """layer -> tensor for the names ending in pattern (a regex with (\\d+) for the layer)."""
    rx = re.compile(r"(?:.*\.)?" + pattern)
    found = {int(m.group(1)): t for n, t in raw.items() if (m := rx.fullmatch(n))}
    assert found, pattern
    return dict(sorted(found.items()))


def _scores(M: torch.Tensor) -> tuple[float, float]:
    """(symmetry, directionality) of M, from DESIGN.md section 2; directionality 0 when
    E_r + E_c = 0 (the authors' `if denom_excess == 0: score = 0.0`)."""
    fro2 = (M * M).sum()
    symmetry = float((M * M.T).sum() / fro2) if fro2 > 0 else float("nan")
    r, c = M.norm(dim=1), M.norm(dim=0)
    t_r, t_c = r.mean() + 2 * r.std(), c.mean() + 2 * c.std()
    e_r, e_c = (r[r > t_r] - t_r).sum(), (c[c > t_c] - t_c).sum()
    directionality = 0.0 if e_r + e_c == 0 else float((e_r - e_c) / (e_r + e_c))
    return symmetry, directionality


def _layers(df, stack: str) -> dict[int, tuple[float, float]]:
    rows = df[(df["stack"] == stack) & (df["scope"] == "layer")].sort_values("layer")
    return {int(r.layer): (r.symmetry, r.directionality) for r in rows.itertuples()}


def _assert_layers(df, stack: str, forms: dict[int, torch.Tensor]):
    got = _layers(df, stack)
    assert sorted(got) == sorted(forms), (stack, sorted(got), sorted(forms))
    want = np.array([_scores(forms[i]) for i in sorted(forms)])
    np.testing.assert_allclose(np.array([got[i] for i in sorted(forms)]), want, rtol=1e-4, atol=1e-5)


def _run(folder: Path, method: str):
    return score(folder, device="cpu", progress=False, method=method)


def _sym(df, stack: str) -> np.ndarray:
    return np.array([v[0] for v in _layers(df, stack).values()])


def _qk_and_runs(folder: Path, where: str):
    """Per-layer raw W_q, W_k of the tensors `where` names ("{p}" for q or k), and the authors'
    and the exact scores of the checkpoint."""
    raw = _raw(folder)
    q, k = (_per_layer(raw, where.replace("{p}", p)) for p in "qk")
    return q, k, _run(folder, "authors"), _run(folder, "exact")


def _layer_form(wq: torch.Tensor, wk: torch.Tensor) -> torch.Tensor:
    """The correct form of separate nn.Linear q/k weights [out, in]: W_q^T W_k."""
    return wq.T @ wk


# ------------------------------------------------------------------- a. grouped-query attention


def test_gqa_key_heads_tiled(tmp_path):
    folder = build_tiny("llama", tmp_path / "llama")  # 8 query heads, 2 key heads, d 64, k 8
    raw = _raw(folder)
    wq, wk = (
        _per_layer(raw, r"layers\.(\d+)\.self_attn\.q_proj\.weight"),
        _per_layer(raw, r"layers\.(\d+)\.self_attn\.k_proj\.weight"),
    )
    h, n_kv, k = 8, 2, 8
    heads = {}  # (layer, head) -> M_h = Q_h K_(h mod n_kv)^T, Q_h = (rows of head h of W_q)^T
    for i in wq:
        for q_head in range(h):
            kv = q_head % n_kv
            heads[i, q_head] = wq[i][q_head * k : (q_head + 1) * k].T @ wk[i][kv * k : (kv + 1) * k]
    forms = {i: sum(heads[i, q] for q in range(h)) for i in wq}
    authors, exact = _run(folder, "authors"), _run(folder, "exact")
    _assert_layers(authors, "decoder", forms)
    per_head = authors[authors["scope"] == "head"].sort_values(["layer", "head"])
    got = per_head[["symmetry", "directionality"]].to_numpy()
    want = np.array([_scores(heads[i, q]) for i in forms for q in range(h)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert np.abs(_sym(authors, "decoder") - _sym(exact, "decoder")).max() > 1e-3


# ------------------------------------------------- b, c. fused qkv: [q|k|v] slices, no transpose


@pytest.mark.parametrize(
    "cls,model_type,stack,name,overrides",
    [
        ("GPTNeoXForCausalLM", "gpt_neox", "decoder", r"layers\.(\d+)\.attention\.query_key_value\.weight", {}),
        ("DebertaForMaskedLM", "deberta", "encoder", r"layer\.(\d+)\.attention\.self\.in_proj\.weight", {}),
        ("ModernBertForMaskedLM", "modernbert", "encoder", r"layers\.(\d+)\.attn\.Wqkv\.weight", {}),
        # Phi-3-mini: as many key heads as query heads, so W[d:2d] is all of W_k
        (
            "Phi3ForCausalLM",
            "phi3",
            "decoder",
            r"layers\.(\d+)\.self_attn\.qkv_proj\.weight",
            {"num_key_value_heads": 4},
        ),
        # with grouped-query attention (2 key heads of 4) the literal W[d:2d] is W_k then half of W_v
        ("Phi3ForCausalLM", "phi3", "decoder", r"layers\.(\d+)\.self_attn\.qkv_proj\.weight", {}),
    ],
)
def test_fused_qkv_first_rows_untransposed(tmp_path, cls, model_type, stack, name, overrides):
    """The authors' gpt-neox branch: Wq = W[0:d, :], Wk = W[d:2d, :] of the fused [3d, d]
    weight, M = Wq @ Wk.T (rows interleaved per head for GPT-NeoX and DeBERTa v1: wrong
    slices; all four: the transpose is missing, M lives on the output space)."""
    if model_type == "gpt_neox":
        folder = build_tiny("gpt_neox", tmp_path / model_type)
    else:
        folder = _save(cls, model_type, tmp_path / model_type, **overrides)
    fused = _per_layer(_raw(folder), name)
    d = next(iter(fused.values())).shape[1]
    forms = {i: w[:d] @ w[d : 2 * d].T for i, w in fused.items()}
    authors, exact = _run(folder, "authors"), _run(folder, "exact")
    _assert_layers(authors, stack, forms)
    assert np.abs(_sym(authors, stack) - _sym(exact, stack)).max() > 1e-3
    # the contract's columns, as the exact method's first ones (the authors' scored the paper's two only)
    assert list(authors.columns) == list(exact.columns[: len(authors.columns)]) == SCORES_SCHEMA.names


def test_fused_qkv_from_a_model_in_memory(tmp_path):
    folder = build_tiny("gpt_neox", tmp_path / "neox")
    model = tf.AutoModelForCausalLM.from_pretrained(folder)
    from_memory = score(model, device="cpu", progress=False, method="authors")
    from_folder = _run(folder, "authors")
    np.testing.assert_allclose(from_memory["symmetry"], from_folder["symmetry"], rtol=1e-6)
    assert from_memory.attrs["method"] == "authors"


# ------------------------------------------------------------- d. layer counts: SpeechT5, GIT


def test_speecht5_decoder_layers_beyond_the_aliased_count_dropped(tmp_path):
    # 2 encoder, 3 decoder layers, speech_decoder_postnet_layers 1: the authors' count
    folder = _save("SpeechT5Model", "speecht5", tmp_path / "speecht5")
    q, k, authors, exact = _qk_and_runs(folder, r"wrapped_decoder\.layers\.(\d+)\.self_attn\.{p}_proj\.weight")
    _assert_layers(authors, "decoder", {0: _layer_form(q[0], k[0])})
    assert sorted(_layers(exact, "decoder")) == [0, 1, 2]
    assert _layers(authors, "encoder") == _layers(exact, "encoder")  # the encoder is read in full


def test_git_image_encoder_layers_beyond_num_hidden_layers_dropped(tmp_path):
    folder = _save("GitForCausalLM", "git", tmp_path / "git")  # 3 image layers, num_hidden_layers 2
    q, k, authors, exact = _qk_and_runs(folder, r"vision_model\.encoder\.layers\.(\d+)\.self_attn\.{p}_proj\.weight")
    _assert_layers(authors, "encoder", {i: _layer_form(q[i], k[i]) for i in (0, 1)})
    assert sorted(_layers(exact, "encoder")) == [0, 1, 2]
    assert sorted(authors["n_layers"][authors["stack"] == "encoder"].unique()) == [2]


# ------------------------------------------------------ e. MusicGen: cross-attention as decoder


def test_musicgen_decoder_is_the_cross_attention(tmp_path):
    folder = _save("MusicgenForConditionalGeneration", "musicgen", tmp_path / "musicgen")
    q, k, authors, exact = _qk_and_runs(folder, r"decoder\.layers\.(\d+)\.encoder_attn\.{p}_proj\.weight")
    _assert_layers(authors, "decoder", {i: _layer_form(q[i], k[i]) for i in q})
    assert set(authors["stack"]) == {"encoder", "decoder"}  # no self-attention decoder, no cross
    assert np.abs(_sym(authors, "decoder") - _sym(exact, "decoder")).max() > 1e-3


# --------------------------------------------------------- f. Mllama: global layers skipped


def test_mllama_vision_global_layers_skipped(tmp_path):
    folder = _save("MllamaForConditionalGeneration", "mllama", tmp_path / "mllama")  # 2 local + 1 global
    raw = _raw(folder)
    q = _per_layer(raw, r"vision_model\.transformer\.layers\.(\d+)\.self_attn\.q_proj\.weight")
    k = _per_layer(raw, r"vision_model\.transformer\.layers\.(\d+)\.self_attn\.k_proj\.weight")
    authors, exact = _run(folder, "authors"), _run(folder, "exact")
    _assert_layers(authors, "encoder", {i: _layer_form(q[i], k[i]) for i in q})
    assert sorted(_layers(exact, "encoder")) == [0, 1, 2]


# ------------------------------------------ g. directionality 0 when nothing exceeds the threshold


def test_directionality_zero_when_nothing_exceeds_the_threshold(tmp_path):
    folder = build_tiny("bert", tmp_path / "bert")  # 2 layers, d 64, 4 heads
    weights = load_file(str(folder / "model.safetensors"))
    q0 = "bert.encoder.layer.0.attention.self.query.weight"
    weights[q0] = torch.zeros_like(weights[q0])  # M = 0: no norm exceeds mean + 2 std
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    raw = _raw(folder)
    q = _per_layer(raw, r"layer\.(\d+)\.attention\.self\.query\.weight")
    k = _per_layer(raw, r"layer\.(\d+)\.attention\.self\.key\.weight")
    authors, exact = _run(folder, "authors"), _run(folder, "exact")
    _assert_layers(authors, "encoder", {i: _layer_form(q[i], k[i]) for i in q})
    assert _layers(authors, "encoder")[0][1] == 0.0
    assert np.isnan(_layers(exact, "encoder")[0][1])
    zero = authors[(authors["layer"] == 0)]
    assert (zero["directionality"] == 0).all() and zero["symmetry"].isna().all()
    # everywhere else the two methods agree exactly (no GQA, no fused weights here)
    rest_a, rest_e = authors[authors["layer"] == 1], exact[exact["layer"] == 1]
    np.testing.assert_array_equal(rest_a["directionality"], rest_e["directionality"])
    np.testing.assert_array_equal(rest_a["symmetry"], rest_e["symmetry"])


# ------------------------------------------------------------------ the command line, exact


def test_exact_is_the_default_and_unchanged(tmp_path):
    folder = build_tiny("llama", tmp_path / "llama")
    paths = {m: tmp_path / f"{m}.parquet" for m in ("default", "exact", "authors")}
    for m, out in paths.items():
        extra = [] if m == "default" else ["--method", m]
        assert main(["score", str(folder), "--out", str(out), "--device", "cpu", "--quiet", *extra]) == 0
    assert paths["default"].read_bytes() == paths["exact"].read_bytes()
    assert (
        pq.read_schema(paths["default"]).metadata is None
        or b"wqk.method" not in pq.read_schema(paths["default"]).metadata
    )
    assert pq.read_schema(paths["authors"]).metadata[b"wqk.method"] == b"authors"
    assert pq.read_schema(paths["authors"]).names == SCORES_SCHEMA.names
    assert pq.read_schema(paths["exact"]).names[: len(SCORES_SCHEMA)] == SCORES_SCHEMA.names
    default = score(folder, device="cpu", progress=False)
    exact = _run(folder, "exact")
    assert default.equals(exact) and "method" not in default.attrs


def test_authors_walks_down_the_package(tmp_path):
    folder = build_tiny("llama", tmp_path / "llama")
    out = tmp_path / "scores.parquet"
    assert climbs(main, ["score", str(folder), "--out", str(out), "--quiet", "--method", "authors"]) == []
    assert out.is_file()


def test_authors_needs_the_checkpoint(tmp_path, capsys):
    folder = build_tiny("gpt_neox", tmp_path / "neox")
    matrices = tmp_path / "m.parquet"
    assert main(["extract", str(folder), "--out", str(matrices)]) == 0
    assert main(["score", str(matrices), "--out", str(tmp_path / "s.parquet"), "--method", "authors"]) == 1
    assert "--method authors reads the checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "s.parquet").exists()
    with pytest.raises(ValueError, match="checkpoint"):
        score(matrices, method="authors")
    with pytest.raises(ValueError, match="method"):
        score(folder, method="paper")


@pytest.mark.parametrize(
    "model",
    [
        "llama",  # grouped-query: the authors' blocks scored anew
        "gpt_neox",  # fused qkv: likewise
        "bert",  # the exact blocks: derived from the exact rows
        "speecht5",  # derived, decoder layers cut
        "git",  # derived, image layers cut
        "musicgen",  # derived, cross-attention renamed decoder, self-attention dropped
    ],
)
def test_authors_out_beside_the_exact_scores(tmp_path, capsys, model):
    """The workflow's one score job writes both: --authors-out equals --method authors (whether
    derived from the exact rows or scored anew), and the exact scores beside it are the
    default's, byte for byte."""
    classes = {"speecht5": "SpeechT5Model", "git": "GitForCausalLM", "musicgen": "MusicgenForConditionalGeneration"}
    if model in classes:
        folder = _save(classes[model], model, tmp_path / model)
    else:
        folder = build_tiny(model, tmp_path / model)
    run = ["score", str(folder), "--device", "cpu", "--quiet"]
    assert main([*run, "--out", str(tmp_path / "both.parquet"), "--authors-out", str(tmp_path / "a.parquet")]) == 0
    assert main([*run, "--out", str(tmp_path / "exact.parquet")]) == 0
    assert main([*run, "--out", str(tmp_path / "authors.parquet"), "--method", "authors"]) == 0
    assert (tmp_path / "both.parquet").read_bytes() == (tmp_path / "exact.parquet").read_bytes()
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "authors.parquet").read_bytes()
    matrices = tmp_path / "m.parquet"
    assert main(["extract", str(folder), "--out", str(matrices)]) == 0
    capsys.readouterr()
    assert (
        main(["score", str(matrices), "--out", str(tmp_path / "s.parquet"), "--authors-out", str(tmp_path / "x")]) == 1
    )
    assert "--authors-out reads the checkpoint" in capsys.readouterr().err
