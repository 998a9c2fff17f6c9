"""The blocks' extras (wqk.adapters.reader, through wqk.adapters.model_blocks): q/k biases,
pre-norm gains and rotary embeddings.

1. For every covered family, a tiny random model (every parameter drawn at random, so that
   biases are not 0 and gains not 1) is saved and reopened: each block's q_bias/k_bias must
   equal the saved bias sliced per head HERE (by hand: [q | k | v] blocks, GPT-NeoX's
   per-head [q_h k_h v_h], GPT-2's [k | v]), its q_gain/k_gain the saved norm weight named
   here, and None where the model has no such tensor or is post-norm.
2. Logits: with forward hooks on tiny random Llama (plain and llama3-scaled), GPT-J,
   GPT-NeoX and Phi models (eager attention, float64), the model's pre-softmax score of
   head h, query i and key j equals (x_i Q_h + b_q) R(j - i) (x_j K_h + b_k)^T / sqrt(k),
   with R built in this file from block.rope (2 x 2 rotations of the rotary pairs); the
   wrong layout or frequencies fail it. GPT-2 (pre-norm, biased): with x̂ the LayerNorm
   input normalised here (LayerNorm bias 0), the score equals
   (diag(q_gain) x̂_i Q_h + b_q)(diag(k_gain) x̂_j K_h + b_k)^T / sqrt(k).
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as tf
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).parent))
from adapter_check import capture_many, rotated_scores
from tiny_zoo import tiny_config
from wqk.adapters import get_record, model_blocks
from wqk.adapters.reader import with_extras
from wqk.blocks import AttentionBlock, Rope
from wqk.checkpoints import open_checkpoint

F64 = torch.float64


# ------------------------------------------------------------------------------ building models


def _randomise(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def _model(model_type: str, cls: str, **over) -> torch.nn.Module:
    kw = {**tiny_config(model_type), **over}
    config = tf.AutoConfig.for_model(model_type, **kw, attn_implementation="eager")
    torch.manual_seed(0)
    return getattr(tf, cls)(config).eval()


def _save(model: torch.nn.Module, folder: Path, config_edit: dict | None = None) -> Path:
    model.save_pretrained(folder)
    if config_edit:
        path = folder / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **config_edit}))
    return folder


def _blocks(folder: Path) -> list[AttentionBlock]:
    return list(model_blocks(open_checkpoint(str(folder)))[1])


# ------------------------------------------------------------- 1. extras equal the saved tensors


def _per_head(b: torch.Tensor, n: int, k: int) -> torch.Tensor:
    return torch.stack([b[h * k : (h + 1) * k] for h in range(n)])


def sep(q: str | None, k: str | None = None):
    return ("sep", q, k)


def blocks(name: str):
    return ("blocks", name)


def per_head(name: str):
    return ("per_head", name)


def kv(q: str, kv_name: str):
    return ("kv", q, kv_name)


NONE = sep(None, None)


@dataclass
class Exp:
    """Expected extras of a stack: bias layout and names, gain names (None: must be None);
    templates take {i} = the block's layer, or the fields `at(layer)` gives."""

    bias: tuple = NONE
    q_gain: str | None = None
    k_gain: str | None = "same"  # "same": the q_gain tensor (self-attention)
    at: object = None


def _expected_biases(spec, block: AttentionBlock, get) -> tuple:
    n, n_kv, k = block.n_heads, block.n_kv_heads, block.q.shape[2]
    kind, *names = spec
    if kind == "sep":
        q, kk = (get(x) for x in names)
        return (_per_head(q, n, k) if q is not None else None, _per_head(kk, n_kv, k) if kk is not None else None)
    if kind == "blocks":  # [q (n*k) | k (n_kv*k) | v]
        b = get(names[0])
        return _per_head(b[: n * k], n, k), _per_head(b[n * k : (n + n_kv) * k], n_kv, k)
    if kind == "per_head":  # head h: rows [3hk, 3hk + k) are q_h, the next k rows k_h
        b = get(names[0])
        q = torch.stack([b[3 * h * k : 3 * h * k + k] for h in range(n)])
        return q, torch.stack([b[3 * h * k + k : 3 * h * k + 2 * k] for h in range(n)])
    if kind == "kv":  # q separate, [k | v] fused
        q, b = get(names[0]), get(names[1])
        return _per_head(q, n, k), _per_head(b[: n_kv * k], n_kv, k)
    raise AssertionError(kind)


@dataclass
class Case:
    id: str
    model_type: str
    cls: str
    expect: dict[str, Exp]
    over: dict = field(default_factory=dict)
    config_edit: dict | None = None
    build: object = None  # (tmp folder) -> saved folder, instead of model_type/cls


def _bart_like(p: str, pre: bool, attn: str = "self_attn", enc: str = "encoder.layers", dec: str = "decoder.layers"):
    g = (lambda s: s) if pre else (lambda s: None)
    return {
        "encoder": Exp(
            sep(f"{p}{enc}.{{i}}.{attn}.q_proj.bias", f"{p}{enc}.{{i}}.{attn}.k_proj.bias"),
            g(f"{p}{enc}.{{i}}.self_attn_layer_norm.weight"),
        ),
        "decoder": Exp(
            sep(f"{p}{dec}.{{i}}.self_attn.q_proj.bias", f"{p}{dec}.{{i}}.self_attn.k_proj.bias"),
            g(f"{p}{dec}.{{i}}.self_attn_layer_norm.weight"),
        ),
        "cross": Exp(
            sep(f"{p}{dec}.{{i}}.encoder_attn.q_proj.bias", f"{p}{dec}.{{i}}.encoder_attn.k_proj.bias"),
            g(f"{p}{dec}.{{i}}.encoder_attn_layer_norm.weight"),
            g(f"{p}encoder.layer_norm.weight"),
        ),
    }


_LLAMA_GAIN = "model.layers.{i}.input_layernorm.weight"
_SWIN = "encoder.layers.{s}.blocks.{b}."


def _swin_at(layer: int) -> dict:  # depths [1, 2]: layers (stage, block) (0, 0), (1, 0), (1, 1)
    return dict(zip("sb", [(0, 0), (1, 0), (1, 1)][layer]))


_VIT = "encoder.layer.{i}.attention.attention."
_WHISPER = _bart_like("model.", True)
_WHISPER = {s: Exp(sep(e.bias[1], None), e.q_gain, e.k_gain) for s, e in _WHISPER.items()}  # no k bias
_T5 = {
    "encoder": Exp(NONE, "encoder.block.{i}.layer.0.layer_norm.weight"),
    "decoder": Exp(NONE, "decoder.block.{i}.layer.0.layer_norm.weight"),
    "cross": Exp(NONE, "decoder.block.{i}.layer.1.layer_norm.weight", "encoder.final_layer_norm.weight"),
}
_MG = "decoder.model.decoder.layers.{i}."
_MUSICGEN = {
    "encoder": Exp(NONE, "text_encoder.encoder.block.{i}.layer.0.layer_norm.weight"),
    "decoder": Exp(NONE, _MG + "self_attn_layer_norm.weight"),
    "cross": Exp(NONE, _MG + "encoder_attn_layer_norm.weight", "text_encoder.encoder.final_layer_norm.weight"),
}
_M2F = "transformer_module.decoder.layers.{i}."
_M2F_BACKBONE = Exp(
    sep(
        f"pixel_level_module.encoder.{_SWIN}attention.self.query.bias",
        f"pixel_level_module.encoder.{_SWIN}attention.self.key.bias",
    ),
    f"pixel_level_module.encoder.{_SWIN}layernorm_before.weight",
    at=lambda layer: dict(s=layer, b=0),  # depths [1, 1, 1, 1]
)
_WAV = "wav2vec2.encoder.layers.{i}."


def _musicgen_decoder_alone(folder: Path) -> Path:
    model = _randomise(_model("musicgen", "MusicgenForConditionalGeneration"))
    model.decoder.save_pretrained(folder)
    return folder


def _vit_state_dict(folder: Path) -> Path:
    model = _randomise(_model("vit", "ViTForImageClassification"))
    folder.mkdir()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors")
    model.config.save_pretrained(folder)
    return folder


CASES = [
    Case("llama", "llama", "LlamaForCausalLM", {"decoder": Exp(NONE, _LLAMA_GAIN)}),
    Case(
        "llama-attention_bias",
        "llama",
        "LlamaForCausalLM",
        {
            "decoder": Exp(
                sep("model.layers.{i}.self_attn.q_proj.bias", "model.layers.{i}.self_attn.k_proj.bias"), _LLAMA_GAIN
            )
        },
        over=dict(attention_bias=True),
    ),
    Case("mistral", "mistral", "MistralForCausalLM", {"decoder": Exp(NONE, _LLAMA_GAIN)}),
    Case("mixtral", "mixtral", "MixtralForCausalLM", {"decoder": Exp(NONE, _LLAMA_GAIN)}),
    Case(
        "mobilellm",
        "llama",
        "LlamaForCausalLM",
        {"decoder": Exp(NONE, _LLAMA_GAIN)},
        over=tiny_config("mixtral"),
        config_edit={"model_type": "mobilellm", "architectures": ["MobileLLMForCausalLM"]},
    ),
    Case(
        "phi",
        "phi",
        "PhiForCausalLM",
        {
            "decoder": Exp(
                sep("model.layers.{i}.self_attn.q_proj.bias", "model.layers.{i}.self_attn.k_proj.bias"), _LLAMA_GAIN
            )
        },
    ),
    Case("phi3", "phi3", "Phi3ForCausalLM", {"decoder": Exp(NONE, _LLAMA_GAIN)}),
    Case(
        "gpt2-cross",
        "gpt2",
        "GPT2LMHeadModel",
        {
            "decoder": Exp(blocks("transformer.h.{i}.attn.c_attn.bias"), "transformer.h.{i}.ln_1.weight"),
            "cross": Exp(
                kv("transformer.h.{i}.crossattention.q_attn.bias", "transformer.h.{i}.crossattention.c_attn.bias"),
                "transformer.h.{i}.ln_cross_attn.weight",
                None,  # keys read an outside encoder
            ),
        },
        over=dict(add_cross_attention=True),
    ),
    Case(
        "imagegpt",
        "imagegpt",
        "ImageGPTForCausalImageModeling",
        {"decoder": Exp(blocks("transformer.h.{i}.attn.c_attn.bias"), "transformer.h.{i}.ln_1.weight")},
    ),
    Case(
        "openai-gpt",
        "openai-gpt",
        "OpenAIGPTLMHeadModel",
        {"decoder": Exp(blocks("transformer.h.{i}.attn.c_attn.bias"))},
    ),
    Case("gpt_neo", "gpt_neo", "GPTNeoForCausalLM", {"decoder": Exp(NONE, "transformer.h.{i}.ln_1.weight")}),
    Case("gptj", "gptj", "GPTJForCausalLM", {"decoder": Exp(NONE, "transformer.h.{i}.ln_1.weight")}),
    Case(
        "gpt_neox",
        "gpt_neox",
        "GPTNeoXForCausalLM",
        {
            "decoder": Exp(
                per_head("gpt_neox.layers.{i}.attention.query_key_value.bias"),
                "gpt_neox.layers.{i}.input_layernorm.weight",
            )
        },
    ),
    Case("t5", "t5", "T5ForConditionalGeneration", _T5),
    Case("whisper", "whisper", "WhisperForConditionalGeneration", _WHISPER),
    Case(
        "vit",
        "vit",
        "ViTForImageClassification",
        {
            "encoder": Exp(
                sep(f"vit.{_VIT}query.bias", f"vit.{_VIT}key.bias"), "vit.encoder.layer.{i}.layernorm_before.weight"
            )
        },
    ),
    Case(
        "vit-state_dict",
        "vit",
        "",
        {
            "encoder": Exp(
                sep("vit.layers.{i}.attention.q_proj.bias", "vit.layers.{i}.attention.k_proj.bias"),
                "vit.layers.{i}.layernorm_before.weight",
            )
        },
        build=_vit_state_dict,
    ),
    Case(
        "deit",
        "deit",
        "DeiTForImageClassificationWithTeacher",
        {
            "encoder": Exp(
                sep(f"deit.{_VIT}query.bias", f"deit.{_VIT}key.bias"), "deit.encoder.layer.{i}.layernorm_before.weight"
            )
        },
    ),
    Case(
        "beit",
        "beit",
        "BeitForImageClassification",
        {"encoder": Exp(sep(f"beit.{_VIT}query.bias", None), "beit.encoder.layer.{i}.layernorm_before.weight")},
    ),
    Case(
        "data2vec-vision",
        "data2vec-vision",
        "Data2VecVisionModel",
        {"encoder": Exp(sep(f"{_VIT}query.bias", None), "encoder.layer.{i}.layernorm_before.weight")},
    ),
    Case(
        "dinov2",
        "dinov2",
        "Dinov2Model",
        {"encoder": Exp(sep(f"{_VIT}query.bias", f"{_VIT}key.bias"), "encoder.layer.{i}.norm1.weight")},
    ),
    Case(
        "vit_mae",
        "vit_mae",
        "ViTMAEForPreTraining",
        {
            "encoder": Exp(
                sep(f"vit.{_VIT}query.bias", f"vit.{_VIT}key.bias"), "vit.encoder.layer.{i}.layernorm_before.weight"
            ),
            "decoder": Exp(
                sep(
                    "decoder.decoder_encoder.layer.{i}.attention.attention.query.bias",
                    "decoder.decoder_encoder.layer.{i}.attention.attention.key.bias",
                ),
                "decoder.decoder_encoder.layer.{i}.layernorm_before.weight",
            ),
        },
    ),
    Case(
        "bert-decoder-cross",
        "bert",
        "BertLMHeadModel",
        {
            "decoder": Exp(
                sep(
                    "bert.encoder.layer.{i}.attention.self.query.bias", "bert.encoder.layer.{i}.attention.self.key.bias"
                )
            ),
            "cross": Exp(
                sep(
                    "bert.encoder.layer.{i}.crossattention.self.query.bias",
                    "bert.encoder.layer.{i}.crossattention.self.key.bias",
                ),
                None,
                None,
            ),
        },
        over=dict(is_decoder=True, add_cross_attention=True),
    ),
    Case(
        "roberta",
        "roberta",
        "RobertaForMaskedLM",
        {
            "encoder": Exp(
                sep(
                    "roberta.encoder.layer.{i}.attention.self.query.bias",
                    "roberta.encoder.layer.{i}.attention.self.key.bias",
                )
            )
        },
    ),
    Case(
        "modernbert-bias",
        "modernbert",
        "ModernBertForMaskedLM",
        {  # layer 0's attn_norm is an Identity: the embeddings' norm feeds it
            "encoder": Exp(
                blocks("model.layers.{i}.attn.Wqkv.bias"),
                "{norm}.weight",
                at=lambda layer: dict(
                    i=layer, norm=f"model.layers.{layer}.attn_norm" if layer else "model.embeddings.norm"
                ),
            )
        },
        over=dict(attention_bias=True),
    ),
    Case(
        "mllama",
        "mllama",
        "MllamaForConditionalGeneration",
        {
            "encoder": Exp(  # 2 local layers, then the global one
                NONE,
                "vision_model.{part}.layers.{j}.input_layernorm.weight",
                at=lambda layer: (
                    dict(part="transformer", j=layer) if layer < 2 else dict(part="global_transformer", j=0)
                ),
            ),
            "decoder": Exp(NONE, "language_model.model.layers.{i}.input_layernorm.weight"),
        },
    ),
    Case("musicgen", "musicgen", "MusicgenForConditionalGeneration", _MUSICGEN),
    Case(
        "musicgen-enc_to_dec_proj",
        "musicgen",
        "MusicgenForConditionalGeneration",
        {**_MUSICGEN, "cross": Exp(NONE, _MG + "encoder_attn_layer_norm.weight", None)},  # a projection after the norm
        over=dict(text_encoder=dict(tiny_config("musicgen")["text_encoder"], d_model=16, d_kv=4)),
    ),
    Case(
        "musicgen_decoder",
        "musicgen_decoder",
        "",
        {
            "decoder": Exp(NONE, "model.decoder.layers.{i}.self_attn_layer_norm.weight"),
            "cross": Exp(NONE, "model.decoder.layers.{i}.encoder_attn_layer_norm.weight", None),
        },
        build=_musicgen_decoder_alone,
    ),
    Case(
        "swin",
        "swin",
        "SwinModel",
        {
            "encoder": Exp(
                sep(_SWIN + "attention.self.query.bias", _SWIN + "attention.self.key.bias"),
                _SWIN + "layernorm_before.weight",
                at=_swin_at,
            )
        },
    ),
    Case(
        "swinv2", "swinv2", "Swinv2Model", {"encoder": Exp(sep(_SWIN + "attention.self.query.bias", None), at=_swin_at)}
    ),
    Case(
        "mask2former",
        "mask2former",
        "Mask2FormerModel",
        {
            "encoder": _M2F_BACKBONE,
            "decoder": Exp(sep(_M2F + "self_attn.q_proj.bias", _M2F + "self_attn.k_proj.bias")),
            "cross": Exp(blocks(_M2F + "cross_attn.in_proj_bias"), None, None),
        },
    ),
    Case(
        "mask2former-pre_norm",
        "mask2former",
        "Mask2FormerModel",
        {
            "encoder": _M2F_BACKBONE,
            "decoder": Exp(
                sep(_M2F + "self_attn.q_proj.bias", _M2F + "self_attn.k_proj.bias"),
                _M2F + "self_attn_layer_norm.weight",
            ),
            "cross": Exp(blocks(_M2F + "cross_attn.in_proj_bias"), _M2F + "cross_attn_layer_norm.weight", None),
        },
        over=dict(pre_norm=True),
    ),
    Case("bart", "bart", "BartForConditionalGeneration", _bart_like("model.", False)),
    Case("mbart", "mbart", "MBartForConditionalGeneration", _bart_like("model.", True)),
    Case("speech_to_text", "speech_to_text", "Speech2TextForConditionalGeneration", _bart_like("model.", True)),
    Case("detr", "detr", "DetrForObjectDetection", _bart_like("model.", False)),
    Case(
        "speecht5",
        "speecht5",
        "SpeechT5Model",
        _bart_like("", False, "attention", "encoder.wrapped_encoder.layers", "decoder.wrapped_decoder.layers"),
    ),
    Case(
        "wav2vec2-stable_layer_norm",
        "wav2vec2",
        "Wav2Vec2ForCTC",
        {
            "encoder": Exp(
                sep(_WAV + "attention.q_proj.bias", _WAV + "attention.k_proj.bias"), _WAV + "layer_norm.weight"
            )
        },
        over=dict(do_stable_layer_norm=True),
    ),
    Case(
        "wav2vec2-post_norm",
        "wav2vec2",
        "Wav2Vec2ForCTC",
        {"encoder": Exp(sep(_WAV + "attention.q_proj.bias", _WAV + "attention.k_proj.bias"))},
    ),
    *(
        Case(
            f"{mt}-stable_layer_norm",
            mt,
            cls,
            {
                "encoder": Exp(
                    sep("encoder.layers.{i}.attention.q_proj.bias", "encoder.layers.{i}.attention.k_proj.bias"),
                    "encoder.layers.{i}.layer_norm.weight",
                )
            },
            over=dict(do_stable_layer_norm=True),
        )
        for mt, cls in (("hubert", "HubertModel"), ("wavlm", "WavLMModel"))
    ),
    Case(
        "sam",
        "sam",
        "SamModel",
        {
            "encoder": Exp(
                blocks("vision_encoder.layers.{i}.attn.qkv.bias"), "vision_encoder.layers.{i}.layer_norm1.weight"
            ),
            "decoder": Exp(
                sep(
                    "mask_decoder.transformer.layers.{i}.self_attn.q_proj.bias",
                    "mask_decoder.transformer.layers.{i}.self_attn.k_proj.bias",
                )
            ),
        },
    ),
    Case(
        "git",
        "git",
        "GitForCausalLM",
        {
            "encoder": Exp(
                sep(
                    "git.image_encoder.vision_model.encoder.layers.{i}.self_attn.q_proj.bias",
                    "git.image_encoder.vision_model.encoder.layers.{i}.self_attn.k_proj.bias",
                ),
                "git.image_encoder.vision_model.encoder.layers.{i}.layer_norm1.weight",
            ),
            "decoder": Exp(
                sep("git.encoder.layer.{i}.attention.self.query.bias", "git.encoder.layer.{i}.attention.self.key.bias")
            ),
        },
    ),
    Case(
        "albert",
        "albert",
        "AlbertForMaskedLM",
        {
            "encoder": Exp(
                sep(
                    "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.bias",
                    "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.key.bias",
                )
            )
        },
    ),
    Case(
        "distilbert",
        "distilbert",
        "DistilBertForMaskedLM",
        {
            "encoder": Exp(
                sep(
                    "distilbert.transformer.layer.{i}.attention.q_lin.bias",
                    "distilbert.transformer.layer.{i}.attention.k_lin.bias",
                )
            )
        },
    ),
    Case(
        "deberta",
        "deberta",
        "DebertaForMaskedLM",
        {"encoder": Exp(sep("deberta.encoder.layer.{i}.attention.self.q_bias", None))},  # in_proj has no bias
    ),
    Case(
        "deberta-v2",
        "deberta-v2",
        "DebertaV2Model",
        {
            "encoder": Exp(
                sep(
                    "encoder.layer.{i}.attention.self.query_proj.bias", "encoder.layer.{i}.attention.self.key_proj.bias"
                )
            )
        },
    ),
]


ROTARY = ("llama", "mistral", "mixtral", "phi", "phi3", "gptj", "gpt_neox", "modernbert")  # mobilellm: built as llama


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_biases_and_gains_are_the_saved_tensors(case: Case, tmp_path):
    folder = tmp_path / "m"
    if case.build is not None:
        case.build(folder)
    else:
        _save(_randomise(_model(case.model_type, case.cls, **case.over)), folder, case.config_edit)
    ckpt = open_checkpoint(str(folder))
    assert ckpt.model_type == (case.config_edit or {}).get("model_type", case.model_type)
    names = set(ckpt.store.names())
    found = list(model_blocks(ckpt)[1])
    assert {b.stack for b in found} == set(case.expect)
    for b in found:
        exp = case.expect[b.stack]
        fields = exp.at(b.layer) if exp.at else {"i": b.layer}

        def get(template, fields=fields):
            if template is None:
                return None
            name = template.format(**fields)
            assert name in names, f"{case.id}: the test names {name}, which the checkpoint lacks"
            return ckpt.store.get(name)

        where = f"{case.id} {b.stack} {b.layer}"
        q_bias, k_bias = _expected_biases(exp.bias, b, get)
        q_gain = get(exp.q_gain)
        k_gain = q_gain if exp.k_gain == "same" else get(exp.k_gain)
        for what, want in dict(q_bias=q_bias, k_bias=k_bias, q_gain=q_gain, k_gain=k_gain).items():
            got = getattr(b, what)
            if want is None:
                assert got is None, f"{where}: {what} should be None"
            else:
                assert got is not None and torch.equal(got, want), f"{where}: {what} is not the saved tensor"
        if b.stack != "cross" and q_gain is not None:
            assert b.k_gain is b.q_gain  # self-attention: one norm feeds both
        rotary = case.model_type in ROTARY or (case.model_type == "mllama" and b.stack == "decoder")
        assert (b.rope is not None) == rotary, f"{where}: rope {b.rope}"


# ------------------------------------------------------------------------- CTranslate2 Whisper


def _ct2_string(s: str) -> bytes:
    raw = s.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def _write_ct2(path: Path, variables: dict[str, np.ndarray]) -> None:
    """A CTranslate2 model.bin (binary version 6, WhisperSpec revision 3), float32/int16 only."""
    out = [struct.pack("<I", 6), _ct2_string("WhisperSpec"), struct.pack("<II", 3, len(variables))]
    for name, a in variables.items():
        a = np.ascontiguousarray(a)
        dtype = {np.dtype(np.float32): 0, np.dtype(np.int16): 2}[a.dtype]
        out += [_ct2_string(name), struct.pack("<B", a.ndim), struct.pack(f"<{a.ndim}I", *a.shape)]
        out += [struct.pack("<BI", dtype, a.nbytes), a.tobytes()]
    out.append(struct.pack("<I", 0))
    path.write_bytes(b"".join(out))


def test_ctranslate2_whisper_biases_and_gains(tmp_path):
    d, heads = 8, 2
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    v = {"encoder/conv1/weight": r(d, 5, 3), "encoder/num_heads": np.array(heads, np.int16)}
    v["decoder/num_heads"] = np.array(heads, np.int16)
    v["encoder/layer_norm/gamma"] = r(d)
    for stack in ("encoder", "decoder"):
        for l in range(2):
            base = f"{stack}/layer_{l}/self_attention/"
            v |= {
                base + "linear_0/weight": r(3 * d, d),
                base + "linear_0/bias": r(3 * d),
                base + "layer_norm/gamma": r(d),
            }
    for l in range(2):
        base = f"decoder/layer_{l}/attention/"
        v |= {base + "linear_0/weight": r(d, d), base + "linear_0/bias": r(d), base + "layer_norm/gamma": r(d)}
        v |= {base + "linear_1/weight": r(2 * d, d), base + "linear_1/bias": r(2 * d)}
    (tmp_path / "ct2").mkdir()
    _write_ct2(tmp_path / "ct2" / "model.bin", v)
    found = list(model_blocks(open_checkpoint(str(tmp_path / "ct2")))[1])
    assert [(b.stack, b.layer) for b in found] == [(s, l) for s in ("encoder", "decoder", "cross") for l in range(2)]
    k = d // heads
    for b in found:
        src = "encoder" if b.stack == "encoder" else "decoder"
        att = f"{src}/layer_{b.layer}/" + ("attention/" if b.stack == "cross" else "self_attention/")
        bias = v[att + "linear_0/bias"]
        np.testing.assert_array_equal(b.q_bias.numpy(), bias[:d].reshape(heads, k))  # q rows of the fused bias
        assert b.k_bias is None  # Whisper's key projection has no bias (the CT2 slice is 0)
        np.testing.assert_array_equal(b.q_gain.numpy(), v[att + "layer_norm/gamma"])
        want_k = v["encoder/layer_norm/gamma"] if b.stack == "cross" else v[att + "layer_norm/gamma"]
        np.testing.assert_array_equal(b.k_gain.numpy(), want_k)


# ------------------------------------------------------------- streaming: lazy, once per model


def test_with_extras_is_lazy_and_keeps_the_blocks(tmp_path):
    folder = _save(_randomise(_model("gpt_neox", "GPTNeoXForCausalLM")), tmp_path / "m")
    ckpt = open_checkpoint(str(folder))
    plain = list(model_blocks(ckpt)[1])
    pulled = []

    def source():
        for b in plain:
            pulled.append(b.layer)
            yield b

    stream = with_extras(ckpt, source(), get_record(ckpt.model_type))
    first = next(stream)
    assert pulled == [0]  # one block read at a time, never ahead
    rest = list(stream)
    assert pulled == [0, 1]
    for a, b in zip(plain, [first, *rest]):
        assert (a.stack, a.layer) == (b.stack, b.layer) and a.q is b.q and a.k is b.k
    assert first.rope is rest[0].rope  # computed once per model


def test_what_the_adapter_set_is_kept(tmp_path):
    folder = _save(_randomise(_model("gpt_neox", "GPTNeoXForCausalLM")), tmp_path / "m")
    ckpt = open_checkpoint(str(folder))
    plain = list(model_blocks(ckpt)[1])
    mine = torch.zeros_like(plain[0].q_bias)
    set_by_adapter = (
        dataclasses.replace(b, q_bias=mine, k_bias=None, q_gain=None, k_gain=None, rope=None) for b in plain
    )
    for b, full in zip(with_extras(ckpt, set_by_adapter, get_record(ckpt.model_type)), plain):
        assert b.q_bias is mine and torch.equal(b.k_bias, full.k_bias) and b.rope == full.rope


def _default_freqs(theta: float, rotary_dim: int) -> torch.Tensor:
    return torch.tensor([theta ** (-2 * p / rotary_dim) for p in range(rotary_dim // 2)], dtype=F64)


@pytest.mark.parametrize(
    "case_id, theta, rotary_dim, context",
    [
        ("mistral", 10000.0, 8, 64),
        ("mixtral", 1e6, 8, 131072),
        ("mobilellm", 10000.0, 8, 64),
        ("phi3", 10000.0, 8, 4096),
    ],
)
def test_rope_of_llama_like_families(case_id, theta, rotary_dim, context, tmp_path):
    case = next(c for c in CASES if c.id == case_id)
    _save(_model(case.model_type, case.cls, **case.over), tmp_path / "m", case.config_edit)
    found = _blocks(tmp_path / "m")
    rope = found[0].rope
    assert all(b.rope is rope for b in found)
    assert rope.layout == "half" and rope.context == context
    torch.testing.assert_close(
        torch.tensor(rope.inv_freq, dtype=F64), _default_freqs(theta, rotary_dim), rtol=1e-6, atol=0
    )


def test_rope_of_modernbert_global_and_local_layers(tmp_path):
    # a ModernBERT-base style config.json (global/local thetas, no layer_types): layer 0 global
    folder = _save(_model("modernbert", "ModernBertForMaskedLM"), tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    for key in ("layer_types", "rope_parameters"):
        cfg.pop(key, None)
    cfg |= dict(global_rope_theta=160000.0, local_rope_theta=500.0, global_attn_every_n_layers=3)
    (folder / "config.json").write_text(json.dumps(cfg))
    found = _blocks(folder)
    assert [b.layer for b in found] == [0, 1, 2]
    for b in found:
        theta = 160000.0 if b.layer % 3 == 0 else 500.0
        torch.testing.assert_close(
            torch.tensor(b.rope.inv_freq, dtype=F64), _default_freqs(theta, 8), rtol=1e-6, atol=0
        )
        assert b.rope.layout == "half" and b.rope.context == cfg["max_position_embeddings"]
    assert found[1].rope is found[2].rope and found[0].rope != found[1].rope


def test_rope_of_mllama_text_layers_only(tmp_path):
    found = _blocks(_save(_model("mllama", "MllamaForConditionalGeneration"), tmp_path / "m"))
    assert all(b.rope is None for b in found if b.stack == "encoder")
    text = [b for b in found if b.stack == "decoder"]
    assert [b.layer for b in text] == [0, 2]  # layer 1 is a cross-attention layer
    torch.testing.assert_close(
        torch.tensor(text[0].rope.inv_freq, dtype=F64), _default_freqs(500000.0, 8), rtol=1e-6, atol=0
    )


# ------------------------------------------------------------------------ 2. logits: rotary


def _heads_of(x: torch.Tensor, block: AttentionBlock, gains: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(x Q_h + b_q, x K_kv(h) + b_k) per query head, [B, H, T, k] in float64; gains: x is the
    normalised input before the gain, scaled here by q_gain / k_gain."""
    x = x.to(F64)
    xq = x * block.q_gain.to(F64) if gains else x
    xk = x * block.k_gain.to(F64) if gains else x
    q = torch.einsum("btd,hdk->bhtk", xq, block.q.to(F64))
    k = torch.einsum("btd,hdk->bhtk", xk, block.k_per_query_head().to(F64))
    if block.q_bias is not None:
        q = q + block.q_bias.to(F64)[None, :, None]
    if block.k_bias is not None:
        k = k + block.k_bias.repeat_interleave(block.group_size, 0).to(F64)[None, :, None]
    return q, k


def _rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """Worst head's max |got - want| / max |want| over the causally open scores (j <= i)."""
    t = got.shape[-1]
    open_ = torch.ones(t, t, dtype=torch.bool).tril()
    diff = (got - want).abs()[..., open_].amax(dim=(0, 2))
    size = want.abs()[..., open_].amax(dim=(0, 2))
    return float((diff / size).max())


def _observe(model, projections: list[torch.nn.Module], attentions: list[torch.nn.Module], ids):
    """x at each q projection's input and the scores of each attention module's softmax."""
    xs: list[torch.Tensor] = []
    handles = [p.register_forward_pre_hook(lambda m, args: xs.append(args[0].detach().clone())) for p in projections]
    try:
        with capture_many(attentions) as calls:
            model(input_ids=ids)
    finally:
        for h in handles:
            h.remove()
    scores = []
    for per_module in calls:
        (call,) = per_module
        (s,) = [t for t in call.softmax_inputs if t.ndim == 4]
        scores.append(s.to(F64))
    assert len(xs) == len(attentions)
    return xs, scores


B, T = 2, 12


@dataclass
class RopeCase:
    id: str
    model_type: str
    cls: str
    over: dict
    modules: object  # model -> (q projection per layer, attention module per layer)
    wrong: object  # Rope -> a wrong Rope that must fail (layout, frequencies or rotary dim)


def _llama_modules(m):
    return [la.self_attn.q_proj for la in m.model.layers], [la.self_attn for la in m.model.layers]


_BIG = dict(hidden_size=64, num_attention_heads=4, intermediate_size=37, vocab_size=99, num_hidden_layers=2)
_LLAMA3 = dict(
    rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16
)
ROPE_CASES = [
    RopeCase(
        "llama-gqa-bias",
        "llama",
        "LlamaForCausalLM",
        dict(_BIG, num_key_value_heads=2, attention_bias=True),
        _llama_modules,
        lambda r: Rope(r.inv_freq, "interleaved", r.context),
    ),
    RopeCase(
        "llama-llama3_scaling",
        "llama",
        "LlamaForCausalLM",
        dict(_BIG, num_key_value_heads=2, rope_scaling=dict(_LLAMA3, rope_theta=10000.0)),
        _llama_modules,
        lambda r: Rope(tuple(_default_freqs(10000.0, 16).tolist()), r.layout, r.context),  # unscaled
    ),
    RopeCase(
        "gptj-interleaved-rotary_dim",
        "gptj",
        "GPTJForCausalLM",
        dict(vocab_size=99, n_embd=64, n_head=4, n_layer=2, rotary_dim=8, n_positions=32),
        lambda m: ([h.attn.q_proj for h in m.transformer.h], [h.attn for h in m.transformer.h]),
        lambda r: Rope(r.inv_freq, "half", r.context),
    ),
    RopeCase(
        "gpt_neox-rotary_pct",
        "gpt_neox",
        "GPTNeoXForCausalLM",
        dict(_BIG, rotary_pct=0.25, max_position_embeddings=64),
        lambda m: (
            [la.attention.query_key_value for la in m.gpt_neox.layers],
            [la.attention for la in m.gpt_neox.layers],
        ),
        lambda r: Rope(tuple(_default_freqs(10000.0, 16).tolist()), r.layout, r.context),  # the whole head
    ),
    RopeCase(
        "phi-partial_rotary_factor",
        "phi",
        "PhiForCausalLM",
        dict(_BIG, partial_rotary_factor=0.5),
        _llama_modules,
        lambda r: Rope(tuple(_default_freqs(10000.0, 16).tolist()), r.layout, r.context),  # the whole head
    ),
]


@pytest.mark.parametrize("case", ROPE_CASES, ids=[c.id for c in ROPE_CASES])
def test_rope_logits_match_the_model(case: RopeCase, tmp_path):
    model = _randomise(_model(case.model_type, case.cls, **case.over))
    _save(model, tmp_path / "m")
    found = _blocks(tmp_path / "m")
    assert [b.stack for b in found] == ["decoder", "decoder"] and found[0].rope is not None
    assert found[0].rope.rotary_dim <= found[0].q.shape[2]
    if case.id == "llama-llama3_scaling":  # the scaling changed frequencies
        assert not torch.allclose(torch.tensor(found[0].rope.inv_freq, dtype=F64), _default_freqs(10000.0, 16))
    model = model.to(F64)
    ids = torch.randint(3, 99, (B, T), generator=torch.Generator().manual_seed(1))
    xs, scores = _observe(model, *case.modules(model), ids)
    for b, x, got in zip(found, xs, scores):
        q, k = _heads_of(x, b)
        scale = 1 / math.sqrt(b.q.shape[2])
        err = _rel_error(got, scale * rotated_scores(q, k, b.rope))
        assert err < 1e-4, f"{case.id} layer {b.layer}: relative error {err:.2e}"
        wrong = _rel_error(got, scale * rotated_scores(q, k, case.wrong(b.rope)))
        assert wrong > 1e-2, f"{case.id}: a wrong rope ({case.wrong(b.rope)}) fits too ({wrong:.2e})"


# --------------------------------------------------------------- 2. logits: gains and biases


def test_gpt2_gains_and_biases_logits(tmp_path):
    model = _randomise(_model("gpt2", "GPT2LMHeadModel"))
    with torch.no_grad():
        for h in model.transformer.h:
            h.ln_1.bias.zero_()  # the LayerNorm shift is not part of the block
    _save(model, tmp_path / "m")
    found = _blocks(tmp_path / "m")
    assert all(b.q_gain is not None and b.q_bias is not None and b.k_bias is not None for b in found)
    model = model.to(F64)
    ids = torch.randint(3, 128, (B, T), generator=torch.Generator().manual_seed(1))
    lns = [h.ln_1 for h in model.transformer.h]
    inputs, scores = _observe(model, lns, [h.attn for h in model.transformer.h], ids)
    for b, h, got, ln in zip(found, inputs, scores, lns):
        h = h.to(F64)
        x_hat = (h - h.mean(-1, keepdim=True)) / (h.var(-1, unbiased=False, keepdim=True) + ln.eps).sqrt()
        scale = 1 / math.sqrt(b.q.shape[2])
        q, k = _heads_of(x_hat, b, gains=True)
        err = _rel_error(got, scale * q @ k.transpose(-1, -2))
        assert err < 1e-4, f"gpt2 layer {b.layer}: relative error {err:.2e}"
        q0, k0 = _heads_of(x_hat * b.q_gain.to(F64), AttentionBlock(b.stack, b.layer, b.q, b.k))
        assert _rel_error(got, scale * q0 @ k0.transpose(-1, -2)) > 1e-2  # the biases matter
        q1, k1 = _heads_of(x_hat, AttentionBlock(b.stack, b.layer, b.q, b.k, b.q_bias, b.k_bias))
        assert _rel_error(got, scale * q1 @ k1.transpose(-1, -2)) > 1e-2  # the gains matter
