"""OPT: a decoder with separate q/k nn.Linear projections and their biases.

Names: [model.]decoder.layers.{i}.self_attn.{q,k}_proj.{weight,bias} (facebook/opt-*
checkpoints were saved from OPTModel: "decoder."; OPTForCausalLM adds "model."). The
layer norm self_attn_layer_norm feeds the attention only where config.do_layer_norm_before
(every size but opt-350m, which is post-norm). OPT scales the queries by 1/sqrt(k) before
the product; learned absolute positions enter x, not the form.
"""

from __future__ import annotations

from . import AR, Attention, Record, Tiny, register
from .sizes import TEXT_32

register(
    Record(
        "opt",
        (
            Attention(
                "decoder",
                "layers.{i}.self_attn.{p}.weight",
                prefixes=("model.decoder.", "decoder."),
                norm="layers.{i}.self_attn_layer_norm.weight",
                pre_norm="do_layer_norm_before",
            ),
        ),
        dict(decoder=AR),
        tiny=Tiny("OPTForCausalLM", dict(TEXT_32, ffn_dim=37, max_position_embeddings=64, word_embed_proj_dim=32)),
    )
)
