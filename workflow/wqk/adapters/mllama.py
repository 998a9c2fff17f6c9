"""Mllama (Llama 3.2 Vision): the vision tower ("encoder": bidirectional; its local layers
then its gated global layers, numbered in depth order) and the text model's self-attention
layers ("decoder", GQA, Llama's rope on text_config; the interleaved cross-attention
layers carry cross_attn instead of self_attn and are not reported). The authors plotted
the vision tower as a decoder and read only its local layers (a default LlamaConfig: 32).

Names: [model.]vision_model.{transformer,global_transformer}.layers.{i}.self_attn.{q,k}_proj,
{language_model.model.,model.language_model.,language_model.}layers.{i}.self_attn.{q,k}_proj.
"""

from __future__ import annotations

import dataclasses

from . import AR, BI, Attention, Authors, Record, Rotary, Tiny, register
from .llama import SELF


def _vision(part: str) -> Attention:
    return Attention(
        "encoder",
        f"vision_model.{part}.layers.{{i}}.self_attn.{{p}}.weight",
        prefixes=("", "model."),
        heads=("vision_config.attention_heads", "vision_config.num_attention_heads"),
        heads_default=16,
        norm=f"vision_model.{part}.layers.{{i}}.input_layernorm.weight",
    )


register(
    Record(
        "mllama",
        (
            _vision("transformer"),
            _vision("global_transformer"),  # numbered after the local layers
            dataclasses.replace(
                SELF,
                prefixes=("language_model.model.", "model.language_model.", "language_model."),
                heads=("text_config.num_attention_heads",),
                heads_default=32,
                kv_heads=("text_config.num_key_value_heads",),
            ),
        ),
        dict(encoder=BI, decoder=AR),
        rope=Rotary("mllama", "MllamaRotaryEmbedding", sub="text_config"),
        authors=Authors(layers={"encoder": ("vision_config.num_hidden_layers", 32)}),
        tiny=Tiny(
            "MllamaForConditionalGeneration",
            dict(
                vision_config=dict(
                    hidden_size=32,
                    attention_heads=4,
                    num_hidden_layers=2,
                    num_global_layers=1,
                    intermediate_size=37,
                    image_size=16,
                    patch_size=8,
                    max_num_tiles=1,
                    intermediate_layers_indices=[0],
                    supported_aspect_ratios=[[1, 1]],
                    vision_output_dim=64,
                ),
                text_config=dict(
                    vocab_size=99,
                    hidden_size=32,
                    num_attention_heads=4,
                    num_key_value_heads=2,
                    num_hidden_layers=3,
                    intermediate_size=37,
                    cross_attention_layers=[1],
                    pad_token_id=0,
                ),
            ),
        ),
    )
)
