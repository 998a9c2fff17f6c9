"""GIT (GenerativeImage2Text): a CLIP ViT image encoder ("encoder") and a BERT-layout text
stack ("decoder": causal over text tokens, which also attend to the image tokens as a
prefix). Layer counts come from the weights: num_hidden_layers describes the text stack
only (the authors scored 6 of the 12/24 image-encoder layers from it).
"""

from __future__ import annotations

from . import register
from .qk_templates import AR, BI, cfg, linear_stack, objectives

objectives("git", encoder=BI, decoder=AR)


@register("git")
def git_blocks(ckpt):
    c = ckpt.config
    yield from linear_stack(
        ckpt, "encoder",
        "image_encoder.vision_model.encoder.layers.{i}.self_attn.q_proj.weight",
        "image_encoder.vision_model.encoder.layers.{i}.self_attn.k_proj.weight",
        int(cfg(c, "vision_config.num_attention_heads", default=12)), prefixes=("git.", ""),
    )
    yield from linear_stack(
        ckpt, "decoder",
        "encoder.layer.{i}.attention.self.query.weight", "encoder.layer.{i}.attention.self.key.weight",
        int(cfg(c, "num_attention_heads")), prefixes=("git.", ""),
    )
