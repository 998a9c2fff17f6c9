"""The records of the hub's popular architectures (opt, bloom, mpt, falcon, gpt_bigcode,
electra, clip, siglip, marian, m2m_100), checked against each model's own forward pass.

Unlike the bias-free check of tests/test_records.py, the tiny model keeps random q/k biases
and random norm gains and biases, runs at real positions, and its logits are compared
with everything the blocks carry:

    S[b, h, i, j] = scale * rot_{j-i}(x_i Q_h + b_q,h, y_j K_kv(h) + b_k,kv(h)) + A[h, i, j]

(rot: the block's rope, the identity without one; A: the ALiBi bias the model adds, taken
from its own call: it is not part of the form). The gains are checked on the captured
inputs: where a block carries q_gain (k_gain), (x - beta) / gain is the standardised vector
of a LayerNorm (mean 0, variance 1 per token), beta the norm's saved bias.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from adapter_check import capture_many, default_key_input, default_query_input
from wqk.adapters import get_record, model_blocks
from wqk.adapters.reader import locate
from wqk.blocks import AttentionBlock, Rope
from wqk.checkpoints import open_checkpoint
from wqk.cli import main
from wqk.errors import UnsupportedModelType
from wqk.tiny import tiny_model

F64 = torch.float64
B, T, T_DEC = 2, 9, 7


def _ids(model, n=T):
    vocab = getattr(model.config, "vocab_size", None) or model.config.text_config.vocab_size
    return torch.randint(3, vocab, (B, n), generator=torch.Generator().manual_seed(1))


def _text(model):
    return dict(input_ids=_ids(model))


def _seq2seq(model):
    return dict(input_ids=_ids(model), decoder_input_ids=_ids(model, T_DEC))


def _image_text(model):
    pixels = torch.randn(B, 3, 32, 32, generator=torch.Generator().manual_seed(2), dtype=F64)
    return dict(input_ids=_ids(model), pixel_values=pixels)


def _bloom_alibi(call):  # BloomAttention adds alibi [B*H, 1, Tk] (beta 1) to the scaled product
    return call.kwargs["alibi"].reshape(B, -1, 1, call.kwargs["alibi"].shape[-1])


def _falcon_alibi(call):
    """FalconAttention (eager): (q k^T + alibi) / sqrt(k) + attention_mask, and FalconModel has
    put alibi / sqrt(k) into that mask as well: both terms are the model's, not the form's."""
    alibi = call.kwargs["alibi"]
    alibi = alibi.reshape(B, -1, 1, alibi.shape[-1]) * call.module.inv_norm_factor
    return alibi + call.kwargs["attention_mask"].clamp(min=-1e5)


def _mpt_alibi(call):  # MptAttention: the last Tk columns of position_bias [H, 1, max_seq_len]
    bias = call.kwargs["position_bias"]
    tk = default_key_input(call).shape[1]
    return bias[None, :, :, bias.shape[-1] - tk :]


@dataclasses.dataclass
class Case:
    id: str
    model_type: str
    inputs: Callable = _text
    over: dict = dataclasses.field(default_factory=dict)
    alibi: Callable | None = None
    layers: dict = dataclasses.field(default_factory=dict)  # stack -> layers expected
    gains: bool = True  # pre-norm: every block carries q_gain
    biases: bool = True  # q/k projections with biases
    architecture: str | None = None  # another transformers class than the record's Tiny


CASES = [
    Case("opt", "opt", layers={"decoder": 2}),
    Case("opt-350m-post-norm", "opt", over=dict(do_layer_norm_before=False), layers={"decoder": 2}, gains=False),
    Case("bloom", "bloom", alibi=_bloom_alibi, layers={"decoder": 2}),
    Case("mpt", "mpt", alibi=_mpt_alibi, layers={"decoder": 2}, biases=False),
    Case("falcon-40b-grouped", "falcon", layers={"decoder": 2}, biases=False),
    Case(
        "falcon-11b-grouped-one-norm-biases",  # biases: not in the hub's Falcons, but in the config
        "falcon",
        over=dict(num_ln_in_parallel_attn=1, bias=True),
        layers={"decoder": 2},
    ),
    Case(
        "falcon-7b-multi-query",
        "falcon",
        over=dict(new_decoder_architecture=False, multi_query=True, parallel_attn=True),
        layers={"decoder": 2},
        biases=False,
    ),
    Case(
        "falcon-rw-alibi-per-head",
        "falcon",
        over=dict(
            new_decoder_architecture=False,
            multi_query=False,
            parallel_attn=False,
            alibi=True,
            bias=True,
            num_kv_heads=4,
        ),
        alibi=_falcon_alibi,
        layers={"decoder": 2},
    ),
    Case("gpt_bigcode-multi-query", "gpt_bigcode", layers={"decoder": 2}),
    Case("gpt_bigcode-multi-head", "gpt_bigcode", over=dict(multi_query=False), layers={"decoder": 2}),
    Case("electra", "electra", layers={"encoder": 2}, gains=False),
    Case(
        "electra-causal",
        "electra",
        over=dict(is_decoder=True),
        layers={"decoder": 2},
        gains=False,
        architecture="ElectraForCausalLM",
    ),
    Case("marian", "marian", _seq2seq, layers={"encoder": 2, "decoder": 3, "cross": 3}, gains=False),
    Case("m2m_100", "m2m_100", _seq2seq, layers={"encoder": 2, "decoder": 3, "cross": 3}),
    Case("clip", "clip", _image_text, layers={"encoder": 3, "decoder": 2}),
    Case("siglip", "siglip", _image_text, layers={"encoder": 3, "decoder": 2}),
]


BY_ID = {c.id: c for c in CASES}


def _build(case: Case, folder: Path) -> Path:
    """The record's tiny model with random biases and norm gains (initialised to 0 and 1), saved."""
    model = tiny_model(case.model_type, architecture=case.architecture, **case.over)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and ("bias" in name.rsplit(".", 1)[-1] or "norm" in name or ".ln_" in name):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if name.endswith("weight") else 0.0))
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def _load(folder: Path) -> torch.nn.Module:
    import transformers

    cfg = json.loads((folder / "config.json").read_text())
    model = getattr(transformers, cfg["architectures"][0]).from_pretrained(folder, attn_implementation="eager")
    return model.eval().to(F64)


def _attention_modules(model, sites) -> list[torch.nn.Module]:
    """The attention module of each site: the parent of its q (or fused q/k/v) projection."""
    modules = []
    for site in sites:
        a = site.attention
        weight = site.name(a.weight, a.qk[0] if "{p}" in a.weight else None).removesuffix(".weight")
        inner = weight.removeprefix(model.base_model_prefix + ".")
        root = model.base_model if inner != weight else model
        modules.append(root.get_submodule(inner.rsplit(".", 1)[0]))
    return modules


def _rotate(q: torch.Tensor, k: torch.Tensor, rope: Rope | None) -> torch.Tensor:
    """sum_d q_i R(j - i) k_j over [B, H, T, k] heads (plain q k^T without rope)."""
    if rope is None:
        return q @ k.transpose(-1, -2)
    n = len(rope.inv_freq)
    a = torch.arange(n) if rope.layout == "half" else 2 * torch.arange(n)
    b = a + n if rope.layout == "half" else a + 1
    rest = torch.arange(2 * n, q.shape[-1])
    offset = (torch.arange(k.shape[2])[None, :] - torch.arange(q.shape[2])[:, None]).to(F64)
    angle = offset[..., None] * torch.tensor(rope.inv_freq, dtype=F64)
    c, s = angle.cos(), angle.sin()
    qa, qb = q[..., a][:, :, :, None], q[..., b][:, :, :, None]
    ka, kb = k[..., a][:, :, None], k[..., b][:, :, None]
    return (qa * (c * ka - s * kb) + qb * (s * ka + c * kb)).sum(-1) + q[..., rest] @ k[..., rest].transpose(-1, -2)


def expected_logits(block: AttentionBlock, x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
    q = torch.einsum("btd,hdk->bhtk", x.to(F64), block.q.to(F64))
    k = torch.einsum("btd,hdk->bhtk", y.to(F64), block.k_per_query_head().to(F64))
    if block.q_bias is not None:
        q = q + block.q_bias.to(F64)[None, :, None]
    if block.k_bias is not None:
        k = k + block.k_bias.repeat_interleave(block.group_size, 0).to(F64)[None, :, None]
    return scale * _rotate(q, k, block.rope)


def _logits_of(call, shape) -> torch.Tensor:
    found = [s for s in call.softmax_inputs if s.numel() == math.prod(shape)]
    assert len(found) == 1, (
        f"{type(call.module).__name__}: softmax inputs {[tuple(s.shape) for s in call.softmax_inputs]}"
    )
    return found[0].reshape(shape).to(F64), found[0].dtype


def _is_layer_norm_output(v: torch.Tensor, gain: torch.Tensor, beta: torch.Tensor | None) -> bool:
    """(v - beta) / gain is what a LayerNorm standardises: mean 0 per token (exactly) and
    variance s / (s + eps) <= 1 (eps 1e-5 against the tiny models' small activations)."""
    z = (v.to(F64) - (beta.to(F64) if beta is not None else 0.0)) / gain.to(F64)
    var = z.var(-1, unbiased=False)
    return bool(z.mean(-1).abs().max() < 1e-9 and (var < 1 + 1e-9).all() and (var > 0.9).all())


def _norm_bias(ckpt, site, template: str) -> torch.Tensor | None:
    name = site.name(template).removesuffix("weight") + "bias"
    return ckpt.store.get(name) if name in ckpt.store else None


def check_case(case: Case, folder: Path) -> dict:
    """Every block against the model's logits; returns the worst relative error and the blocks."""
    ckpt = open_checkpoint(str(folder))
    sites = locate(ckpt, get_record(ckpt.model_type))
    found = list(model_blocks(ckpt)[1])
    counts: dict[str, int] = {}
    for b in found:
        counts[b.stack] = counts.get(b.stack, 0) + 1
    assert counts == case.layers
    model = _load(folder)
    modules = _attention_modules(model, sites)
    kwargs = case.inputs(model)
    with capture_many(modules) as calls:
        model(**kwargs)
    worst = 0.0
    for site, block, per_module in zip(sites, found, calls, strict=True):
        assert per_module, f"{block.stack} layer {block.layer}: {type(modules[0]).__name__} never called"
        for call in per_module:
            x, y = default_query_input(call), default_key_input(call)
            got, captured = _logits_of(call, (x.shape[0], block.n_heads, x.shape[1], y.shape[1]))
            # float64 throughout, else float32 rotary cos/sin (Falcon) or a float32 softmax input (MPT)
            tol = 1e-9 if captured == F64 and block.rope is None else 1e-6
            scale = getattr(call.module, "scaling", block.q.shape[2] ** -0.5)
            want = expected_logits(block, x, y, scale)
            if case.alibi is not None:
                want = want + case.alibi(call).to(F64)
            open_ = torch.isfinite(got) & (got > -1e4)
            assert open_.double().mean() > 1 / 3
            diff = torch.where(open_, (got - want).abs(), 0).amax()
            err = float(diff / torch.where(open_, want.abs(), 0).amax())
            assert err < tol, f"{case.id}: {block.stack} layer {block.layer}: relative error {err:.2e}"
            worst = max(worst, err)
            if case.gains and block.stack != "cross":
                assert block.q_gain is not None and block.k_gain is block.q_gain
            if block.q_gain is not None:
                norm = (
                    site.attention.first_norm if site.attention.first_norm and site.layer == 0 else site.attention.norm
                )
                assert _is_layer_norm_output(x, block.q_gain, _norm_bias(ckpt, site, norm))
            if block.stack == "cross" and block.k_gain is not None:
                assert _is_layer_norm_output(y, block.k_gain, _norm_bias(ckpt, site, site.attention.k_norm))
    return dict(worst=worst, blocks=found)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_logits_with_biases_gains_rope_and_alibi(case, tmp_path):
    result = check_case(case, _build(case, tmp_path / case.id))
    blocks = result["blocks"]
    if case.gains:
        assert all(b.q_gain is not None for b in blocks)
    else:
        assert all(b.q_gain is None for b in blocks if b.stack != "cross")
    assert all((b.q_bias is not None and b.k_bias is not None) == case.biases for b in blocks)
    rotary = case.model_type == "falcon" and not case.over.get("alibi")
    assert all((b.rope is not None) == rotary for b in blocks)
    if rotary:
        assert blocks[0].rope.layout == "half" and blocks[0].rope.rotary_dim == blocks[0].q.shape[2]


def test_falcon_and_gpt_bigcode_key_heads(tmp_path):
    """Multi-query: one key head; Falcon's new architecture: num_kv_heads groups."""
    expected = {
        "falcon-40b-grouped": 2,
        "falcon-7b-multi-query": 1,
        "falcon-rw-alibi-per-head": 4,
        "gpt_bigcode-multi-query": 1,
        "gpt_bigcode-multi-head": 4,
    }
    for case, kv in ((BY_ID[i], kv) for i, kv in expected.items()):
        (b, *_) = model_blocks(open_checkpoint(str(_build(case, tmp_path / case.id))))[1]
        assert (b.n_heads, b.n_kv_heads) == (4, kv), case.id


def test_a_wrong_layout_fails_the_check(tmp_path):
    """The check can fail: Falcon's grouped weight read as [q | k | v] blocks does not fit."""
    case = BY_ID["falcon-40b-grouped"]
    folder = _build(case, tmp_path / "f")
    record = get_record("falcon")
    wrong = dataclasses.replace(
        record, attention=tuple(dataclasses.replace(a, fused="blocks") for a in record.attention)
    )
    from wqk.adapters import register, unregister

    unregister("falcon")
    register(wrong)
    try:
        with pytest.raises(AssertionError, match="relative error"):
            check_case(case, folder)
    finally:
        unregister("falcon")
        register(record)


def _mpt_with(tmp_path, **attn_config) -> Path:
    folder = _build(BY_ID["mpt"], tmp_path / "mpt")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["attn_config"] = {**cfg["attn_config"], **attn_config}
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize(
    "attn_config, reason", [(dict(qk_ln=True), "qk_ln"), (dict(attn_type="grouped_query_attention"), "attn_type")]
)
def test_mpt_variants_not_read_are_refused(attn_config, reason, tmp_path, capsys):
    folder = _mpt_with(tmp_path, **attn_config)
    with pytest.raises(UnsupportedModelType, match=reason):
        list(model_blocks(open_checkpoint(str(folder)))[1])
    assert main(["score", str(folder), "--out", str(tmp_path / "s.parquet"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err
    assert not (tmp_path / "s.parquet").exists()
