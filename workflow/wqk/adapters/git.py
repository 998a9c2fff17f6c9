"""GIT (GenerativeImage2Text): a CLIP ViT image encoder ("encoder", pre-norm:
[git.]image_encoder.vision_model.encoder.layers.{i}.self_attn.{q,k}_proj) and a BERT-layout
post-norm text stack ("decoder": [git.]encoder.layer.{i}.attention.self.{query,key}; causal
over text tokens, which also attend to the image tokens as a prefix). Layer counts come
from the weights: num_hidden_layers describes the text stack only (the authors scored 6 of
the 12/24 image-encoder layers from it).
"""

from __future__ import annotations

from . import AR, BI, Attention, Authors, Record, Tiny, register
from .sizes import TEXT_32

IMAGE = "image_encoder.vision_model.encoder.layers.{i}."

register(
    Record(
        "git",
        (
            Attention(
                "encoder",
                IMAGE + "self_attn.{p}.weight",
                prefixes=("git.", ""),
                heads=("vision_config.num_attention_heads",),
                heads_default=12,
                norm=IMAGE + "layer_norm1.weight",
            ),
            Attention(
                "decoder",
                "encoder.layer.{i}.attention.self.{p}.weight",
                qk=("query", "key"),
                prefixes=("git.", ""),
                pre_norm=False,
            ),
        ),
        dict(encoder=BI, decoder=AR),
        authors=Authors(layers={"encoder": ("num_hidden_layers", None)}),
        tiny=Tiny(
            "GitForCausalLM",
            dict(
                TEXT_32,
                vision_config=dict(
                    hidden_size=32,
                    num_hidden_layers=3,
                    num_attention_heads=4,
                    intermediate_size=37,
                    image_size=16,
                    patch_size=8,
                ),
            ),
        ),
    )
)
