"""BLOOM, MPT and Falcon: fused q/k/v decoders with ALiBi (Falcon: ALiBi or rotary).

ALiBi adds slope_h * (key position) to the logits of head h: a bias by position that is not
part of the bilinear form (like T5's relative bias); nothing of it is read.

BLOOM: [transformer.]h.{i}.self_attention.query_key_value.{weight,bias} [3d, d], rows
[q_h k_h v_h] head after head ("per_head"); pre-norm input_layernorm (bigscience/bloom*
checkpoints were saved from BloomModel: no prefix).

MPT: [transformer.]blocks.{i}.attn.Wqkv.weight [3d, d] = [q | k | v] ("blocks"), no biases;
pre-norm norm_1, a LayerNorm without bias (centred: the derived record found it). transformers' MptAttention is multi-head only and has no qk_ln: MosaicML's
own code (remote code, same names) also offers a LayerNorm on q and k (attn_config.qk_ln)
and grouped/multi-query attention (attn_config.attn_type); such checkpoints are refused
with that reason. attn_config.clip_qkv clamps q, k, v: the form holds where no entry clips.

Falcon: [transformer.]h.{i}.self_attention.query_key_value.weight, three layouts by config:
- new_decoder_architecture (falcon-40b, -180b, -11B): per key group g, rows
  [q_{g,1..r} k_g v_g] ("grouped"), num_kv_heads groups; its pre-norm is ln_attn where
  the layer has two norms (num_ln_in_parallel_attn 2, the default), else input_layernorm;
- multi_query (falcon-7b): [q | k | v] with ONE key head ("blocks", multi-query);
- neither (falcon-rw-*): [q_h k_h v_h] per head ("per_head").
Rotary (rotate_half) unless config.alibi.
"""

from __future__ import annotations

from ..errors import UnsupportedModelType
from . import AR, Attention, Record, Rotary, Tiny, register
from .sizes import TEXT_32

_PREFIXES = ("transformer.", "")
_FALCON_HEADS = dict(heads=("num_attention_heads", "n_head"), kv_heads=("num_kv_heads", "n_head_kv"))
_QKV = "h.{i}.self_attention.query_key_value.weight"

register(
    Record(
        "bloom",
        (
            Attention(
                "decoder",
                _QKV,
                fused="per_head",
                prefixes=_PREFIXES,
                heads=("n_head", "num_attention_heads"),
                norm="h.{i}.input_layernorm.weight",
            ),
        ),
        dict(decoder=AR),
        tiny=Tiny("BloomForCausalLM", dict(vocab_size=99, hidden_size=32, n_head=4, n_layer=2)),
    )
)


def _mpt_scorable(config: dict) -> bool:
    """True for multi-head MPT without QK LayerNorm; raises for the variants not scored."""
    attn = config.get("attn_config") or {}
    if attn.get("qk_ln") or attn.get("qk_gn"):
        raise UnsupportedModelType(
            "mpt with attn_config.qk_ln (or qk_gn): a LayerNorm on q and on k between x and the logits (mean "
            "removed, per-token scale) makes the logits not a bilinear form of the token vectors; not scored"
        )
    if attn.get("attn_type", "multihead_attention") != "multihead_attention":
        raise UnsupportedModelType(
            f"mpt with attn_config.attn_type {attn['attn_type']!r}: only multihead_attention (the Wqkv layout of "
            "transformers' MptAttention) is read; add a record Attention for its kv_n_heads layout"
        )
    return True


register(
    Record(
        "mpt",
        (
            Attention(
                "decoder",
                "blocks.{i}.attn.Wqkv.weight",
                fused="blocks",
                prefixes=_PREFIXES,
                heads=("n_heads",),
                bias=None,
                norm="blocks.{i}.norm_1.weight",
                norm_centred=True,  # a LayerNorm whose bias MptBlock removes: centred all the same
                only_if=_mpt_scorable,
            ),
        ),
        dict(decoder=AR),
        tiny=Tiny(
            "MptForCausalLM", dict(vocab_size=99, d_model=32, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64)
        ),
    )
)


def _new_arch(config: dict) -> bool:
    return bool(config.get("new_decoder_architecture"))


def _two_norms(config: dict) -> bool:
    return _new_arch(config) and config.get("num_ln_in_parallel_attn") in (None, 2)


def _one_norm(config: dict) -> bool:
    return _new_arch(config) and not _two_norms(config)


def _multi_query(config: dict) -> bool:
    return not _new_arch(config) and bool(config.get("multi_query", True))  # FalconConfig's default


def _per_head(config: dict) -> bool:
    return not _new_arch(config) and not _multi_query(config)


def _falcon(only_if, fused: str, norm: str = "input_layernorm", **kw) -> Attention:
    return Attention(
        "decoder",
        _QKV,
        fused=fused,
        prefixes=_PREFIXES,
        norm=f"h.{{i}}.{norm}.weight",
        only_if=only_if,
        **{**_FALCON_HEADS, **kw},
    )


register(
    Record(
        "falcon",
        (
            _falcon(_two_norms, "grouped", "ln_attn"),
            _falcon(_one_norm, "grouped"),
            _falcon(_multi_query, "blocks", multi_query=True),
            _falcon(_per_head, "per_head", kv_heads=()),  # [q_h k_h v_h]: as many key heads as query heads
        ),
        dict(decoder=AR),
        rope=Rotary("falcon", "FalconRotaryEmbedding", only_if=lambda config: not config.get("alibi")),
        tiny=Tiny(
            "FalconForCausalLM",
            dict(
                TEXT_32, num_hidden_layers=2, new_decoder_architecture=True, num_kv_heads=2, max_position_embeddings=64
            ),
        ),
    )
)
