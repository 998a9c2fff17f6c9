"""GPT-Neo: [transformer.]h.{i}.attn.attention.{q,k}_proj.weight, separate nn.Linear without
bias and no 1/sqrt(k) scaling; alternate layers use local (windowed) attention: the same
bilinear form, a narrower mask. Pre-norm ln_1."""

from __future__ import annotations

from . import AR, Attention, Record, Tiny, register

register(
    Record(
        "gpt_neo",
        (
            Attention(
                "decoder",
                "h.{i}.attn.attention.{p}.weight",
                prefixes=("transformer.", ""),
                heads=("num_heads", "num_attention_heads"),
                norm="h.{i}.ln_1.weight",
            ),
        ),
        dict(decoder=AR),
        tiny=Tiny(
            "GPTNeoForCausalLM",
            dict(
                vocab_size=99,
                hidden_size=32,
                num_heads=4,
                num_layers=2,
                attention_types=[[["global", "local"], 1]],
                window_size=4,
                max_position_embeddings=32,
            ),
        ),
    )
)
