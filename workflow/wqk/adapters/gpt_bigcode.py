"""GPT-BigCode (SantaCoder, StarCoder): GPT-2's layout with an nn.Linear c_attn and
multi-query attention.

Names: [transformer.]h.{i}.attn.c_attn.{weight,bias}, nn.Linear [out, d]; pre-norm ln_1.
config.multi_query (the default, every StarCoder): rows [q (H heads) | k | v] with ONE key
head of k = d / H rows each ("blocks", multi-query); otherwise rows [q_h k_h v_h] head after
head ("per_head"). Learned absolute positions enter x, not the form. The cross-attention of
add_cross_attention is not read (no checkpoint of the hub has it).
"""

from __future__ import annotations

from . import AR, Attention, Record, Tiny, register

_SELF = dict(prefixes=("transformer.", ""), heads=("n_head", "num_attention_heads"), norm="h.{i}.ln_1.weight")


def _multi_query(config: dict) -> bool:
    return bool(config.get("multi_query", True))  # GPTBigCodeConfig's default


register(
    Record(
        "gpt_bigcode",
        (
            Attention(
                "decoder", "h.{i}.attn.c_attn.weight", fused="blocks", multi_query=True, only_if=_multi_query, **_SELF
            ),
            Attention(
                "decoder", "h.{i}.attn.c_attn.weight", fused="per_head", only_if=lambda c: not _multi_query(c), **_SELF
            ),
        ),
        dict(decoder=AR),
        tiny=Tiny(
            "GPTBigCodeForCausalLM",
            dict(vocab_size=99, n_embd=32, n_head=4, n_layer=2, n_positions=64, bos_token_id=0, eos_token_id=0),
        ),
    )
)
