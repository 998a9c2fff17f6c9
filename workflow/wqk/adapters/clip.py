"""CLIP and SigLIP: a vision tower and a text tower, both ViT/BERT-like pre-norm encoders
with separate q/k nn.Linear projections and biases.

Names: [text_model|vision_model].encoder.layers.{i}.self_attn.{q,k}_proj.weight; pre-norm
layer_norm1 (CLIPModel and SiglipModel save the towers under these names at the root).
Stacks: the vision tower is "encoder" (bidirectional over patches); the text tower is the
model's second self-attention stack, "decoder", with the objective its mask gives it: CLIP's
text transformer runs under a causal mask (autoregressive, although it is trained
contrastively, not for next-token prediction), SigLIP's under none (bidirectional, as DETR's
"decoder"). Heads from text_config / vision_config. SigLIP's attention-pooling head
(vision_model.head, one learned probe query) is not self-attention and is not read.
"""

from __future__ import annotations

from . import AR, BI, Attention, Record, Tiny, register


def _tower(stack: str, name: str, heads: int) -> Attention:
    return Attention(
        stack,
        f"{name}_model.encoder.layers.{{i}}.self_attn.{{p}}.weight",
        heads=(f"{name}_config.num_attention_heads",),
        heads_default=heads,
        norm=f"{name}_model.encoder.layers.{{i}}.layer_norm1.weight",
    )


def _towers(text_heads: int) -> tuple[Attention, Attention]:
    """The vision tower, then the text tower; head counts default to the config classes' own
    (both 12, CLIP's text tower 8), for config.json files that leave them out."""
    return _tower("encoder", "vision", 12), _tower("decoder", "text", text_heads)


_TEXT = dict(
    vocab_size=99,
    hidden_size=32,
    num_attention_heads=4,
    num_hidden_layers=2,
    intermediate_size=37,
    max_position_embeddings=32,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)
_VISION = dict(
    hidden_size=32, num_attention_heads=4, num_hidden_layers=3, intermediate_size=37, image_size=32, patch_size=8
)

register(
    Record(
        "clip",
        _towers(8),
        dict(encoder=BI, decoder=AR),
        tiny=Tiny(
            "CLIPModel",
            dict(text_config=_TEXT, vision_config=_VISION, projection_dim=16),
        ),
    )
)
register(
    Record(
        "siglip",
        _towers(12),
        dict(encoder=BI, decoder=BI),
        tiny=Tiny("SiglipModel", dict(text_config=_TEXT, vision_config=_VISION)),
    )
)
