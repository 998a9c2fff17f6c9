"""Adapters for the paper's inventory beyond the core families: every adapter is checked on a
tiny random model built from its transformers config class (no download), saved with
save_pretrained (safetensors) and reopened with wqk.checkpoints.open_checkpoint.

The check (adapter_check.compare, as in tests/test_adapters_core.py) compares the model's
OWN pre-softmax logits with x_i^T Q_h K_kv(h)^T x_j * scale: x is captured with forward
pre-hooks on the module(s) that read the q/k inputs, the logits by wrapping softmax (or,
for Swin v2's cosine attention, F.normalize, which receives the model's already split
per-head q and k). Biases, relative-position tables and rotary
(position_ids = 0) are neutralised; masked entries (< -1e3) are not compared.
Regression tests named after the authors' mistakes show the wrong extraction disagrees
with the model while ours agrees.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import transformers as tf

sys.path.insert(0, str(Path(__file__).parent))
from adapter_check import adapter_blocks, compare
from tiny_zoo import tiny_config
from wqk.adapters import stack_objectives, supported_model_types
from wqk.adapters.common import linear_heads
from wqk.blocks import AttentionBlock
from wqk.checkpoints import open_checkpoint
from wqk.contracts import OBJECTIVES
from wqk.tiny import build_tiny, tiny_types

F = torch.nn.functional

_ZERO = re.compile(
    r"(bias|relative_position_bias_table|relative_attention_bias\.weight|rel_embeddings\.weight|rel_attn_embed\.weight|rel_pos_[hw]|pe_k\.weight)$"
)
_QK = re.compile(r"(query|key|q_proj|k_proj|qkv_proj|Wqkv|in_proj|c_attn|qkv|\.q|\.k|in_proj_weight)(\.weight)?$")


@dataclass
class Case:
    model_type: str
    build: Callable[[], torch.nn.Module]
    run: Callable[[torch.nn.Module], None]  # one forward pass (or several) under capture
    modules: Callable[[str, int], tuple[str, str]]  # (stack, layer) -> q-input module, k-input module
    layers: dict[str, int]  # stack -> layers expected from the weights
    scale: Callable[[str, int], float] = lambda stack, k: 1 / math.sqrt(k)
    mode: str = "softmax"  # or "normalize" (cosine attention: compare the model's split q.k)
    config_edit: dict = field(default_factory=dict)  # written into config.json after saving


def _neutralise(model: torch.nn.Module) -> None:
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if _ZERO.search(name) and "norm" not in name.lower().rsplit(".", 2)[0].rsplit(".", 1)[-1]:
                p.zero_()
            elif p.ndim == 2 and _QK.search(name):
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(min(p.shape)))


@contextmanager
def _capture(model: torch.nn.Module, module_names: set[str]):
    events: list[tuple[str, object]] = []
    busy = [False]

    def wrap(orig, kind):
        def f(x, *a, **kw):
            if not busy[0]:
                events.append((kind, x.detach().clone()))
            busy[0] = True
            try:
                return orig(x, *a, **kw)
            finally:
                busy[0] = False

        return f

    saved = (F.softmax, torch.softmax, torch.Tensor.softmax, F.normalize)
    F.softmax, torch.softmax = wrap(saved[0], "logits"), wrap(saved[1], "logits")
    torch.Tensor.softmax = wrap(saved[2], "logits")
    F.normalize = wrap(saved[3], "norm")
    mods = dict(model.named_modules())
    handles = []
    for name in module_names:

        def hook(mod, args, kwargs, name=name):
            x = args[0] if args else next(v for k, v in kwargs.items() if k in ("hidden_states", "query", "input"))
            events.append((name, x.detach().clone()))

        handles.append(mods[name].register_forward_pre_hook(hook, with_kwargs=True))
    try:
        yield events
    finally:
        F.softmax, torch.softmax, torch.Tensor.softmax, F.normalize = saved
        for h in handles:
            h.remove()


@dataclass
class Observed:
    xq: torch.Tensor  # [n, Lq, d_q]
    xk: torch.Tensor  # [n, Lk, d_k]
    logits: torch.Tensor  # the model's own, float64, in the shape [n, H, Lq, Lk]
    scale: float

    def check(self, block: AttentionBlock, rtol: float = 1e-4) -> float:
        return compare(block, self.xq, self.xk, self.logits, self.scale, rtol=rtol, masked_below=-1e3)


def run_case(case: Case, tmp_path):
    torch.manual_seed(0)
    model = case.build().eval()
    _neutralise(model)
    model.save_pretrained(tmp_path, safe_serialization=True)
    if case.config_edit:
        cfg_path = tmp_path / "config.json"
        cfg_path.write_text(json.dumps({**json.loads(cfg_path.read_text()), **case.config_edit}))
    ckpt = open_checkpoint(str(tmp_path))
    found = list(adapter_blocks(ckpt))
    counts: dict[str, int] = {}
    for b in found:
        counts[b.stack] = counts.get(b.stack, 0) + 1
    assert counts == case.layers, f"{case.model_type}: stacks/layers {counts} != {case.layers}"

    wanted = {m for b in found for m in (case.modules(b.stack, b.layer) or ())}
    with torch.no_grad(), _capture(model, wanted) as events:
        case.run(model)
    observed = {}
    for b in found:
        if not case.modules(b.stack, b.layer):
            continue  # no hookable module for this stack (see the case)
        qn, kn = case.modules(b.stack, b.layer)
        iq = next(i for i, e in enumerate(events) if e[0] == qn)
        ik = next(i for i, e in enumerate(events) if e[0] == kn)
        start = max(iq, ik)
        head_dim = b.q.shape[2]
        if case.mode == "softmax":
            t = next(e[1] for e in events[start:] if e[0] == "logits")
        else:
            nq, nk = [e[1] for e in events[start:] if e[0] == "norm"][:2]
            t = nq @ nk.transpose(-1, -2)
        lq = t.shape[-2]
        xq = events[iq][1].reshape(-1, lq, events[iq][1].shape[-1])
        xk = events[ik][1].reshape(xq.shape[0], -1, events[ik][1].shape[-1])
        logits = t.double().reshape(xq.shape[0], b.n_heads, lq, t.shape[-1])
        scale = 1.0 if case.mode == "normalize" else case.scale(b.stack, head_dim)
        observed[(b.stack, b.layer)] = Observed(xq, xk, logits, scale)
    return ckpt, found, observed


def assert_matches(found, observed, rel=1e-4):
    for b in found:
        observed[(b.stack, b.layer)].check(b, rel)


def assert_differs(obs: Observed, q, k):
    """A wrong extraction must disagree with the model by more than 10% for some head."""
    with pytest.raises(AssertionError, match="differ"):
        obs.check(AttentionBlock("decoder", 0, q, k), rtol=0.1)


# ---------------------------------------------------------------------------------------- cases

B, L = 2, 7
ids = lambda n=L: torch.randint(3, 99, (B, n), generator=torch.Generator().manual_seed(1))  # noqa: E731
zpos = lambda n=L: torch.zeros(B, n, dtype=torch.long)  # noqa: E731
pix = lambda s=32, c=3: torch.randn(B, c, s, s, generator=torch.Generator().manual_seed(2))  # noqa: E731
wave = lambda n=800: torch.randn(B, n, generator=torch.Generator().manual_seed(3))  # noqa: E731


def _m(cls: str, mt, **extra):
    """A builder of transformers' class cls (by name: resolved when built, so collecting the
    module imports no modeling code)."""
    return lambda: getattr(tf, cls)(
        tf.AutoConfig.for_model(mt, **{**tiny_config(mt), **extra}, attn_implementation="eager")
    )


def _mllama_build():
    return _m("MllamaForConditionalGeneration", "mllama")()


def _musicgen_build():
    return _m("MusicgenForConditionalGeneration", "musicgen")()


def _detr_build():
    return _m("DetrForObjectDetection", "detr")()


def _m2f_build():
    return _m("Mask2FormerModel", "mask2former")()


def _same(fmt):
    return lambda s, i: (fmt.format(i=i, s=s),) * 2


def _pair(qf, kf):
    return lambda s, i: (qf.format(i=i, s=s), kf.format(i=i, s=s))


def _seq2seq(prefix, enc_self="self_attn", enc_fmt="{p}encoder.layers.{i}", dec_fmt="{p}decoder.layers.{i}"):
    def f(s, i):
        if s == "encoder":
            base = enc_fmt.format(p=prefix, i=i) + f".{enc_self}."
            return base + "q_proj", base + "k_proj"
        base = dec_fmt.format(p=prefix, i=i) + (".self_attn." if s == "decoder" else ".encoder_attn.")
        return base + "q_proj", base + "k_proj"

    return f


def _audio(mt, cls, prefix=""):
    return Case(
        mt,
        _m(cls, mt),
        lambda m: m(wave(), output_attentions=True),
        _pair(prefix + "encoder.layers.{i}.attention.q_proj", prefix + "encoder.layers.{i}.attention.k_proj"),
        {"encoder": 2},
    )


def _swin_modules(depths, leaf, prefix=""):
    flat = [(s, b) for s, n in enumerate(depths) for b in range(n)]
    return lambda s, i: tuple(
        f"{prefix}encoder.layers.{flat[i][0]}.blocks.{flat[i][1]}." + leaf.format(p=p)
        for p in (("q", "k") if "{p}_proj" in leaf else ("query", "key"))
    )


def _mllama_run(m):
    inner = m.model
    inner.vision_model(
        pixel_values=pix(16)[:, None, None],
        aspect_ratio_ids=torch.ones(B, 1, dtype=torch.long),
        aspect_ratio_mask=torch.ones(B, 1, 1, dtype=torch.long),
    )
    inner.language_model(input_ids=ids(), position_ids=zpos())


def _mllama_modules(s, i):
    if s == "encoder":
        where = (
            f"model.vision_model.transformer.layers.{i}"
            if i < 2
            else f"model.vision_model.global_transformer.layers.{i - 2}"
        )
    else:
        where = f"model.language_model.layers.{i}"
    return where + ".self_attn.q_proj", where + ".self_attn.k_proj"


def _musicgen_modules(s, i):
    if s == "encoder":
        base = f"text_encoder.encoder.block.{i}.layer.0.SelfAttention."
        return base + "q", base + "k"
    base = f"decoder.model.decoder.layers.{i}." + ("self_attn." if s == "decoder" else "encoder_attn.")
    return base + "q_proj", base + "k_proj"


def _speecht5_run(m):
    h = torch.randn(B, L, 32, generator=torch.Generator().manual_seed(4))
    m(input_values=h, decoder_input_values=h[:, :5], use_cache=False)


CASES = [
    Case(
        "deberta",
        _m("DebertaForMaskedLM", "deberta"),
        lambda m: m(ids()),
        _same("deberta.encoder.layer.{i}.attention.self.in_proj"),
        {"encoder": 2},
        scale=lambda s, k: 1 / math.sqrt(3 * k),
    ),
    Case(
        "deberta-v2",
        _m("DebertaV2Model", "deberta-v2"),
        lambda m: m(ids()),
        _pair("encoder.layer.{i}.attention.self.query_proj", "encoder.layer.{i}.attention.self.key_proj"),
        {"encoder": 2},
        scale=lambda s, k: 1 / math.sqrt(3 * k),
    ),
    Case(
        "modernbert",
        _m("ModernBertForMaskedLM", "modernbert"),
        lambda m: m(ids(), position_ids=zpos()),
        _same("model.layers.{i}.attn.Wqkv"),
        {"encoder": 3},
    ),
    Case(
        "openai-gpt",
        _m("OpenAIGPTLMHeadModel", "openai-gpt"),
        lambda m: m(ids()),
        _same("transformer.h.{i}.attn.c_attn"),
        {"decoder": 2},
    ),
    Case(
        "imagegpt",
        _m("ImageGPTForCausalImageModeling", "imagegpt"),
        lambda m: m(ids()),
        _same("transformer.h.{i}.attn.c_attn"),
        {"decoder": 2},
    ),
    Case(
        "gpt_neo",
        _m("GPTNeoForCausalLM", "gpt_neo"),
        lambda m: m(ids()),
        _pair("transformer.h.{i}.attn.attention.q_proj", "transformer.h.{i}.attn.attention.k_proj"),
        {"decoder": 2},
        scale=lambda s, k: 1.0,
    ),
    Case(
        "gptj",
        _m("GPTJForCausalLM", "gptj"),
        lambda m: m(ids(), position_ids=zpos()),
        _pair("transformer.h.{i}.attn.q_proj", "transformer.h.{i}.attn.k_proj"),
        {"decoder": 2},
    ),
    Case(
        "mixtral",
        _m("MixtralForCausalLM", "mixtral"),
        lambda m: m(ids(), position_ids=zpos()),
        _pair("model.layers.{i}.self_attn.q_proj", "model.layers.{i}.self_attn.k_proj"),
        {"decoder": 2},
    ),
    Case(
        "phi",
        _m("PhiForCausalLM", "phi"),
        lambda m: m(ids(), position_ids=zpos()),
        _pair("model.layers.{i}.self_attn.q_proj", "model.layers.{i}.self_attn.k_proj"),
        {"decoder": 2},
    ),
    Case(
        "phi3",
        _m("Phi3ForCausalLM", "phi3"),
        lambda m: m(ids(), position_ids=zpos()),
        _same("model.layers.{i}.self_attn.qkv_proj"),
        {"decoder": 2},
    ),
    # MobileLLM is remote code (model_type "mobilellm", Llama tensor names): run the Llama class on
    # the same weights and relabel the saved config.
    Case(
        "mobilellm",
        lambda: tf.LlamaForCausalLM(
            tf.AutoConfig.for_model("llama", **tiny_config("mobilellm"), attn_implementation="eager")
        ),
        lambda m: m(ids(), position_ids=zpos()),
        _pair("model.layers.{i}.self_attn.q_proj", "model.layers.{i}.self_attn.k_proj"),
        {"decoder": 2},
        config_edit={"model_type": "mobilellm", "architectures": ["MobileLLMForCausalLM"]},
    ),
    Case(
        "bart",
        _m("BartForConditionalGeneration", "bart"),
        lambda m: m(ids(), decoder_input_ids=ids(5), use_cache=False),
        _seq2seq("model."),
        {"encoder": 2, "decoder": 3, "cross": 3},
    ),
    Case(
        "mbart",
        _m("MBartForConditionalGeneration", "mbart"),
        lambda m: m(ids(), decoder_input_ids=ids(5), use_cache=False),
        _seq2seq("model."),
        {"encoder": 2, "decoder": 3, "cross": 3},
    ),
    Case(
        "speech_to_text",
        _m("Speech2TextForConditionalGeneration", "speech_to_text"),
        lambda m: m(input_features=torch.randn(B, 40, 8), decoder_input_ids=ids(5), use_cache=False),
        _seq2seq("model."),
        {"encoder": 2, "decoder": 3, "cross": 3},
    ),
    Case(
        "speecht5",
        _m("SpeechT5Model", "speecht5"),
        _speecht5_run,
        _seq2seq(
            "",
            enc_self="attention",
            enc_fmt="encoder.wrapped_encoder.layers.{i}",
            dec_fmt="decoder.wrapped_decoder.layers.{i}",
        ),
        {"encoder": 2, "decoder": 3, "cross": 3},
    ),
    Case(
        "musicgen",
        _musicgen_build,
        lambda m: m(input_ids=ids(), decoder_input_ids=torch.randint(0, 16, (B * 2, 5)), use_cache=False),
        _musicgen_modules,
        {"encoder": 2, "decoder": 3, "cross": 3},
        scale=lambda s, k: 1.0 if s == "encoder" else 1 / math.sqrt(k),
    ),  # T5 has no 1/sqrt(k),
    Case(
        "beit",
        _m("BeitForImageClassification", "beit"),
        lambda m: m(pix()),
        _pair("beit.layers.{i}.attention.q_proj", "beit.layers.{i}.attention.k_proj"),
        {"encoder": 2},
    ),
    Case(
        "data2vec-vision",
        _m("Data2VecVisionModel", "data2vec-vision"),
        lambda m: m(pix()),
        _pair("encoder.layer.{i}.attention.attention.query", "encoder.layer.{i}.attention.attention.key"),
        {"encoder": 2},
    ),
    Case(
        "deit",
        _m("DeiTForImageClassificationWithTeacher", "deit"),
        lambda m: m(pix()),
        _pair("deit.layers.{i}.attention.q_proj", "deit.layers.{i}.attention.k_proj"),
        {"encoder": 2},
    ),
    Case(
        "dinov2",
        _m("Dinov2Model", "dinov2"),
        lambda m: m(pix()),
        _pair("encoder.layer.{i}.attention.q_proj", "encoder.layer.{i}.attention.k_proj"),
        {"encoder": 2},
    ),
    Case(
        "vit_mae",
        _m("ViTMAEForPreTraining", "vit_mae"),
        lambda m: m(pix()),
        lambda s, i: (
            (("vit.layers" if s == "encoder" else "decoder.decoder_layers") + f".{i}.attention.{p}_proj") for p in "qk"
        ),
        {"encoder": 2, "decoder": 2},
    ),
    Case(
        "swin",
        _m("SwinModel", "swin"),
        lambda m: m(pix()),
        _swin_modules([1, 2], "attention.{p}_proj"),
        {"encoder": 3},
    ),
    Case(
        "swinv2",
        _m("Swinv2Model", "swinv2"),
        lambda m: m(pix()),
        _swin_modules([1, 2], "attention.self.{p}"),
        {"encoder": 3},
        mode="normalize",
    ),
    Case("detr", _detr_build, lambda m: m(pix(64)), _seq2seq("model."), {"encoder": 2, "decoder": 2, "cross": 2}),
    Case(
        "git",
        _m("GitForCausalLM", "git"),
        lambda m: m(input_ids=ids(), pixel_values=pix(16)),
        lambda s, i: (
            (f"git.image_encoder.vision_model.encoder.layers.{i}.self_attn.{p}_proj" for p in "qk")
            if s == "encoder"
            else (f"git.encoder.layer.{i}.attention.self.{p}" for p in ("query", "key"))
        ),
        {"encoder": 3, "decoder": 2},
    ),
    Case("mllama", _mllama_build, _mllama_run, _mllama_modules, {"encoder": 3, "decoder": 2}),
    _audio("hubert", "HubertModel"),
    # WavLM calls F.multi_head_attention_forward with q_proj.weight: hook the attention module.
    dataclasses.replace(_audio("wavlm", "WavLMModel"), modules=_same("encoder.layers.{i}.attention")),
    _audio("unispeech-sat", "UniSpeechSatModel"),
    _audio("unispeech", "UniSpeechModel"),
    _audio("wav2vec2", "Wav2Vec2ForCTC", prefix="wav2vec2."),
    _audio("data2vec-audio", "Data2VecAudioModel"),
]
CASES_BY_TYPE = {c.model_type: c for c in CASES}
RECORDS_WITH_TINY = set(tiny_types())


def _tuple_modules(case: Case) -> Case:
    f = case.modules
    case.modules = lambda s, i: tuple(f(s, i)) if f(s, i) else None
    return case


for _c in CASES:
    _tuple_modules(_c)


@pytest.fixture(scope="module")
def observed_cases(tmp_path_factory):
    cache = {}

    def get(mt):
        if mt not in cache:
            cache[mt] = run_case(CASES_BY_TYPE[mt], tmp_path_factory.mktemp(mt))
        return cache[mt]

    return get


@pytest.mark.parametrize("model_type", [c.model_type for c in CASES])
def test_adapter_logits_match_model(model_type, observed_cases):
    ckpt, found, observed = observed_cases(model_type)
    assert ckpt.model_type == model_type
    assert_matches(found, observed)


def _sam_build():
    model = _m("SamModel", "sam")()
    with torch.no_grad():  # the default patch embedding is ~1e-5 in scale: make the logits testable
        model.vision_encoder.patch_embed.projection.weight.normal_(0, 0.1, generator=torch.Generator().manual_seed(5))
    return model


def _sam_modules(s, i):
    if s == "encoder":
        return (f"vision_encoder.layers.{i}.attn.qkv",) * 2
    return tuple(f"mask_decoder.transformer.layers.{i}.self_attn.{p}_proj" for p in "qk")


def _m2f_modules(s, i):
    if s == "cross":  # torch nn.MultiheadAttention: checked against its own weights in test_mask2former_cross_in_proj
        return None
    if s == "decoder":
        return tuple(f"transformer_module.decoder.layers.{i}.self_attn.{p}_proj" for p in "qk")
    return tuple(f"pixel_level_module.encoder.swin.encoder.layers.{i}.blocks.0.attention.{p}_proj" for p in "qk")


MORE = [
    Case(
        "sam",
        _sam_build,
        lambda m: m(pixel_values=pix(64), input_points=torch.rand(B, 1, 2, 2) * 64),
        _sam_modules,
        {"encoder": 2, "decoder": 2},
    ),
    Case(
        "mask2former",
        _m2f_build,
        lambda m: m(pixel_values=pix(64)),
        _m2f_modules,
        {"encoder": 4, "decoder": 2, "cross": 2},
    ),  # decoder_layers=3 builds 2
]
for _c in MORE:
    _tuple_modules(_c)
    CASES_BY_TYPE[_c.model_type] = _c


@pytest.mark.parametrize("model_type", [c.model_type for c in MORE])
def test_adapter_logits_match_model_more(model_type, observed_cases):
    ckpt, found, observed = observed_cases(model_type)
    assert_matches([b for b in found if (b.stack, b.layer) in observed], observed)
    assert {s for s, _ in observed} == {b.stack for b in found} - ({"cross"} if model_type == "mask2former" else set())


# ------------------------------------------------------------- objectives declared at registration

# The other layouts of the core tiny models (wqk.tiny), for the stacks the plain one lacks.
TINY_VARIANTS = {
    "bert": [dict(architecture="BertLMHeadModel", is_decoder=True, add_cross_attention=True)],
    "roberta": [dict(architecture="RobertaForCausalLM", is_decoder=True, add_cross_attention=True)],
    "xlm-roberta": [dict(architecture="XLMRobertaForCausalLM", is_decoder=True, add_cross_attention=True)],
    "electra": [dict(architecture="ElectraForCausalLM", is_decoder=True, add_cross_attention=True)],
    "gpt2": [dict(add_cross_attention=True)],
    "t5": [dict(architecture="T5EncoderModel")],
}


def _yielded_stacks(model_type, observed_cases, tmp_path) -> set[str]:
    """The stacks the adapter yields on every tiny model of model_type: its Case, or the core
    tiny models and their variants, or (musicgen_decoder) the decoder of the MusicGen Case."""
    if model_type in CASES_BY_TYPE:
        return {b.stack for b in observed_cases(model_type)[1]}
    if model_type == "musicgen_decoder":
        torch.manual_seed(0)
        _musicgen_build().decoder.save_pretrained(tmp_path / "decoder")
        folders = [tmp_path / "decoder"]
    elif model_type in RECORDS_WITH_TINY:
        variants = [{}, *TINY_VARIANTS.get(model_type, [])]
        folders = [build_tiny(model_type, tmp_path / f"v{n}", **kw) for n, kw in enumerate(variants)]
    else:
        pytest.fail(f"{model_type}: no tiny model to check its adapter on; add a Case")
    return {b.stack for folder in folders for b in adapter_blocks(open_checkpoint(str(folder)))}


@pytest.mark.parametrize("model_type", supported_model_types())
def test_every_model_type_declares_the_objectives_of_its_stacks(model_type, observed_cases, tmp_path):
    """Each registered model_type declares the objective of exactly the self-attention stacks
    its adapter yields on the tiny models; cross-attention carries none."""
    declared = stack_objectives(model_type)
    assert set(declared.values()) <= set(OBJECTIVES)
    yielded = _yielded_stacks(model_type, observed_cases, tmp_path)
    assert set(declared) == yielded - {"cross"}, f"{model_type} yields {sorted(yielded)}, declares {declared}"


# ------------------------------------------------------------- regressions: the authors' mistakes


def _layer_form_error(obs: Observed, m: torch.Tensor) -> tuple[float, float]:
    """Compare x_i^T M x_j * scale with the model's logits summed over heads (a per-layer form)."""
    lq = obs.logits.shape[-2]
    xq = obs.xq.reshape(-1, lq, obs.xq.shape[-1]).double()
    xk = obs.xk.double().reshape(xq.shape[0], -1, obs.xk.shape[-1])
    pred = torch.einsum("nid,de,nje->nij", xq, m.double(), xk) * obs.scale
    keep = (obs.logits > -1e3).all(1)
    model = obs.logits.sum(1)
    return float((pred - model)[keep].abs().max()), float(model[keep].abs().max())


def _ours_form(b) -> torch.Tensor:
    return torch.einsum("hdk,hek->de", b.q, b.k_per_query_head())


def test_deberta_v1_in_proj_deinterleaved_per_head(observed_cases):
    ckpt, found, observed = observed_cases("deberta")
    h = ckpt.config["num_attention_heads"]
    for b in found:
        w = ckpt.store.get(f"deberta.encoder.layer.{b.layer}.attention.self.in_proj.weight")
        d = w.shape[1]
        assert_differs(observed[("encoder", b.layer)], linear_heads(w[:d], h), linear_heads(w[d : 2 * d], h))
    assert_matches(found, observed)


def _check_untransposed(model_type, name, observed_cases):
    ckpt, found, observed = observed_cases(model_type)
    h = ckpt.config["num_attention_heads"]
    h_kv = ckpt.config.get("num_key_value_heads") or h
    for b in found:
        w = ckpt.store.get(name.format(i=b.layer))
        k = w.shape[0] // (h + 2 * h_kv)
        wq = w[: h * k]
        wk = w[h * k : (h + h_kv) * k].reshape(h_kv, k, -1).repeat_interleave(h // h_kv, 0).reshape(h * k, -1)
        wrong = wq @ wk.T  # the slices are right; the missing transpose puts the form in head space
        err, mag = _layer_form_error(observed[("decoder" if model_type == "phi3" else "encoder", b.layer)], wrong)
        assert err > 0.1 * mag
        err, mag = _layer_form_error(observed[(b.stack, b.layer)], _ours_form(b))
        assert err <= 1e-4 * mag
        torch.testing.assert_close(_ours_form(b), wq.T @ wk, rtol=1e-5, atol=1e-6)  # = W_q^T W_k, input space


def test_modernbert_wqkv_in_input_space_not_transposed(observed_cases):
    _check_untransposed("modernbert", "model.layers.{i}.attn.Wqkv.weight", observed_cases)


def test_phi3_qkv_proj_in_input_space_not_transposed(observed_cases):
    _check_untransposed("phi3", "model.layers.{i}.self_attn.qkv_proj.weight", observed_cases)


def _check_gqa_repeat(model_type, observed_cases):
    ckpt, found, observed = observed_cases(model_type)
    for b in found:
        assert 1 < b.n_kv_heads < b.n_heads
        tiled = b.k[[h % b.n_kv_heads for h in range(b.n_heads)]]  # the authors' pairing h -> h mod n_kv
        assert_differs(observed[(b.stack, b.layer)], b.q, tiled)
        assert [b.kv_head(h) for h in range(b.n_heads)] == [h // (b.n_heads // b.n_kv_heads) for h in range(b.n_heads)]
    assert_matches(found, observed)


def test_phi3_gqa_key_heads_repeated(observed_cases):
    _check_gqa_repeat("phi3", observed_cases)


def test_mixtral_gqa_key_heads_repeated(observed_cases):
    _check_gqa_repeat("mixtral", observed_cases)


def test_musicgen_decoder_reads_self_attention_not_cross(observed_cases):
    ckpt, found, observed = observed_cases("musicgen")
    dec = [b for b in found if b.stack == "decoder"]
    assert dec and {b.stack for b in found} == {"encoder", "decoder", "cross"}
    for b in dec:
        base = f"decoder.model.decoder.layers.{b.layer}."
        h = b.n_heads
        torch.testing.assert_close(b.q, linear_heads(ckpt.store.get(base + "self_attn.q_proj.weight"), h))
        cross_q = linear_heads(ckpt.store.get(base + "encoder_attn.q_proj.weight"), h)
        cross_k = linear_heads(ckpt.store.get(base + "encoder_attn.k_proj.weight"), h)
        assert_differs(observed[("decoder", b.layer)], cross_q, cross_k)  # the authors' path
    assert_matches(found, observed)


def test_layer_counts_from_weights_speecht5_decoder(observed_cases, tmp_path):
    ckpt, found, _ = observed_cases("speecht5")
    config = tf.SpeechT5Config.from_dict(ckpt.config)
    n_dec = sum(b.stack == "decoder" for b in found)
    assert n_dec == 3 == ckpt.config["decoder_layers"]
    assert config.num_hidden_layers == 2 != n_dec  # num_hidden_layers aliases encoder_layers


def test_layer_counts_from_weights_git_image_encoder(observed_cases):
    ckpt, found, _ = observed_cases("git")
    n_img = sum(b.stack == "encoder" for b in found)
    assert n_img == 3 == ckpt.config["vision_config"]["num_hidden_layers"]
    assert ckpt.config["num_hidden_layers"] == 2 != n_img  # the text stack's depth


@pytest.mark.parametrize(
    "model_type,stack", [("detr", "decoder"), ("mask2former", "decoder"), ("sam", "decoder"), ("mllama", "encoder")]
)
def test_non_causal_decoders_are_reported_bidirectional(model_type, stack, observed_cases):
    """DETR/Mask2Former/SAM decoders and the Mllama vision tower attend without a causal mask:
    their objective is bidirectional, and the model's own logits carry no causal mask: every
    query attends to every real token, earlier or later (Mllama masks only its padded patches)."""
    assert stack_objectives(model_type)[stack] == "bidirectional"
    _, _, observed = observed_cases(model_type)
    checked = 0
    for (s, _layer), obs in observed.items():
        if s == stack:
            masked = obs.logits < -1e3
            half = masked.shape[-1] // 2  # Mllama pads its patch sequence at the end; the first half is real
            assert not bool(masked[..., :half, :half].any()), f"{model_type} {stack}: masked logits among real tokens"
            checked += 1
    assert checked


def test_causal_decoders_are_masked(observed_cases):
    """Contrast for the test above: a causal decoder's logits are masked above the diagonal."""
    assert stack_objectives("bart")["decoder"] == "autoregressive"
    _, _, observed = observed_cases("bart")
    logits = observed[("decoder", 0)].logits
    assert bool((logits[..., 0, 1:] < -1e3).all()) and bool((logits.tril() > -1e3).all())


def test_mask2former_cross_in_proj(tmp_path):
    """Mask2Former's cross-attention is torch's nn.MultiheadAttention (fused in_proj, [q|k|v]
    row blocks): its own per-head attention weights must equal softmax of our logits."""
    model = _m2f_build().eval()
    model.save_pretrained(tmp_path)
    cross = [b for b in adapter_blocks(open_checkpoint(str(tmp_path))) if b.stack == "cross"]
    assert [b.layer for b in cross] == [0, 1]
    g = torch.Generator().manual_seed(0)
    for b in cross:
        attn = model.get_submodule(f"transformer_module.decoder.layers.{b.layer}.cross_attn")
        torch.nn.init.zeros_(attn.in_proj_bias)
        xq = torch.randn(5, 2, attn.embed_dim, generator=g)  # sequence-first: [L, B, d]
        xk = torch.randn(7, 2, attn.embed_dim, generator=g)
        with torch.no_grad():
            _, weights = attn(xq, xk, xk, need_weights=True, average_attn_weights=False)  # [B, H, Lq, Lk]
        k = b.q.shape[2]
        ours = torch.einsum("qbd,hde,hfe,kbf->bhqk", xq, b.q, b.k_per_query_head(), xk) / math.sqrt(k)
        torch.testing.assert_close(ours.softmax(-1), weights, rtol=1e-4, atol=1e-5)
        swapped = torch.einsum("qbd,hde,hfe,kbf->bhqk", xq, b.k_per_query_head(), b.q, xk) / math.sqrt(k)
        assert not torch.allclose(swapped.softmax(-1), weights, atol=1e-3)  # the check has teeth


def test_musicgen_decoder_alone_matches_the_composite(tmp_path):
    """A MusicGen decoder saved on its own (model_type musicgen_decoder) yields the same
    decoder and cross blocks as the full model, whose blocks are checked against its logits."""
    torch.manual_seed(0)
    model = _musicgen_build().eval()
    model.save_pretrained(tmp_path / "full")
    model.decoder.save_pretrained(tmp_path / "decoder")
    alone = open_checkpoint(str(tmp_path / "decoder"))
    assert alone.model_type == "musicgen_decoder"
    full = [b for b in adapter_blocks(open_checkpoint(str(tmp_path / "full"))) if b.stack != "encoder"]
    part = list(adapter_blocks(alone))
    assert [(b.stack, b.layer) for b in part] == [(b.stack, b.layer) for b in full]
    for a, b in zip(part, full):
        torch.testing.assert_close(a.q, b.q)
        torch.testing.assert_close(a.k, b.k)
