"""Whisper (transformers names, as WhisperForConditionalGeneration saves them), BART's layout:

  model.encoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "encoder" (audio, bidirectional)
  model.decoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "decoder" (text, causal)
  model.decoder.layers.{i}.encoder_attn.{q,k}_proj.weight -> "cross"
Prefix "model." from the generation head, none from a bare WhisperModel. k_proj has no
bias. Heads: encoder_/decoder_attention_heads. Pre-norm. Each stack may be absent (an
encoder-only export), but not all of them.

CTranslate2 Whisper (format "ctranslate2"): the store maps the HF q/k weights and q biases
(HF Whisper has no k bias; CT2's fused k-bias slice is 0) under "model."; the norms keep
their CT2 names.
"""

from __future__ import annotations

import dataclasses

from . import AR, BI, Record, Tiny, register
from .bart import bart_stacks

_HF = bart_stacks(required=False)
_CT2 = bart_stacks(("model.",), required=False)
_CT2_NORMS = {
    "encoder": dict(norm="^encoder/layer_{i}/self_attention/layer_norm/gamma"),
    "decoder": dict(norm="^decoder/layer_{i}/self_attention/layer_norm/gamma"),
    "cross": dict(norm="^decoder/layer_{i}/attention/layer_norm/gamma", k_norm="^encoder/layer_norm/gamma"),
}

register(
    Record(
        "whisper",
        tuple(_HF.values()),
        dict(encoder=BI, decoder=AR),
        formats={"ctranslate2": tuple(dataclasses.replace(a, **_CT2_NORMS[s]) for s, a in _CT2.items())},
        tiny=Tiny(
            "WhisperForConditionalGeneration",
            dict(
                d_model=64,
                encoder_layers=2,
                decoder_layers=3,
                encoder_attention_heads=4,
                decoder_attention_heads=8,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                vocab_size=128,
                num_mel_bins=16,
                max_source_positions=32,
                max_target_positions=32,
                pad_token_id=0,
                bos_token_id=1,
                eos_token_id=2,
                decoder_start_token_id=1,
                begin_suppress_tokens=None,
                suppress_tokens=None,
            ),
        ),
    )
)
