"""Records of the rotary decoders of the Llama lineage (qwen2, qwen3, gemma, gemma2,
gemma3_text, olmo, olmo2, starcoder2, stablelm, cohere) against the models' own logits, and
DeepSeek's multi-head latent attention refused.

Plain types: the generated check (tests/test_records.py, `check_record_logits`). Gemma 2's
soft-capped scores are uncapped (cap * atanh(s / cap)) before the same comparison. QK-norm
types: the captured scores times the norm's per-token scalings (the rms, or a LayerNorm's
std, of each query and key, with the model's eps, computed from x through the projections)
must equal scale * x Q_h' K_h'^T y, the factors with the gains folded in. The norm weights are
randomised before saving (transformers initialises them to ones or zeros, which would hide a
missing or misplaced gain). A second pass at real positions checks the rope too (tolerance
1e-6: transformers computes the rotary angles in float32, and the folded factors of a float32
checkpoint are float32 products).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from adapter_check import capture_many, compare, load_for_check
from test_records import check_record_logits
from wqk.adapters import model_blocks
from wqk.authors import open_authors
from wqk.checkpoints import open_checkpoint
from wqk.cli import main
from wqk.score_table import layer_table, score_table, to_frame
from wqk.tiny import build_tiny, tiny_model

F64 = torch.float64
B, T = 2, 9
PLAIN = ["qwen2", "gemma", "olmo", "starcoder2", "stablelm", "cohere"]


def _randomised(model_type: str, folder: Path, **overrides) -> Path:
    """The tiny model with every 1-D/2-D norm weight (gains, QK-norm gains) randomised, saved."""
    model = tiny_model(model_type, **overrides)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.5 * torch.randn(p.shape, generator=g))
    model.save_pretrained(folder)
    return folder


def _ids(vocab: int) -> torch.Tensor:
    return torch.randint(3, vocab, (B, T), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("model_type", PLAIN)
def test_plain_records_match_the_model_logits(model_type, tmp_path):
    counts = check_record_logits(_randomised(model_type, tmp_path / model_type))
    assert counts == {"decoder": 2}


# ------------------------------------------------------------------ QK-norm and soft-capping


@dataclass
class Case:
    model_type: str
    over: dict  # tiny config overrides
    scaling: str  # "head_rms" (over head_dim), "width_rms" (over all heads), "head_std" (LayerNorm)
    norms: tuple[str, str]  # attention module attributes of the query and key norms


QK_NORM = [
    Case("qwen3", {}, "head_rms", ("q_norm", "k_norm")),
    Case("gemma3_text", {}, "head_rms", ("q_norm", "k_norm")),
    Case("olmo2", {}, "width_rms", ("q_norm", "k_norm")),
    Case("cohere", dict(use_qk_norm=True), "head_std", ("q_norm", "k_norm")),
    Case("stablelm", dict(qk_layernorm=True), "head_std", ("q_layernorm", "k_layernorm")),
]


def _eps(norm: torch.nn.Module) -> float:
    if hasattr(norm, "norms"):  # StableLM: one LayerNorm per head
        return norm.norms[0].eps
    return getattr(norm, "variance_epsilon", getattr(norm, "eps", None))


@torch.no_grad()
def _scalings(case: Case, attention, proj: torch.nn.Linear, norm, x: torch.Tensor, heads: int) -> torch.Tensor:
    """Each token's divisor in the QK-norm, per head: [B, heads, T]."""
    y = proj(x)  # biases zeroed by load_for_check
    eps = _eps(norm)
    if case.scaling == "width_rms":
        return (y.pow(2).mean(-1) + eps).sqrt()[:, None, :].expand(-1, heads, -1)
    y = y.view(*y.shape[:2], -1, attention.head_dim).transpose(1, 2)  # [B, H, T, k]
    spread = y.var(-1, unbiased=False) if case.scaling == "head_std" else y.pow(2).mean(-1)
    return (spread + eps).sqrt()


def _rotated(q: torch.Tensor, k: torch.Tensor, inv_freq: tuple, layout: str) -> torch.Tensor:
    """sum over dims of q_i R(j - i) k_j for q, k [B, H, T, k] (tests/test_adapter_extras.py's)."""
    n = len(inv_freq)
    a = torch.arange(n) if layout == "half" else 2 * torch.arange(n)
    b = a + n if layout == "half" else a + 1
    rest = torch.arange(2 * n, q.shape[-1])
    offset = (torch.arange(q.shape[2])[None, :] - torch.arange(q.shape[2])[:, None]).to(F64)
    angle = offset[..., None] * torch.tensor(inv_freq, dtype=F64)
    c, s = angle.cos(), angle.sin()
    qa, qb = q[..., a][:, :, :, None], q[..., b][:, :, :, None]
    ka, kb = k[..., a][:, :, None], k[..., b][:, :, None]
    return (qa * (c * ka - s * kb) + qb * (s * ka + c * kb)).sum(-1) + q[..., rest] @ k[..., rest].transpose(-1, -2)


def _captured(folder: Path, positions: bool):
    """(blocks, attention modules, x per module, scores per module) of one forward pass."""
    ckpt = open_checkpoint(str(folder))
    blocks = list(model_blocks(ckpt)[1])
    model = load_for_check(folder)
    modules = [layer.self_attn for layer in model.model.layers]
    kwargs = dict(input_ids=_ids(model.config.vocab_size))
    if not positions:
        kwargs["position_ids"] = torch.zeros(B, T, dtype=torch.long)
    with capture_many(modules) as calls:
        model(**kwargs)
    xs = [c[0].kwargs["hidden_states"].to(F64) for c in calls]
    scores = [next(s for s in c[0].softmax_inputs if s.ndim == 4).to(F64) for c in calls]
    return blocks, modules, xs, scores


@pytest.mark.parametrize("case", QK_NORM, ids=[c.model_type for c in QK_NORM])
def test_qk_norm_logits_are_the_folded_form_times_the_token_scalings(case, tmp_path):
    folder = _randomised(case.model_type, tmp_path / "m", **case.over)
    for positions in (False, True):
        blocks, modules, xs, scores = _captured(folder, positions)
        assert len(blocks) == len(modules) and {b.form for b in blocks} == {"qk_norm_gain_folded"}
        for block, module, x, got in zip(blocks, modules, xs, scores):
            rq = _scalings(case, module, module.q_proj, getattr(module, case.norms[0]), x, block.n_heads)
            rk = _scalings(case, module, module.k_proj, getattr(module, case.norms[1]), x, block.n_kv_heads)
            rk = rk.repeat_interleave(block.group_size, 1)  # the key head of each query head
            unscaled = got * rq[..., :, None] * rk[..., None, :]
            open_ = got > -1e4
            if not positions:  # rope the identity: the project's own comparison
                # rtol 1e-6: the folded factors of a float32 checkpoint are rounded to float32
                assert compare(block, x, x, torch.where(open_, unscaled, got), module.scaling, rtol=1e-6) < 1e-6
                continue
            q = torch.einsum("btd,hdk->bhtk", x, block.q.to(F64))
            k = torch.einsum("btd,hdk->bhtk", x, block.k_per_query_head().to(F64))
            want = module.scaling * _rotated(q, k, block.rope.inv_freq, block.rope.layout)
            err = ((unscaled - want).abs() * open_).amax() / (want.abs() * open_).amax()
            assert err < 1e-6, f"{case.model_type} layer {block.layer} with rope: relative error {err:.2e}"


def test_qk_norm_gains_are_folded_from_the_saved_tensors(tmp_path):
    folder = _randomised("qwen3", tmp_path / "qwen3")
    ckpt = open_checkpoint(str(folder))
    for b in model_blocks(ckpt)[1]:
        base = f"model.layers.{b.layer}.self_attn."
        gq, gk = ckpt.store.get(base + "q_norm.weight"), ckpt.store.get(base + "k_norm.weight")
        wq, wk = ckpt.store.get(base + "q_proj.weight"), ckpt.store.get(base + "k_proj.weight")
        assert torch.equal(b.q, wq.reshape(4, 16, 32).transpose(1, 2) * gq)
        assert torch.equal(b.k, wk.reshape(2, 16, 32).transpose(1, 2) * gk)


def test_gemma2_soft_capped_scores_are_a_map_of_the_bilinear_form(tmp_path):
    folder = _randomised("gemma2", tmp_path / "gemma2")
    blocks, modules, xs, scores = _captured(folder, positions=False)
    assert [b.form for b in blocks] == ["bilinear"] * 2
    cap = modules[0].attn_logit_softcapping
    assert cap == 50.0
    for block, module, x, got in zip(blocks, modules, xs, scores):
        open_ = got > -1e4
        uncapped = torch.where(open_, cap * torch.atanh(got.clamp(-cap + 1e-9, cap - 1e-9) / cap), got)
        assert compare(block, x, x, uncapped, module.scaling) < 1e-9
        with pytest.raises(AssertionError, match="differ"):  # the capped scores themselves do not fit
            compare(block, x, x, got, module.scaling)


# ------------------------------------------------------------------ extras: gains, biases, rope


@pytest.mark.parametrize("model_type", ["gemma", "gemma2", "gemma3_text"])
def test_gemma_gains_are_one_plus_the_stored_weight(model_type, tmp_path):
    ckpt = open_checkpoint(str(_randomised(model_type, tmp_path / "m")))
    for b in model_blocks(ckpt)[1]:
        w = ckpt.store.get(f"model.layers.{b.layer}.input_layernorm.weight")
        assert torch.equal(b.q_gain, 1.0 + w) and b.k_gain is b.q_gain


@pytest.mark.parametrize("model_type", ["qwen2", "starcoder2", "stablelm"])
def test_biases_are_the_saved_tensors(model_type, tmp_path):
    ckpt = open_checkpoint(str(build_tiny(model_type, tmp_path / "m")))
    for b in model_blocks(ckpt)[1]:
        base = f"model.layers.{b.layer}.self_attn."
        assert torch.equal(b.q_bias.flatten(), ckpt.store.get(base + "q_proj.bias"))
        assert torch.equal(b.k_bias.flatten(), ckpt.store.get(base + "k_proj.bias"))


def test_olmo_has_no_gain_and_olmo2_none_before_its_attention(tmp_path):
    for mt in ("olmo", "olmo2"):
        blocks = list(model_blocks(open_checkpoint(str(build_tiny(mt, tmp_path / mt))))[1])
        assert all(b.q_gain is None and b.q_bias is None for b in blocks)


ROTARY = ["qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "olmo", "olmo2", "starcoder2", "stablelm", "cohere"]


@pytest.mark.parametrize("model_type", ROTARY)
def test_rope_is_the_models_own(model_type, tmp_path):
    folder = build_tiny(model_type, tmp_path / "m")
    blocks = list(model_blocks(open_checkpoint(str(folder)))[1])
    model = load_for_check(folder)
    rotary = model.model.rotary_emb
    for b in blocks:
        layer_type = getattr(model.config, "layer_types", [None] * len(blocks))[b.layer]
        own = getattr(rotary, f"{layer_type}_inv_freq") if model_type == "gemma3_text" else rotary.inv_freq
        assert torch.allclose(torch.tensor(b.rope.inv_freq, dtype=F64), own.to(F64), rtol=1e-6)
        assert b.rope.layout == ("interleaved" if model_type == "cohere" else "half")
    if model_type == "stablelm":  # partial rotary: a quarter of each head
        assert blocks[0].rope.rotary_dim == blocks[0].q.shape[2] // 4
    if model_type == "gemma3_text":  # sliding and full layers: their own thetas
        assert blocks[0].rope.inv_freq != blocks[2].rope.inv_freq and blocks[0].rope == blocks[1].rope


def _whole_head(rope):  # StableLM's frequencies had the whole head rotated (its partial rotary missed)
    k = 8 * len(rope.inv_freq)  # rotary dim 2 * len = head_dim / 4
    return tuple((1.0 / 10000 ** (torch.arange(0, k, 2, dtype=F64) / k)).tolist()), rope.layout


@pytest.mark.parametrize(
    "model_type, wrong",
    [("cohere", lambda r: (r.inv_freq, "half")), ("stablelm", _whole_head)],
    ids=["cohere-interleaved", "stablelm-partial"],
)
def test_rope_fits_the_logits_and_a_wrong_one_does_not(model_type, wrong, tmp_path):
    blocks, modules, xs, scores = _captured(build_tiny(model_type, tmp_path / "m"), positions=True)
    for block, module, x, got in zip(blocks, modules, xs, scores):
        q = torch.einsum("btd,hdk->bhtk", x, block.q.to(F64))
        k = torch.einsum("btd,hdk->bhtk", x, block.k_per_query_head().to(F64))
        open_ = got > -1e4
        errors = []
        for inv_freq, layout in ((block.rope.inv_freq, block.rope.layout), wrong(block.rope)):
            want = module.scaling * _rotated(q, k, inv_freq, layout)
            errors.append(float(((got - want).abs() * open_).amax() / (want.abs() * open_).amax()))
        assert errors[0] < 1e-6 and errors[1] > 1e-2, f"{model_type} layer {block.layer}: {errors}"


# ------------------------------------------------------------------ the form column, refused types


def test_scores_carry_the_form_of_their_blocks(tmp_path):
    for mt, form in (("qwen3", "qk_norm_gain_folded"), ("qwen2", "bilinear")):
        info, stream = model_blocks(open_checkpoint(str(build_tiny(mt, tmp_path / mt))))
        df = to_frame(score_table(((info, b) for b in stream), progress=False))
        assert df["form"].tolist() == [form] * len(df) and len(df) == 2 * (1 + 4)
        title = layer_table(df).splitlines()[0]  # what `wqk score` prints: the form is said where it is not plain
        assert ("form: qk_norm_gain_folded" in title) == (form != "bilinear") and "[decoder]" in title


def test_the_form_survives_the_matrices_file(tmp_path):
    folder = build_tiny("qwen3", tmp_path / "qwen3")
    matrices, a, b = tmp_path / "m.parquet", tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main(["extract", str(folder), "--out", str(matrices)]) == 0
    assert main(["score", str(matrices), "--out", str(a), "--quiet"]) == 0
    assert main(["score", str(folder), "--out", str(b), "--quiet"]) == 0
    from_matrices, direct = pd.read_parquet(a), pd.read_parquet(b)
    pd.testing.assert_frame_equal(from_matrices, direct)
    assert set(direct["form"]) == {"qk_norm_gain_folded"}


def test_the_authors_method_keeps_the_form(tmp_path):
    blocks = list(open_authors(open_checkpoint(str(build_tiny("qwen3", tmp_path / "qwen3"))))[1])
    assert [b.heads for b in blocks] == [(0, 2, 1, 3)] * 2  # grouped-query heads regrouped by the authors
    assert {b.form for b in blocks} == {"qk_norm_gain_folded"}


@pytest.mark.parametrize("model_type", ["deepseek_v2", "deepseek_v3"])
def test_multi_head_latent_attention_is_refused(model_type, tmp_path, capsys):
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(f'{{"model_type": "{model_type}", "architectures": ["X"]}}')
    from safetensors.torch import save_file

    save_file({"model.layers.0.self_attn.q_a_proj.weight": torch.zeros(4, 4)}, str(folder / "model.safetensors"))
    capsys.readouterr()
    assert main(["score", str(folder), "--out", str(tmp_path / "s.parquet"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"model_type {model_type!r}" in err and "not scored" in err and "latent attention" in err
