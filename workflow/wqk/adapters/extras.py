"""What acts on a block's form besides Q and K: the q/k biases, the pre-norm gains and the
rotary embedding, filled into the blocks an adapter yields (`with_extras`).

One table, `SITES`: model_type -> stack -> the places (`Site`s) where that stack's tensors
live, tried in order. A Site names, relative to the first of its prefixes under which the
q weight the adapter reads (`probe`) exists for the block's layer:
  q_bias / k_bias   separate projection biases, split per head as the weights are
                    (nn.Linear rows [H*k] -> [H, k]); fused="kv": k_bias is [k | v] (GPT-2 cross);
  qkv_bias          one bias of a fused q/k/v projection, split with the weight's layout
                    (common.fused_rows: "blocks" [q | k | v], "per_head" [q_h k_h v_h]);
  norm              the gain of the norm whose output feeds the queries (self-attention: and
                    the keys), read only when `pre_norm` (a bool, or a test of the config);
  k_norm            cross-attention: the gain of the encoder's final norm, whose output the
                    keys read (pre-norm encoder-decoders); None when something else sits
                    between (k_norm_unless: a tensor that marks it, e.g. a projection).
Templates take {i} (the layer number in the names) or the fields a Site's `fields` factory
gives per block layer (ALBERT's and Swin's enumerated (group, layer) / (stage, block), the
Mllama vision tower's local then global layers). A template starting with "^" is a name from
the root, not under the prefix (CTranslate2 names, MusicGen's text encoder). A tensor that
is not there gives None, never an error.

`ROPE`: model_type -> the stack with rotary attention, the pairing of its rows and where
transformers computes its frequencies (the model's own RotaryEmbedding on the config, or
GPT-J's fixed formula); computed once per model (per layer type for ModernBERT's
global/local layers), importing transformers only for these models. The frequencies are
those the rotary module holds after construction: for "dynamic" and "longrope" scaling,
the ones used for sequences up to original_max_position_embeddings (transformers swaps in
others for longer ones), and cos/sin factors (yarn, longrope attention_factor) are not
part of Rope.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from ..blocks import AttentionBlock, Rope
from ..checkpoints import Checkpoint
from ..errors import CorruptCheckpoint, MissingTensor
from .common import fused_rows, layer_indices

Fields = Callable[[int], "dict | None"]  # block layer -> template fields (None: not this Site's)


@dataclass(frozen=True)
class Site:
    probe: str
    prefixes: tuple[str, ...] = ("",)
    q_bias: str | None = None
    k_bias: str | None = None
    qkv_bias: str | None = None
    fused: str = "blocks"
    norm: str | None = None
    k_norm: str | None = None
    k_norm_unless: str | None = None
    pre_norm: bool | Callable[[dict], bool] = True
    fields: Callable[[Checkpoint, str], Fields] | None = None


def _attn(base: str, q: str = "q_proj", k: str = "k_proj") -> dict:
    """probe and biases of separate q and k nn.Linear named base + q / base + k."""
    return dict(probe=f"{base}{q}.weight", q_bias=f"{base}{q}.bias", k_bias=f"{base}{k}.bias")


def _enumerated(probe: str, names: tuple[str, ...]) -> Callable[[Checkpoint, str], Fields]:
    """Fields of layers numbered in order of the sorted tuples of numbers that the regex probe
    (groups = names) finds under the prefix, as ALBERT's and Swin's adapters number them."""

    def factory(ckpt: Checkpoint, prefix: str) -> Fields:
        try:
            found = layer_indices(ckpt, re.escape(prefix) + probe)
        except MissingTensor:
            found = []
        return lambda layer: dict(zip(names, found[layer])) if layer < len(found) else None

    return factory


def _mllama_vision(ckpt: Checkpoint, prefix: str) -> Fields:
    """The adapter numbers the local layers, then the global ones after them."""
    rx = r"vision_model\.transformer\.layers\.(\d+)\.self_attn\.q_proj\.weight"
    try:
        n_local = len(layer_indices(ckpt, re.escape(prefix) + rx))
    except MissingTensor:
        n_local = 0
    return lambda layer: (
        dict(part="transformer", i=layer) if layer < n_local else dict(part="global_transformer", i=layer - n_local)
    )


def _modernbert(ckpt: Checkpoint, prefix: str) -> Fields:
    """Layer 0's attn_norm is an Identity: the embeddings' norm feeds its attention."""
    return lambda layer: dict(i=layer, attn_norm=f"layers.{layer}.attn_norm" if layer else "embeddings.norm")


def _config_flag(key: str) -> Callable[[dict], bool]:
    return lambda config: bool(config.get(key, False))


def _bart(
    prefixes, pre_norm, encoder="encoder.layers.{i}.self_attn.", decoder="decoder.", k_norm="encoder.layer_norm.weight"
):
    """BART's layout (bart.py): encoder self_attn, decoder self_attn and encoder_attn, with the
    mBART/Whisper pre-norm names {self_attn,encoder_attn}_layer_norm and the encoder's final norm."""
    enc_norm = encoder.rsplit(".", 2)[0] + ".self_attn_layer_norm.weight"
    dec = decoder + "layers.{i}."
    common = dict(prefixes=tuple(prefixes), pre_norm=pre_norm)
    return {
        "encoder": [Site(**_attn(encoder), norm=enc_norm if pre_norm else None, **common)],
        "decoder": [Site(**_attn(dec + "self_attn."), norm=dec + "self_attn_layer_norm.weight", **common)],
        "cross": [
            Site(**_attn(dec + "encoder_attn."), norm=dec + "encoder_attn_layer_norm.weight", k_norm=k_norm, **common)
        ],
    }


def _t5(base: str = "", prefixes=("", "transformer.", "model.")):
    def block(stack, n, attn):
        return _attn(f"{base}{stack}.block.{{i}}.layer.{n}.{attn}.", "q", "k") | dict(
            norm=f"{base}{stack}.block.{{i}}.layer.{n}.layer_norm.weight", prefixes=prefixes
        )

    return {
        "encoder": [Site(**block("encoder", 0, "SelfAttention"))],
        "decoder": [Site(**block("decoder", 0, "SelfAttention"))],
        "cross": [Site(**block("decoder", 1, "EncDecAttention"), k_norm=f"{base}encoder.final_layer_norm.weight")],
    }


_LLAMA = Site(
    **_attn("layers.{i}.self_attn."),
    prefixes=("model.", "model.language_model.", ""),
    norm="layers.{i}.input_layernorm.weight",
)
_GPT2 = {
    "decoder": [
        Site(
            probe="h.{i}.attn.c_attn.weight",
            qkv_bias="h.{i}.attn.c_attn.bias",  # Conv1D [3d] = [q | k | v], like its weight's columns
            prefixes=("transformer.", "model.", ""),
            norm="h.{i}.ln_1.weight",
        )
    ],
    "cross": [
        Site(
            probe="h.{i}.crossattention.q_attn.weight",
            q_bias="h.{i}.crossattention.q_attn.bias",
            k_bias="h.{i}.crossattention.c_attn.bias",  # [k | v]
            fused="kv",
            prefixes=("transformer.", "model.", ""),
            norm="h.{i}.ln_cross_attn.weight",  # the keys read an outside encoder: no k_norm
        )
    ],
}
_BERT = Site(
    **_attn("encoder.layer.{i}.attention.self.", "query", "key"),
    prefixes=("bert.", "roberta.", "model.", ""),
    pre_norm=False,
)
_BERT_CROSS = dataclasses.replace(_BERT, **_attn("encoder.layer.{i}.crossattention.self.", "query", "key"))
_VIT = _attn("encoder.layer.{i}.attention.attention.", "query", "key") | dict(
    norm="encoder.layer.{i}.layernorm_before.weight"
)
_SWIN_PROBE = r"encoder\.layers\.(\d+)\.blocks\.(\d+)\.attention\.self\.query\.weight"
_SWIN = _attn("encoder.layers.{s}.blocks.{b}.attention.self.", "query", "key") | dict(
    norm="encoder.layers.{s}.blocks.{b}.layernorm_before.weight", fields=_enumerated(_SWIN_PROBE, ("s", "b"))
)
_ALBERT_PROBE = r"encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.attention\.(?:query|key)\.weight"
_M2F = "transformer_module.decoder.layers.{i}."
# MusicGen's cross-attention keys read the T5 text encoder's output, through enc_to_dec_proj
# when the widths differ (then no k_gain: the projection sits between the norm and K).
_MUSICGEN_DEC = _bart(("decoder.model.",), True, k_norm="^text_encoder.encoder.final_layer_norm.weight")
_MUSICGEN_DEC = {
    "decoder": _MUSICGEN_DEC["decoder"],
    "cross": [dataclasses.replace(_MUSICGEN_DEC["cross"][0], k_norm_unless="^enc_to_dec_proj.weight")],
}
_CT2 = "^{stack}/layer_{i}/self_attention/layer_norm/gamma"

# model_type (or "model_type@format" for a non-Hugging Face format) -> stack -> Sites
SITES: dict[str, dict[str, list[Site]]] = {
    **{mt: {"decoder": [_LLAMA]} for mt in ("llama", "mistral", "mixtral", "mobilellm", "phi")},
    "phi3": {
        "decoder": [
            Site(
                probe="layers.{i}.self_attn.qkv_proj.weight",
                qkv_bias="layers.{i}.self_attn.qkv_proj.bias",
                prefixes=("model.", ""),
                norm="layers.{i}.input_layernorm.weight",
            )
        ]
    },
    "gpt2": _GPT2,
    "imagegpt": _GPT2,  # ImageGPTLayerNorm: x / rms(x) * weight, pre-norm
    "openai-gpt": {s: [dataclasses.replace(site, pre_norm=False)] for s, [site] in _GPT2.items()},
    "gpt_neo": {
        "decoder": [Site(**_attn("h.{i}.attn.attention."), prefixes=("transformer.", ""), norm="h.{i}.ln_1.weight")]
    },
    "gptj": {"decoder": [Site(**_attn("h.{i}.attn."), prefixes=("transformer.", ""), norm="h.{i}.ln_1.weight")]},
    "gpt_neox": {
        "decoder": [
            Site(
                probe="layers.{i}.attention.query_key_value.weight",
                qkv_bias="layers.{i}.attention.query_key_value.bias",
                fused="per_head",
                prefixes=("gpt_neox.", "model.", ""),
                norm="layers.{i}.input_layernorm.weight",
            )
        ]
    },
    "t5": _t5(),
    "whisper": _bart(("model.", ""), True),
    # CTranslate2 Whisper: the store maps the HF q/k weights and q biases (HF Whisper has no
    # k bias; CT2's fused k-bias slice is 0); the norms keep their CT2 names.
    "whisper@ctranslate2": {
        "encoder": [
            Site(
                **_attn("encoder.layers.{i}.self_attn."), prefixes=("model.",), norm=_CT2.replace("{stack}", "encoder")
            )
        ],
        "decoder": [
            Site(
                **_attn("decoder.layers.{i}.self_attn."), prefixes=("model.",), norm=_CT2.replace("{stack}", "decoder")
            )
        ],
        "cross": [
            Site(
                **_attn("decoder.layers.{i}.encoder_attn."),
                prefixes=("model.",),
                norm="^decoder/layer_{i}/attention/layer_norm/gamma",
                k_norm="^encoder/layer_norm/gamma",
            )
        ],
    },
    "bart": _bart(("model.", ""), False),
    "mbart": _bart(("model.", ""), True),
    "speech_to_text": _bart(("model.", ""), True),
    "detr": _bart(("model.", ""), False),
    "speecht5": _bart(
        ("speecht5.", ""),
        False,
        encoder="encoder.wrapped_encoder.layers.{i}.attention.",
        decoder="decoder.wrapped_decoder.",
    ),
    "musicgen": {"encoder": _t5("text_encoder.", ("",))["encoder"], **_MUSICGEN_DEC},
    "musicgen_decoder": {
        s: [dataclasses.replace(site, prefixes=("model.", ""), k_norm=None)]
        for s, [site] in _bart(("",), True).items()
        if s != "encoder"
    },
    "vit": {
        "encoder": [
            Site(**_VIT, prefixes=("vit.", "model.", "")),
            Site(  # transformers >= 5 module names (a state_dict saved directly)
                **_attn("layers.{i}.attention."),
                prefixes=("vit.", "model.", ""),
                norm="layers.{i}.layernorm_before.weight",
            ),
        ]
    },
    "deit": {"encoder": [Site(**_VIT, prefixes=("deit.", ""))]},
    "beit": {"encoder": [Site(**_VIT, prefixes=("beit.", ""))]},  # key has no bias
    "data2vec-vision": {"encoder": [Site(**_VIT, prefixes=("data2vec_vision.", ""))]},
    "dinov2": {"encoder": [Site(**_VIT | dict(norm="encoder.layer.{i}.norm1.weight"), prefixes=("dinov2.", ""))]},
    "vit_mae": {
        "encoder": [Site(**_VIT, prefixes=("vit.", ""))],
        "decoder": [
            Site(
                **_attn("{i}.attention.attention.", "query", "key"),
                prefixes=("decoder.decoder_layers.", "decoder.decoder_encoder.layer."),
                norm="{i}.layernorm_before.weight",
            )
        ],
    },
    "swin": {"encoder": [Site(**_SWIN, prefixes=("swin.", ""))]},
    "swinv2": {"encoder": [Site(**_SWIN, prefixes=("swinv2.", "swin.", ""), pre_norm=False)]},  # res-post-norm
    "mask2former": {
        "encoder": [Site(**_SWIN, prefixes=("model.pixel_level_module.encoder.", "pixel_level_module.encoder."))],
        "decoder": [
            Site(
                **_attn(_M2F + "self_attn."),
                prefixes=("model.", ""),
                norm=_M2F + "self_attn_layer_norm.weight",
                pre_norm=_config_flag("pre_norm"),
            )
        ],
        "cross": [  # keys: pixel-decoder features, no norm of their own
            Site(
                probe=_M2F + "cross_attn.in_proj_weight",
                qkv_bias=_M2F + "cross_attn.in_proj_bias",
                prefixes=("model.", ""),
                norm=_M2F + "cross_attn_layer_norm.weight",
                pre_norm=_config_flag("pre_norm"),
            )
        ],
    },
    "sam": {
        "encoder": [
            Site(
                probe="vision_encoder.layers.{i}.attn.qkv.weight",
                qkv_bias="vision_encoder.layers.{i}.attn.qkv.bias",
                prefixes=("", "model."),
                norm="vision_encoder.layers.{i}.layer_norm1.weight",
            )
        ],
        # the two-way transformer normalises after its attentions
        "decoder": [
            Site(**_attn("mask_decoder.transformer.layers.{i}.self_attn."), prefixes=("", "model."), pre_norm=False)
        ],
    },
    "git": {
        "encoder": [  # CLIP image encoder, pre-norm
            Site(
                **_attn("image_encoder.vision_model.encoder.layers.{i}.self_attn."),
                prefixes=("git.", ""),
                norm="image_encoder.vision_model.encoder.layers.{i}.layer_norm1.weight",
            )
        ],
        "decoder": [dataclasses.replace(_BERT, prefixes=("git.", ""))],  # BERT layout, post-norm
    },
    "mllama": {
        "encoder": [
            Site(
                **_attn("vision_model.{part}.layers.{i}.self_attn."),
                prefixes=("", "model."),
                norm="vision_model.{part}.layers.{i}.input_layernorm.weight",
                fields=_mllama_vision,
            )
        ],
        "decoder": [
            dataclasses.replace(_LLAMA, prefixes=("language_model.model.", "model.language_model.", "language_model."))
        ],
    },
    "modernbert": {
        "encoder": [
            Site(
                probe="layers.{i}.attn.Wqkv.weight",
                qkv_bias="layers.{i}.attn.Wqkv.bias",
                prefixes=("model.", ""),
                norm="{attn_norm}.weight",
                fields=_modernbert,
            )
        ]
    },
    **{
        mt: {"encoder": [_BERT], "decoder": [_BERT], "cross": [_BERT_CROSS]}
        for mt in ("bert", "roberta", "xlm-roberta")
    },
    "albert": {
        "encoder": [
            Site(
                **_attn("encoder.albert_layer_groups.{g}.albert_layers.{j}.attention.", "query", "key"),
                prefixes=("albert.", "model.", ""),
                pre_norm=False,
                fields=_enumerated(_ALBERT_PROBE, ("g", "j")),
            )
        ]
    },
    "distilbert": {
        "encoder": [
            Site(
                **_attn("transformer.layer.{i}.attention.", "q_lin", "k_lin"),
                prefixes=("distilbert.", "model.", ""),
                pre_norm=False,
            )
        ]
    },
    "deberta": {  # the in_proj has no bias; q_bias [H*k] is added per head after the split
        "encoder": [
            Site(
                probe="encoder.layer.{i}.attention.self.in_proj.weight",
                q_bias="encoder.layer.{i}.attention.self.q_bias",
                prefixes=("deberta.", ""),
                pre_norm=False,
            )
        ]
    },
    "deberta-v2": {
        "encoder": [
            Site(
                **_attn("encoder.layer.{i}.attention.self.", "query_proj", "key_proj"),
                prefixes=("deberta.", ""),
                pre_norm=False,
            )
        ]
    },
    **{
        mt: {
            "encoder": [
                Site(
                    **_attn("encoder.layers.{i}.attention."),
                    prefixes=(mt.replace("-", "_") + ".", ""),
                    norm="encoder.layers.{i}.layer_norm.weight",  # before attention only in the stable variant
                    pre_norm=_config_flag("do_stable_layer_norm"),
                )
            ]
        }
        for mt in ("hubert", "wavlm", "unispeech-sat", "unispeech", "wav2vec2", "data2vec-audio")
    },
}


@dataclass(frozen=True)
class RopeSite:
    stack: str
    layout: str  # "half" (rotate_half) or "interleaved" (rotate_every_two)
    family: str  # the transformers model_type whose config class reads config.json
    rotary: str | None  # its RotaryEmbedding class (modeling module of family); None: GPT-J's formula
    sub: str | None = None  # sub-config of the rotary stack (Mllama: text_config)


def _rope_site(family: str, cls: str, stack: str = "decoder", **kw) -> RopeSite:
    return RopeSite(stack, "half", family, cls, **kw)


ROPE: dict[str, RopeSite] = {
    "llama": _rope_site("llama", "LlamaRotaryEmbedding"),
    "mobilellm": _rope_site("llama", "LlamaRotaryEmbedding"),  # remote code, Llama's rope
    "mistral": _rope_site("mistral", "MistralRotaryEmbedding"),
    "mixtral": _rope_site("mixtral", "MixtralRotaryEmbedding"),
    "phi": _rope_site("phi", "PhiRotaryEmbedding"),
    "phi3": _rope_site("phi3", "Phi3RotaryEmbedding"),
    "gpt_neox": _rope_site("gpt_neox", "GPTNeoXRotaryEmbedding"),
    "modernbert": _rope_site("modernbert", "ModernBertRotaryEmbedding", "encoder"),
    "mllama": _rope_site("mllama", "MllamaRotaryEmbedding", sub="text_config"),
    "gptj": RopeSite("decoder", "interleaved", "gptj", None),
}


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' config validation warns about token ids of tiny vocabularies and the like."""
    log = logging.getLogger("transformers")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


# families whose unscaled rope is transformers' default formula on head_dim (x partial_rotary_factor)
PLAIN = ("llama", "mistral", "mixtral")


def _default_inv_freq(base: float, dim: int) -> torch.Tensor:
    """transformers' default rope frequencies (float32): base^(-2p/dim) for the pairs p of dim."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _plain_rope(cfg: dict) -> tuple[torch.Tensor, int] | None:
    """(inv_freq, context) of an unscaled Llama-family rope, as transformers' default rope init
    computes it; None when the config has scaling (transformers then)."""
    params = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type")) if scaling else params.get("rope_type", "default")
    heads = cfg.get("num_attention_heads")
    if kind not in (None, "default") or not heads or not cfg.get("hidden_size"):
        return None
    base = float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    dim = int(head_dim * params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    return _default_inv_freq(base, dim), int(cfg.get("max_position_embeddings", 2048))


class _Rope:
    """A model's Rope per layer type, computed on first use and shared by its blocks."""

    def __init__(self, ckpt: Checkpoint, site: RopeSite):
        self.ckpt, self.site = ckpt, site
        self.config = None
        self.rotary = None
        self.ropes: dict[str | None, Rope] = {}

    def _load(self) -> None:
        if self.config is not None:
            return
        import transformers

        site = self.site
        fields = {k: v for k, v in self.ckpt.config.items() if k != "model_type"}
        try:
            with _quiet_transformers():
                config = transformers.AutoConfig.for_model(site.family, **fields)
                self.config = getattr(config, site.sub) if site.sub else config
                if site.rotary is not None:
                    module = importlib.import_module(f"transformers.models.{site.family}.modeling_{site.family}")
                    self.rotary = getattr(module, site.rotary)(self.config)
        except Exception as e:
            raise CorruptCheckpoint(
                f"{self.ckpt.model_id}: transformers {transformers.__version__} cannot compute the rotary "
                f"frequencies of this {self.ckpt.model_type!r} config.json ({type(e).__name__}: {e}); "
                "check config.json or update transformers"
            ) from e

    def __call__(self, block: AttentionBlock) -> Rope | None:
        if block.stack != self.site.stack:
            return None
        key = self._layer_type(block.layer)
        if key not in self.ropes:
            self.ropes[key] = self._rope(key)
        return self.ropes[key]

    def _layer_type(self, layer: int) -> str | None:
        """ModernBERT's "full_attention" / "sliding_attention" (their own thetas); None elsewhere."""
        if self.site.family != "modernbert":
            return None
        self._load()
        layer_types = getattr(self.config, "layer_types", None)
        return layer_types[layer] if layer_types else None

    def _rope(self, layer_type: str | None) -> Rope:
        # an unscaled Llama-family rope by hand: importing transformers takes longer than scoring a small model
        if self.site.family in PLAIN and (plain := _plain_rope(self.ckpt.config)) is not None:
            inv_freq, context = plain
        else:
            self._load()
            inv_freq, context = self._inv_freq(layer_type), self._context()
        return Rope(tuple(float(f) for f in inv_freq.tolist()), self.site.layout, context)

    def _inv_freq(self, layer_type: str | None) -> torch.Tensor:
        if self.rotary is None:  # GPT-J: GPTJRotaryEmbedding's create_sinusoidal_positions, base 10000
            return _default_inv_freq(10000.0, self.config.rotary_dim or self.config.hidden_size)
        name = f"{layer_type}_inv_freq" if layer_type else "inv_freq"
        if not hasattr(self.rotary, name):
            raise CorruptCheckpoint(
                f"{self.ckpt.model_id}: {type(self.rotary).__name__} of the installed transformers has no {name}; "
                "the rotary frequencies need transformers >= 5"
            )
        return getattr(self.rotary, name)

    def _context(self) -> int:
        return int(self.config.max_position_embeddings)  # GPT-J: n_positions, by its attribute_map


class _Extras:
    """Finds each block's Site (its stack's first Site whose probe exists under one of its
    prefixes for the block's layer; the last one found is tried first) and reads the extras."""

    def __init__(self, ckpt: Checkpoint, sites: dict[str, list[Site]]):
        self.ckpt, self.store, self.sites = ckpt, ckpt.store, sites
        self.fields: dict[tuple[int, str], Fields] = {}
        self.last: dict[str, tuple[Site, str]] = {}

    def _layer_fields(self, site: Site, prefix: str, layer: int) -> dict | None:
        if site.fields is None:
            return {"i": layer}
        key = (id(site), prefix)
        if key not in self.fields:
            self.fields[key] = site.fields(self.ckpt, prefix)
        return self.fields[key](layer)

    def _name(self, template: str, prefix: str, fields: dict) -> str:
        return template[1:].format(**fields) if template.startswith("^") else prefix + template.format(**fields)

    def _find(self, block: AttentionBlock) -> tuple[Site, str, dict] | None:
        sites = self.sites.get(block.stack, ())
        tried = [self.last[block.stack]] if block.stack in self.last else []
        for site, prefix in tried + [(s, p) for s in sites for p in s.prefixes]:
            fields = self._layer_fields(site, prefix, block.layer)
            if fields is not None and self._name(site.probe, prefix, fields) in self.store:
                self.last[block.stack] = (site, prefix)
                return site, prefix, fields
        return None

    def _get(self, name: str) -> torch.Tensor | None:
        return self.store.get(name) if name in self.store else None

    def __call__(self, block: AttentionBlock) -> dict:
        found = self._find(block)
        if found is None:
            return {}
        site, prefix, fields = found
        name = lambda t: self._name(t, prefix, fields) if t else None  # noqa: E731
        out = self._biases(block, site, name)
        pre_norm = site.pre_norm(self.ckpt.config) if callable(site.pre_norm) else site.pre_norm
        if pre_norm and site.norm:
            out["q_gain"] = self._gain(name(site.norm), block.q.shape[1])
            if block.stack != "cross":
                out["k_gain"] = out["q_gain"]
            elif site.k_norm and not (site.k_norm_unless and name(site.k_norm_unless) in self.store):
                out["k_gain"] = self._gain(name(site.k_norm), block.k.shape[1])
        return {k: v for k, v in out.items() if v is not None}

    def _gain(self, name: str, d: int) -> torch.Tensor | None:
        g = self._get(name)
        if g is not None and tuple(g.shape) != (d,):
            raise CorruptCheckpoint(f"{self.ckpt.model_id}: norm gain {name} is {tuple(g.shape)}, expected ({d},)")
        return g

    def _biases(self, block: AttentionBlock, site: Site, name) -> dict:
        h, h_kv, k = block.n_heads, block.n_kv_heads, block.q.shape[2]
        if site.qkv_bias:
            b = self._get(name(site.qkv_bias))
            if b is None:
                return {}
            if b.ndim != 1 or b.numel() != (h + 2 * h_kv) * k:
                raise CorruptCheckpoint(
                    f"{self.ckpt.model_id}: {name(site.qkv_bias)} is {tuple(b.shape)}, "
                    f"not q, k, v of {h} + 2 x {h_kv} heads of {k}"
                )
            bq, bk = (t.flatten() for t in fused_rows(b[:, None], h, h_kv, site.fused))
            where_q = where_k = name(site.qkv_bias)
        else:
            bq = self._get(name(site.q_bias)) if site.q_bias else None
            bk = self._get(name(site.k_bias)) if site.k_bias else None
            if bk is not None and site.fused == "kv":  # [k | v]
                bk = bk[: bk.shape[0] // 2]
            where_q, where_k = name(site.q_bias), name(site.k_bias)
        q_bias, k_bias = self._heads(bq, h, k, where_q), self._heads(bk, h_kv, k, where_k)
        if q_bias is not None and block.heads is not None:  # q's rows in the block's head order
            q_bias = q_bias[list(block.heads)]
        return {"q_bias": q_bias, "k_bias": k_bias}

    def _heads(self, b: torch.Tensor | None, n: int, k: int, name: str = "") -> torch.Tensor | None:
        if b is None:
            return None
        if b.ndim != 1 or b.numel() != n * k:
            raise CorruptCheckpoint(f"{self.ckpt.model_id}: bias {name} is {tuple(b.shape)}, expected ({n * k},)")
        return b.reshape(n, k)


def sites_of(ckpt: Checkpoint) -> dict[str, list[Site]]:
    """The Sites of a checkpoint's model_type in its format ({} when none are declared)."""
    fmt = ckpt.config.get("_source_format")
    return SITES.get(f"{ckpt.model_type}@{fmt}") or SITES.get(ckpt.model_type, {})


def with_extras(ckpt: Checkpoint, blocks: Iterator[AttentionBlock]) -> Iterator[AttentionBlock]:
    """The blocks, in order and one at a time, with q_bias, k_bias, q_gain, k_gain and rope
    filled in where the model has them (dataclasses.replace; what the adapter set is kept,
    what the model lacks stays None)."""
    sites = sites_of(ckpt)
    extras = _Extras(ckpt, sites) if sites else None
    rope = _Rope(ckpt, ROPE[ckpt.model_type]) if ckpt.model_type in ROPE else None
    for block in blocks:
        changes = extras(block) if extras is not None else {}
        if rope is not None and block.rope is None and (r := rope(block)) is not None:
            changes["rope"] = r
        changes = {k: v for k, v in changes.items() if getattr(block, k) is None}  # what an adapter set stays
        yield dataclasses.replace(block, **changes) if changes else block
