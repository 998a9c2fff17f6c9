"""Self-supervised speech encoders with the wav2vec 2.0 layout: HuBERT, WavLM,
UniSpeech(-SAT), wav2vec 2.0 (MMS), data2vec-audio.
Names: [wav2vec2.|hubert.|...]encoder.layers.{i}.attention.{q,k}_proj.weight.
WavLM's gated relative position bias is added to the logits and is not part of the form.
"""

from __future__ import annotations

from . import BI, register
from .common import config_get, qk_stack


@register("hubert", "wavlm", "unispeech-sat", "unispeech", "wav2vec2", "data2vec-audio", encoder=BI)
def wav2vec2_blocks(ckpt):
    heads = int(config_get(ckpt, "num_attention_heads"))
    prefixes = (ckpt.model_type.replace("-", "_") + ".", "")  # hubert., wavlm., unispeech_sat., ...
    yield from qk_stack(ckpt, "encoder", "encoder.layers.{i}.attention.{p}.weight", heads, prefixes=prefixes)
