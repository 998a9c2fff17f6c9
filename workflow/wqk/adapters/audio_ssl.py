"""Self-supervised speech encoders with the wav2vec 2.0 layout: HuBERT, WavLM,
UniSpeech(-SAT), wav2vec 2.0 (MMS). WavLM's gated relative position bias is added to the
logits and is not part of the form.
"""

from __future__ import annotations

from . import register
from .qk_templates import BI, cfg, linear_stack, objectives

TYPES = ("hubert", "wavlm", "unispeech-sat", "unispeech", "wav2vec2", "data2vec-audio")
for _mt in TYPES:
    objectives(_mt, encoder=BI)


@register(*TYPES)
def wav2vec2_layout_blocks(ckpt):
    prefixes = (ckpt.model_type.replace("-", "_") + ".", "")
    yield from linear_stack(
        ckpt, "encoder", "encoder.layers.{i}.attention.q_proj.weight", "encoder.layers.{i}.attention.k_proj.weight",
        int(cfg(ckpt.config, "num_attention_heads")), prefixes=prefixes,
    )
