"""ModernBERT: fused [model.]layers.{i}.attn.Wqkv.weight nn.Linear, outputs viewed as
[3, H, k] (q | k | v blocks); pre-norm, but layer 0's attn_norm is an Identity: the
embeddings' norm feeds its attention. Rotary with its own theta per layer type (global,
local).

The weight is [out, in]: Q must be the transpose of the q rows (the form lives in the
input/embedding space, d x d); the authors' code left the transpose out.
"""

from __future__ import annotations

from . import BI, Attention, Authors, Record, Rotary, Tiny, register
from .sizes import TEXT_32

register(
    Record(
        "modernbert",
        (
            Attention(
                "encoder",
                "layers.{i}.attn.Wqkv.weight",
                fused="blocks",
                prefixes=("model.", ""),
                norm="layers.{i}.attn_norm.weight",
                first_norm="embeddings.norm.weight",
                norm_centred=True,  # LayerNorm without bias (norm_bias false)
            ),
        ),
        dict(encoder=BI),
        rope=Rotary("modernbert", "ModernBertRotaryEmbedding", stack="encoder", per_layer_type=True),
        authors=Authors(untransposed=True),
        tiny=Tiny(
            "ModernBertForMaskedLM",
            dict(TEXT_32, num_hidden_layers=3, global_attn_every_n_layers=3, local_attention=4, pad_token_id=0),
        ),
    )
)
