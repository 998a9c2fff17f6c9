"""Self-supervised speech encoders with the wav2vec 2.0 layout: HuBERT, WavLM,
UniSpeech(-SAT), wav2vec 2.0 (MMS), data2vec-audio.
Names: [wav2vec2.|hubert.|...]encoder.layers.{i}.attention.{q,k}_proj.weight; the layer
norm feeds the attention only in the stable variant (do_stable_layer_norm).
WavLM's gated relative position bias is added to the logits and is not part of the form.
"""

from __future__ import annotations

from . import BI, Attention, Record, Tiny, register
from .sizes import AUDIO_32

for _mt, _architecture, _extra in (
    ("hubert", "HubertModel", {}),
    ("wavlm", "WavLMModel", dict(num_buckets=16, max_bucket_distance=32)),
    ("unispeech-sat", "UniSpeechSatModel", {}),
    ("unispeech", "UniSpeechModel", {}),
    ("wav2vec2", "Wav2Vec2ForCTC", {}),
    ("data2vec-audio", "Data2VecAudioModel", {}),
):
    register(
        Record(
            _mt,
            (
                Attention(
                    "encoder",
                    "encoder.layers.{i}.attention.{p}.weight",
                    prefixes=(_mt.replace("-", "_") + ".", ""),  # hubert., wavlm., unispeech_sat., ...
                    norm="encoder.layers.{i}.layer_norm.weight",
                    pre_norm="do_stable_layer_norm",
                ),
            ),
            dict(encoder=BI),
            tiny=Tiny(_architecture, dict(AUDIO_32, **_extra)),
        )
    )
