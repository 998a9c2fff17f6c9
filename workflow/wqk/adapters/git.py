"""GIT (GenerativeImage2Text): a CLIP ViT image encoder ("encoder":
[git.]image_encoder.vision_model.encoder.layers.{i}.self_attn.{q,k}_proj) and a BERT-layout
text stack ("decoder": [git.]encoder.layer.{i}.attention.self.{query,key}; causal over text
tokens, which also attend to the image tokens as a prefix). Layer counts come from the
weights: num_hidden_layers describes the text stack only (the authors scored 6 of the
12/24 image-encoder layers from it).
"""

from __future__ import annotations

from . import AR, BI, register
from .common import config_get, qk_stack

IMAGE = "image_encoder.vision_model.encoder.layers.{i}.self_attn.{p}.weight"
TEXT = "encoder.layer.{i}.attention.self.{p}.weight"


@register("git", encoder=BI, decoder=AR)
def git_blocks(ckpt):
    h_image = int(config_get(ckpt, "vision_config.num_attention_heads", default=12))
    yield from qk_stack(ckpt, "encoder", IMAGE, h_image, prefixes=("git.", ""))
    h_text = int(config_get(ckpt, "num_attention_heads"))
    yield from qk_stack(ckpt, "decoder", TEXT, h_text, qk=("query", "key"), prefixes=("git.", ""))
