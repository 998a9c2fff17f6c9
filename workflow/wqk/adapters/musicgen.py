"""MusicGen: a T5 text encoder (text_encoder.encoder.block.{i}.layer.0.SelfAttention.{q,k})
and a BART-layout pre-norm decoder over audio codes (decoder.model.decoder.layers.{i}...). A
decoder saved on its own is model_type "musicgen_decoder" ([model.]decoder.layers.{i}...).

The decoder stack is self_attn; encoder_attn is cross-attention (queries from audio codes,
keys from the T5 text encoder's final norm, through enc_to_dec_proj when the widths differ:
then no k gain) and goes to the "cross" stack. The authors' "decoder" read encoder_attn:
their method files the cross-attention as "decoder" and drops the self-attention.
"""

from __future__ import annotations

import dataclasses

from . import AR, BI, Authors, Record, Tiny, register
from .bart import bart_stacks
from .t5 import t5_stacks

AUTHORS = Authors(stacks={"decoder": None, "cross": "decoder"})
_DECODER = dict(
    vocab_size=16,
    hidden_size=32,
    num_attention_heads=4,
    num_hidden_layers=3,
    ffn_dim=37,
    num_codebooks=2,
    max_position_embeddings=32,
)
_FULL = bart_stacks(("decoder.model.",), k_norm="^text_encoder.encoder.final_layer_norm.weight")
_ALONE = bart_stacks(k_norm=None)

register(
    Record(
        "musicgen",
        (
            t5_stacks("text_encoder.", ("",), heads=("text_encoder.num_heads",))["encoder"],
            dataclasses.replace(_FULL["decoder"], heads=("decoder.num_attention_heads",)),
            dataclasses.replace(
                _FULL["cross"], heads=("decoder.num_attention_heads",), k_norm_unless="^enc_to_dec_proj.weight"
            ),
        ),
        dict(encoder=BI, decoder=AR),
        authors=AUTHORS,
        tiny=Tiny(
            "MusicgenForConditionalGeneration",
            dict(
                text_encoder=dict(
                    model_type="t5", vocab_size=99, d_model=32, d_kv=8, num_heads=4, num_layers=2, d_ff=37
                ),
                audio_encoder=dict(
                    model_type="encodec",
                    num_filters=4,
                    hidden_size=8,
                    codebook_size=16,
                    upsampling_ratios=[2, 2],
                    num_residual_layers=1,
                    codebook_dim=8,
                ),
                decoder=dict(model_type="musicgen_decoder", **_DECODER),
            ),
        ),
    )
)
register(
    Record(
        "musicgen_decoder",
        tuple(dataclasses.replace(_ALONE[s], heads=("num_attention_heads",)) for s in ("decoder", "cross")),
        dict(decoder=AR),
        authors=AUTHORS,
        tiny=Tiny("MusicgenForCausalLM", dict(_DECODER)),
    )
)
