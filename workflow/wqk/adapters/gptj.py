"""GPT-J: [transformer.]h.{i}.attn.{q,k}_proj.weight, separate nn.Linear; pre-norm ln_1;
partial rotary on the first rotary_dim dims of each head, rows paired interleaved
(rotate_every_two), frequencies from GPT-J's fixed formula."""

from __future__ import annotations

from . import AR, Attention, Record, Rotary, Tiny, register

register(
    Record(
        "gptj",
        (
            Attention(
                "decoder",
                "h.{i}.attn.{p}.weight",
                prefixes=("transformer.", ""),
                heads=("n_head", "num_attention_heads"),
                norm="h.{i}.ln_1.weight",
            ),
        ),
        dict(decoder=AR),
        rope=Rotary("gptj", None, layout="interleaved"),
        tiny=Tiny("GPTJForCausalLM", dict(vocab_size=99, n_embd=32, n_head=4, n_layer=2, rotary_dim=4, n_positions=32)),
    )
)
