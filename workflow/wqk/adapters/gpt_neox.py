"""GPT-NeoX / Pythia: fused [gpt_neox.]layers.{i}.attention.query_key_value.weight nn.Linear,
weight [3d, d] (out, in); pre-norm input_layernorm; rotary (rotary_pct of each head).

The output rows are interleaved PER HEAD: for head h, rows [h*3k, h*3k+k) are q_h, the
next k rows k_h, the next k rows v_h (the model views the output as [..., H, 3k] and
chunks the last dim); the bias likewise. Slicing the first d rows as W_q (the authors'
code, untransposed) mixes q, k and v rows of different heads; tests/test_adapters_core.py
guards against that layout.
"""

from __future__ import annotations

from . import AR, Attention, Authors, Record, Rotary, Tiny, register
from .sizes import BERT_64

register(
    Record(
        "gpt_neox",
        (
            Attention(
                "decoder",
                "layers.{i}.attention.query_key_value.weight",
                fused="per_head",
                prefixes=("gpt_neox.", "model.", ""),
                norm="layers.{i}.input_layernorm.weight",
            ),
        ),
        dict(decoder=AR),
        rope=Rotary("gpt_neox", "GPTNeoXRotaryEmbedding"),
        authors=Authors(untransposed=True),
        tiny=Tiny("GPTNeoXForCausalLM", dict(BERT_64, bos_token_id=0, eos_token_id=0)),
    )
)
