"""BART-layout encoder-decoders: BART, mBART, Speech2Text, DETR (and the layout of SpeechT5,
MusicGen and Whisper, whose modules use `bart_stacks`).

  [model.]encoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "encoder" (bidirectional)
  [model.]decoder.layers.{i}.self_attn.{q,k}_proj.weight    -> "decoder" (causal)
  [model.]decoder.layers.{i}.encoder_attn.{q,k}_proj.weight -> "cross" (decoder queries
                                                               against encoder states)
Layers are counted per stack from the weights: SpeechT5's config aliases
num_hidden_layers to encoder_layers, which is not the decoder's depth. Pre-norm variants
(mBART, Speech2Text, Whisper) read {self_attn,encoder_attn}_layer_norm, and the keys of
cross-attention the encoder's final layer_norm. DETR's "decoder" self-attention runs over
object queries WITHOUT a causal mask: its objective is bidirectional (the authors plotted
it with the autoregressive ones).
"""

from __future__ import annotations

from . import AR, BI, Attention, Record, Tiny, register
from .sizes import SEQ2SEQ_32

_ENC_HEADS = ("encoder_attention_heads", "num_attention_heads")
_DEC_HEADS = ("decoder_attention_heads", "num_attention_heads")


def bart_stacks(
    prefixes=("model.", ""),
    pre_norm: bool = True,
    encoder: str = "encoder.layers.{i}.self_attn.",
    decoder: str = "decoder.layers.{i}.",
    k_norm: str | None = "encoder.layer_norm.weight",
    required: bool = True,
) -> dict[str, Attention]:
    """The encoder's self-attention (module `encoder`), the decoder's self_attn and its
    encoder_attn (under `decoder`)."""
    common = dict(prefixes=tuple(prefixes), pre_norm=pre_norm, required=required)
    enc_norm = encoder.rsplit(".", 2)[0] + ".self_attn_layer_norm.weight"
    return {
        "encoder": Attention(
            "encoder", encoder + "{p}.weight", heads=_ENC_HEADS, norm=enc_norm if pre_norm else None, **common
        ),
        "decoder": Attention(
            "decoder",
            decoder + "self_attn.{p}.weight",
            heads=_DEC_HEADS,
            norm=decoder + "self_attn_layer_norm.weight",
            **common,
        ),
        "cross": Attention(
            "cross",
            decoder + "encoder_attn.{p}.weight",
            heads=_DEC_HEADS,
            norm=decoder + "encoder_attn_layer_norm.weight",
            k_norm=k_norm,
            **common,
        ),
    }


_ENC_DEC = dict(encoder=BI, decoder=AR)
register(
    Record(
        "bart",
        tuple(bart_stacks(pre_norm=False).values()),
        _ENC_DEC,
        tiny=Tiny("BartForConditionalGeneration", dict(SEQ2SEQ_32)),
    )
)
register(
    Record(
        "mbart", tuple(bart_stacks().values()), _ENC_DEC, tiny=Tiny("MBartForConditionalGeneration", dict(SEQ2SEQ_32))
    )
)
register(
    Record(
        "speech_to_text",
        tuple(bart_stacks().values()),
        _ENC_DEC,
        tiny=Tiny(
            "Speech2TextForConditionalGeneration",
            dict(
                SEQ2SEQ_32,
                input_feat_per_channel=8,
                input_channels=1,
                conv_channels=16,
                num_conv_layers=2,
                conv_kernel_sizes=[5, 5],
                max_source_positions=64,
            ),
        ),
    )
)
register(
    Record(
        "detr",
        tuple(bart_stacks(pre_norm=False).values()),
        dict(encoder=BI, decoder=BI),
        tiny=Tiny(
            "DetrForObjectDetection",
            dict(
                use_timm_backbone=False,
                use_pretrained_backbone=False,
                d_model=32,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=37,
                decoder_ffn_dim=37,
                num_queries=6,
                backbone_config=dict(
                    model_type="resnet", embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=["stage2"]
                ),
            ),
        ),
    )
)
