"""Tests generated from the records (wqk.adapters.records()), one set per registered
model_type, parametrised at collection time: a record registered in a new module is covered
with no edit here. The tiny model is the record's own Tiny, with every bias drawn at random
and every 1-d weight (norm gains) drawn around 1, saved and reopened; it is built once per
module (`built`). From the record alone:

- logits: the model's own pre-softmax scores equal scale * x Q_h K_kv(h)^T y at every call of
  each block's attention module (adapter_check; float64, biases zeroed, rotary at position 0),
  the module being the parent of the one whose weight the record names;
- biases: q_bias / k_bias equal the saved bias tensors the record's templates name, sliced
  per head HERE (separate, [q | k | v] blocks, per-head, grouped and [k | v] layouts);
- gains: q_gain / k_gain equal the named norm weight (+ gain_offset) where the record's
  pre_norm holds, None where it does not;
- rope: each block's frequencies are one of the model's own rotary module's, and with real
  positions the captured scores equal scale * x_i Q_h R(j - i) K_kv(h)^T x_j.

A model that needs other inputs than input_ids gets one entry in INPUTS. Records whose scores
are not a bilinear form of the token vectors are named in NOT_BILINEAR with the test that
checks them instead. A made-up record defined inside a test gets q/k, biases, gains, rope,
the authors' method and a tiny model from its record alone.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from adapter_check import capture_many, compare, default_key_input, default_query_input, load_for_check, rotated_scores
from wqk.adapters import get_record, model_blocks, records, register, supported_model_types, unregister
from wqk.adapters.reader import Site, locate
from wqk.authors import open_authors
from wqk.blocks import AttentionBlock
from wqk.checkpoints import Checkpoint, open_checkpoint
from wqk.tiny import build_tiny, tiny_model

B, T = 2, 9
F64 = torch.float64
MODEL_TYPES = [r.model_type for r in records()]


def _ids(model, n: int = T, seed: int = 1) -> torch.Tensor:
    config = model.config
    sub = getattr(config, "text_config", None) or getattr(config, "text_encoder", None)
    vocab = getattr(config, "vocab_size", None) or sub.vocab_size
    return torch.randint(3, min(vocab, 99), (B, n), generator=torch.Generator().manual_seed(seed))


def _pixels(model, size: int | None = None) -> torch.Tensor:
    config = getattr(model.config, "vision_config", None) or model.config
    size = size or config.image_size
    size = size[0] if isinstance(size, (list, tuple)) else size
    channels = getattr(config, "num_channels", 3)
    return torch.randn(B, channels, size, size, generator=torch.Generator().manual_seed(2), dtype=F64)


def _wave(model) -> dict:
    return dict(input_values=torch.randn(B, 800, generator=torch.Generator().manual_seed(3), dtype=F64))


def _image(model) -> dict:
    return dict(pixel_values=_pixels(model))


def _image_text(model) -> dict:
    return dict(input_ids=_ids(model), pixel_values=_pixels(model))


# model_type -> the forward kwargs of its tiny model, where input_ids (and decoder_input_ids for
# encoder-decoder configs) are not enough
INPUTS: dict[str, Callable[[torch.nn.Module], dict]] = {
    **dict.fromkeys(["beit", "data2vec-vision", "deit", "dinov2", "vit", "vit_mae", "swin", "swinv2"], _image),
    **dict.fromkeys(["data2vec-audio", "hubert", "unispeech", "unispeech-sat", "wav2vec2", "wavlm"], _wave),
    **dict.fromkeys(["clip", "git", "siglip"], _image_text),
    "detr": lambda m: dict(pixel_values=_pixels(m, 64)),
    "mask2former": lambda m: dict(pixel_values=_pixels(m, 64)),
    "sam": lambda m: dict(pixel_values=_pixels(m, 64), input_points=torch.rand(B, 1, 2, 2, dtype=F64) * 64),
    "speech_to_text": lambda m: dict(
        input_features=torch.randn(B, 40, m.config.input_feat_per_channel * m.config.input_channels, dtype=F64),
        decoder_input_ids=_ids(m, 5),
    ),
    "whisper": lambda m: dict(
        input_features=torch.randn(B, m.config.num_mel_bins, 2 * m.config.max_source_positions, dtype=F64),
        decoder_input_ids=_ids(m, 5),
    ),
    "speecht5": lambda m: dict(
        input_values=(h := torch.randn(B, T, m.config.hidden_size, dtype=F64)), decoder_input_values=h[:, :5]
    ),
    "musicgen": lambda m: dict(input_ids=_ids(m), decoder_input_ids=torch.randint(0, 16, (B * 2, 5))),
    "musicgen_decoder": lambda m: dict(
        input_ids=torch.randint(0, 16, (B * 2, 5)),
        encoder_hidden_states=torch.randn(B, T, m.config.hidden_size, dtype=F64),
    ),
    "mllama": lambda m: dict(
        input_ids=_ids(m),
        pixel_values=torch.randn(B, 1, 1, 3, 16, 16, dtype=F64),
        aspect_ratio_ids=torch.ones(B, 1, dtype=torch.long),
        aspect_ratio_mask=torch.ones(B, 1, 1, dtype=torch.long),
    ),
}

# model_type -> why its scores are not scale * x Q_h K_h^T y, and the test that checks it instead
NOT_BILINEAR: dict[str, str] = {
    **dict.fromkeys(
        ["qwen3", "gemma3_text", "olmo2"],
        "QK-norm: scores times the norm's per-token scalings are the folded form "
        "(test_records_llama_lineage.py::test_qk_norm_logits_are_the_folded_form_times_the_token_scalings)",
    ),
    "gemma2": "soft-capped scores: uncapped, they are the form "
    "(test_records_llama_lineage.py::test_gemma2_soft_capped_scores_are_a_map_of_the_bilinear_form)",
    **dict.fromkeys(
        ["bloom", "mpt"],
        "ALiBi: the scores are the form plus the model's own position bias "
        "(test_records_hub_popular.py::test_logits_with_biases_gains_rope_and_alibi)",
    ),
    "swinv2": "cosine attention (normalised q, k): test_adapters_paper.py compares the model's split q.k",
}
# model_type -> where its logits are checked by hand: the score scale is no attribute of the module
HAND_WRITTEN: dict[str, str] = {
    "deberta": "scale 1 / sqrt(3 k) (disentangled attention): test_adapters_paper.py",
    "deberta-v2": "scale 1 / sqrt(3 k) (disentangled attention): test_adapters_paper.py",
    "gpt_neo": "no 1 / sqrt(k) scale: test_adapters_paper.py",
}


def _inputs(model, record, positions: bool = False) -> dict:
    if record.model_type in INPUTS:
        kwargs = INPUTS[record.model_type](model)
    else:
        kwargs = dict(input_ids=_ids(model))
        if getattr(model.config, "is_encoder_decoder", False):
            kwargs["decoder_input_ids"] = _ids(model, 5, seed=4)
    if record.rope is not None and "input_ids" in kwargs:
        n = kwargs["input_ids"].shape[1]
        steps = torch.arange(n) if positions else torch.zeros(n, dtype=torch.long)
        kwargs["position_ids"] = steps.expand(B, n)  # zeros: rotary is the identity
    return kwargs


def _randomise_extras(model: torch.nn.Module, seed: int = 0) -> None:
    """Biases drawn at random, 1-d weights (norm gains) around 1: neither 0 nor 1 in the file."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and name.endswith("bias"):  # DeBERTa's q_bias, torch's in_proj_bias too
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif p.ndim == 1 and name.endswith("weight"):
                p.copy_(1 + torch.randn(p.shape, generator=g) * 0.1)


@dataclass
class Built:
    folder: Path
    ckpt: Checkpoint
    sites: list[Site]
    blocks: list[AttentionBlock]
    model: torch.nn.Module


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Callable[[str], Built]:
    """model_type -> its tiny model, saved, reopened and loaded for the checks (once per module)."""
    cache: dict[str, Built] = {}

    def get(model_type: str) -> Built:
        if model_type not in cache:
            folder = tmp_path_factory.mktemp(model_type)
            model = tiny_model(model_type)
            _randomise_extras(model)
            model.save_pretrained(folder, safe_serialization=True)
            if get_record(model_type).tiny.family:  # remote-code types: the record's model_type, as build_tiny
                config = json.loads((folder / "config.json").read_text())
                (folder / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
            ckpt = open_checkpoint(str(folder))
            blocks = list(model_blocks(ckpt)[1])
            cache[model_type] = Built(folder, ckpt, locate(ckpt, get_record(model_type)), blocks, None)
        if cache[model_type].model is None:
            cache[model_type].model = load_for_check(cache[model_type].folder)
        return cache[model_type]

    return get


def _module_of(built: Built, name: str) -> torch.nn.Module:
    """The loaded model's module holding the saved weight `name`: by name (under the base model
    or not), else by value (transformers renames some layouts on load: ViT's query -> q_proj)."""
    model, modules = built.model, dict(built.model.named_modules())
    prefix = model.base_model_prefix + "."
    stem = name.removesuffix(".weight") if name.endswith(".weight") else name.rsplit(".", 1)[0]
    for owner in (stem, stem.removeprefix(prefix), prefix + stem):
        if owner in modules:
            return modules[owner]
    saved = built.ckpt.store.get(name).double()
    for module in modules.values():
        w = getattr(module, "weight", None)
        if isinstance(w, torch.nn.Parameter) and w.shape == saved.shape and torch.equal(w.detach(), saved):
            return module
    raise AssertionError(f"{built.ckpt.model_type}: no module of the loaded model holds {name}")


def _parent(model: torch.nn.Module, module: torch.nn.Module) -> torch.nn.Module:
    name = next(n for n, m in model.named_modules() if m is module)
    return model.get_submodule(name.rsplit(".", 1)[0])


@dataclass
class Hooked:
    block: AttentionBlock
    q_input: torch.nn.Module  # the module reading the queries' input (a q or fused q/k/v projection)
    k_input: torch.nn.Module
    attention: torch.nn.Module  # the module whose softmax sees the scores: the projection's parent


def _hooked(built: Built) -> list[Hooked]:
    out = []
    for site, block in zip(built.sites, built.blocks, strict=True):
        a = site.attention
        q_name, k_name = (site.name(a.weight, p if "{p}" in a.weight else None) for p in a.qk)
        q_mod = _module_of(built, q_name)
        if isinstance(q_mod, torch.nn.MultiheadAttention):
            continue  # torch's fused attention (Mask2Former cross): test_adapters_paper, test_mask2former_cross_in_proj
        k_mod = q_mod if k_name == q_name else _module_of(built, k_name)
        out.append(Hooked(block, q_mod, k_mod, _parent(built.model, q_mod)))
    return out


def _observe(model: torch.nn.Module, hooked: list[Hooked], kwargs: dict) -> list[list[tuple]]:
    """Per block, every call of its attention module: (x, y, scores [n, H, Tq, Tk], module)."""
    inputs: dict[int, list[torch.Tensor]] = {}

    def record(module, args, kw):
        x = args[0] if args else next(v for k, v in kw.items() if k in ("hidden_states", "input", "query"))
        inputs.setdefault(id(module), []).append(x.detach().clone())

    mods = {id(m): m for h in hooked for m in (h.q_input, h.k_input)}
    handles = [m.register_forward_pre_hook(record, with_kwargs=True) for m in mods.values()]
    try:
        with capture_many([h.attention for h in hooked]) as calls:
            model(**kwargs)
    finally:
        for handle in handles:
            handle.remove()
    seen: dict[int, int] = {}
    out = []
    for h, per_module in zip(hooked, calls):
        assert per_module, f"{type(h.attention).__name__} of {h.block.stack} {h.block.layer} was never called"
        rows = []
        for call in per_module:
            n = seen.get(id(h.attention), 0)  # ALBERT: one shared module, called once per layer
            seen[id(h.attention)] = n + 1
            if id(h.q_input) in inputs:
                x, y = inputs[id(h.q_input)][n].double(), inputs[id(h.k_input)][n].double()
            else:  # projections applied by weight, not called (WavLM): the attention module's inputs
                x, y = default_query_input(call).double(), default_key_input(call).double()
            (s,) = [t for t in call.softmax_inputs if t.ndim in (3, 4)][:1] or [None]
            assert s is not None, f"{type(h.attention).__name__}: no softmax captured"
            tq, tk = s.shape[-2:]
            x, y = x.reshape(-1, tq, x.shape[-1]), y.reshape(-1, tk, y.shape[-1])
            rows.append((x, y, s.double().reshape(x.shape[0], h.block.n_heads, tq, tk), call.module))
        out.append(rows)
    return out


def _scale(module: torch.nn.Module, block: AttentionBlock) -> float:
    return getattr(module, "scaling", block.q.shape[2] ** -0.5)


def check_record_logits(folder: Path) -> dict[str, int]:
    """Blocks of the folder's record vs the logits of the model loaded from it; layers per stack."""
    ckpt = open_checkpoint(str(folder))
    record = get_record(ckpt.model_type)
    b = Built(folder, ckpt, locate(ckpt, record), list(model_blocks(ckpt)[1]), load_for_check(folder))
    _check_logits(b, record)
    counts: dict[str, int] = {}
    for block in b.blocks:
        counts[block.stack] = counts.get(block.stack, 0) + 1
    return counts


def _check_logits(b: Built, record) -> None:
    hooked = _hooked(b)
    for h, rows in zip(hooked, _observe(b.model, hooked, _inputs(b.model, record))):
        for x, y, got, module in rows:
            compare(h.block, x, y, got, _scale(module, h.block), rtol=1e-6)  # GPT-J scores in float32


def test_records_are_read_without_torch():
    code = "import sys, wqk.adapters as a; a.records(); print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_every_record_declares_objectives_and_a_tiny_model():
    assert [r.model_type for r in records()] == supported_model_types()
    for r in records():
        assert r.objectives and r.tiny is not None, r.model_type


# ----------------------------------------------------------------------------------- logits


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_record_logits_match_the_model(model_type, built):
    if model_type in NOT_BILINEAR or model_type in HAND_WRITTEN:
        pytest.skip(NOT_BILINEAR.get(model_type) or HAND_WRITTEN[model_type])
    b = built(model_type)
    record = get_record(model_type)
    assert b.blocks and {x.stack for x in b.blocks} - {"cross"} <= set(record.objectives)
    assert [(x.stack, x.layer) for x in b.blocks] == [(s.stack, s.layer) for s in b.sites]
    _check_logits(b, record)


# ----------------------------------------------------------------------------------- biases


def _by_hand(bias: torch.Tensor, fused: str | None, h: int, h_kv: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The q and k parts of a saved fused bias, [h, k] and [h_kv, k]."""
    if fused == "blocks":
        return bias[: h * k].reshape(h, k), bias[h * k : (h + h_kv) * k].reshape(h_kv, k)
    if fused == "per_head":
        w = bias.reshape(h, 3, k)
        return w[:, 0], w[:, 1]
    if fused == "grouped":
        w = bias.reshape(h_kv, h // h_kv + 2, k)
        return w[:, :-2].reshape(h, k), w[:, -2]
    raise AssertionError(f"no fused layout {fused!r}")


def _expected_biases(ckpt: Checkpoint, site: Site, block: AttentionBlock) -> tuple:
    a, store = site.attention, ckpt.store
    h, h_kv, k = block.n_heads, block.n_kv_heads, block.q.shape[2]

    def saved(template: str | None, p: str | None = None) -> torch.Tensor | None:
        name = site.name(template, p) if template else None
        return store.get(name) if name and name in store else None

    if a.fused in ("blocks", "per_head", "grouped"):
        fused = saved(a.bias_template)
        bq, bk = _by_hand(fused, a.fused, h, h_kv, k) if fused is not None else (None, None)
    else:
        bq, bk = (saved(a.bias_template, p) for p in a.qk)
        bq = bq.reshape(h, k) if bq is not None else None
        if bk is not None:
            bk = (bk[: h_kv * k] if a.fused == "kv" else bk).reshape(h_kv, k)  # kv: [k | v]
    if a.q_bias:
        bq = saved(a.q_bias)
        bq = bq.reshape(h, k) if bq is not None else None
    return bq, bk


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_record_biases_are_the_saved_tensors(model_type, built):
    b = built(model_type)
    for site, block in zip(b.sites, b.blocks):
        want_q, want_k = _expected_biases(b.ckpt, site, block)
        for what, want in (("q_bias", want_q), ("k_bias", want_k)):
            got, where = getattr(block, what), f"{model_type} {block.stack} {block.layer} {what}"
            assert (got is None) == (want is None), f"{where}: {got is None=} but the saved tensor is {want is None=}"
            if want is not None:
                assert torch.equal(got, want) and want.abs().sum() > 0, where


# ------------------------------------------------------------------------------------ gains


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_record_gains_are_the_saved_norm_weights(model_type, built):
    b = built(model_type)
    store = b.ckpt.store
    for site, block in zip(b.sites, b.blocks):
        a, where = site.attention, f"{model_type} {block.stack} {block.layer}"
        pre_norm = bool(b.ckpt.config.get(a.pre_norm)) if isinstance(a.pre_norm, str) else a.pre_norm
        norm = a.first_norm if a.first_norm and block.layer == 0 else a.norm
        name = site.name(norm) if pre_norm and norm else None
        if name is None or name not in store:
            assert block.q_gain is None and block.k_gain is None, f"{where}: a gain without a pre-norm"
            continue
        want = store.get(name) + a.gain_offset if a.gain_offset else store.get(name)
        assert torch.equal(block.q_gain, want) and not torch.equal(want, torch.ones_like(want)), where
        if block.stack != "cross":
            assert block.k_gain is block.q_gain, f"{where}: self-attention, one norm feeds q and k"
        elif block.k_gain is not None:
            assert a.k_norm and torch.equal(block.k_gain, store.get(site.name(a.k_norm)) + a.gain_offset), where


# ------------------------------------------------------------------------------------- rope


def _rotary_frequencies(model: torch.nn.Module) -> list[torch.Tensor]:
    """Every inv_freq the model's rotary modules hold (GPT-J's: from its sin table, sin(1 * f))."""
    out = []
    for module in model.modules():
        for name, buf in module.named_buffers(recurse=False):
            if name.endswith("inv_freq") and "original" not in name:
                out.append(buf.double())
            elif name == "embed_positions" and "Rotary" in type(module).__name__:
                out.append(torch.asin(buf[1, : buf.shape[1] // 2].double()))
    return out


ROPE_TYPES = [r.model_type for r in records() if r.rope is not None]


@pytest.mark.parametrize("model_type", ROPE_TYPES)
def test_record_rope_is_the_models_own(model_type, built):
    b = built(model_type)
    own = _rotary_frequencies(b.model)
    rotated = [x for x in b.blocks if x.rope is not None]
    assert own and rotated and {x.stack for x in rotated} == {get_record(model_type).rope.stack}
    for block in rotated:
        mine = torch.tensor(block.rope.inv_freq, dtype=F64)
        assert any(f.shape == mine.shape and torch.allclose(f, mine, rtol=1e-6) for f in own), block.layer
        assert block.rope.layout == get_record(model_type).rope.layout


@pytest.mark.parametrize("model_type", ROPE_TYPES)
def test_record_rope_logits_at_real_positions(model_type, built):
    if model_type in NOT_BILINEAR:
        pytest.skip(NOT_BILINEAR[model_type])
    b = built(model_type)
    hooked = [h for h in _hooked(b) if h.block.rope is not None]
    observed = _observe(b.model, hooked, _inputs(b.model, get_record(model_type), positions=True))
    for h, ((x, y, got, module), *_) in zip(hooked, observed):
        block = h.block
        q = torch.einsum("btd,hdk->bhtk", x, block.q.double())
        k = torch.einsum("btd,hdk->bhtk", y, block.k_per_query_head().double())
        scale = _scale(module, block)
        open_ = torch.isfinite(got) & (got > -1e4)
        want, plain = scale * rotated_scores(q, k, block.rope), scale * q @ k.transpose(-1, -2)
        size = want[open_].abs().max()
        assert (got - want)[open_].abs().max() < 1e-6 * size, f"{model_type} layer {block.layer}"
        assert (got - plain)[open_].abs().max() > 1e-3 * size, "positions 0 only: the rope went untested"


# ----------------------------------------------------------------------- a record defined here


@pytest.fixture
def made_up_llama():
    """Llama's record, renamed: nothing but this record knows the type."""
    record = dataclasses.replace(get_record("llama"), model_type="made-up-llama")
    record = dataclasses.replace(record, tiny=dataclasses.replace(record.tiny, family="llama"))
    register(record)
    try:
        yield record
    finally:
        unregister("made-up-llama")


def test_a_record_defined_here_is_enough(made_up_llama, tmp_path):
    folder = build_tiny("made-up-llama", tmp_path / "m", attention_bias=True)
    ckpt = open_checkpoint(str(folder))
    assert ckpt.model_type == "made-up-llama"
    assert check_record_logits(folder) == {"decoder": 2}
    blocks = list(model_blocks(ckpt)[1])
    for b in blocks:  # the extras are the saved tensors
        base = f"model.layers.{b.layer}."
        assert torch.equal(b.q_bias.flatten(), ckpt.store.get(base + "self_attn.q_proj.bias"))
        assert torch.equal(b.k_bias.flatten(), ckpt.store.get(base + "self_attn.k_proj.bias"))
        assert torch.equal(b.q_gain, ckpt.store.get(base + "input_layernorm.weight")) and b.k_gain is b.q_gain
        assert b.rope is not None and b.rope.layout == "half" and b.rope.rotary_dim == b.q.shape[2]
    authors = list(open_authors(ckpt)[1])  # grouped-query key heads tiled: query heads regrouped
    assert [a.heads for a in authors] == [(0, 2, 4, 6, 1, 3, 5, 7)] * 2
    assert "made-up-llama" in supported_model_types()
