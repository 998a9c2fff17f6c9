"""GPT-2 and the other decoders with its Conv1D c_attn (openai-gpt, imagegpt): weights
[in, out], already d x out.

Self-attention: [transformer.]h.{i}.attn.c_attn.weight [d, 3d] = [q | k | v] along the
output dim, each part H heads of k columns; its bias [3d] likewise; pre-norm ln_1 (GPT-1:
post-norm; ImageGPTLayerNorm x / rms(x) * weight). Cross-attention (GPT-2
add_cross_attention): h.{i}.crossattention.q_attn.weight [d, d] for queries and
.c_attn.weight [d, 2d] = [k | v]; its keys read an outside encoder (no k gain).
"""

from __future__ import annotations

import dataclasses

from . import AR, Attention, Record, Tiny, register

PREFIXES = ("transformer.", "model.", "")
SELF = Attention(
    "decoder",
    "h.{i}.attn.c_attn.weight",
    fused="blocks",
    conv1d=True,
    prefixes=PREFIXES,
    heads=("n_head", "num_attention_heads"),
    norm="h.{i}.ln_1.weight",
)
CROSS = dataclasses.replace(
    SELF,
    stack="cross",
    weight="h.{i}.crossattention.{p}.weight",
    qk=("q_attn", "c_attn"),
    fused="kv",
    norm="h.{i}.ln_cross_attn.weight",
    required=False,
)
_TINY_32 = dict(vocab_size=99, n_embd=32, n_head=4, n_layer=2, n_positions=32)

register(
    Record(
        "gpt2",
        (SELF, CROSS),
        dict(decoder=AR),
        tiny=Tiny(
            "GPT2LMHeadModel",
            dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=128, bos_token_id=0, eos_token_id=0),
        ),
    )
)
register(Record("imagegpt", (SELF, CROSS), dict(decoder=AR), tiny=Tiny("ImageGPTForCausalImageModeling", _TINY_32)))
register(
    Record(
        "openai-gpt",
        tuple(dataclasses.replace(a, pre_norm=False) for a in (SELF, CROSS)),
        dict(decoder=AR),
        tiny=Tiny("OpenAIGPTLMHeadModel", _TINY_32),
    )
)
