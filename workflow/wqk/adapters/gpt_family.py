"""GPT-1 (openai-gpt), ImageGPT, GPT-Neo and GPT-J decoders.

openai-gpt and imagegpt use GPT-2's Conv1D c_attn ([d, 3d], columns [q | k | v]).
GPT-Neo: separate q/k/v Linear without bias, no 1/sqrt(k) scaling; alternate layers use
local (windowed) attention: the same bilinear form, a narrower mask.
GPT-J: separate q/k/v Linear, partial rotary (acts between Q and K: ignored).
"""

from __future__ import annotations

from . import conv1d_heads, layer_indices, register
from ..blocks import AttentionBlock
from .qk_templates import AR, cfg, linear_stack, objectives, prefix_for, template_regex

C_ATTN = "h.{i}.attn.c_attn.weight"
for _mt in ("openai-gpt", "imagegpt", "gpt_neo", "gptj"):
    objectives(_mt, decoder=AR)


def _c_attn_blocks(ckpt, n_heads: int):
    prefix = prefix_for(ckpt, ["transformer.", ""], C_ATTN)
    for i in layer_indices(ckpt, prefix.replace(".", r"\.") + template_regex(C_ATTN)):
        w = ckpt.store.get(prefix + C_ATTN.format(i=i))  # Conv1D: [in=d, out=3*H*k]
        d3 = w.shape[1] // 3
        yield AttentionBlock("decoder", i, conv1d_heads(w[:, :d3], n_heads), conv1d_heads(w[:, d3 : 2 * d3], n_heads))


@register("openai-gpt", "imagegpt")
def c_attn_blocks(ckpt):
    yield from _c_attn_blocks(ckpt, int(cfg(ckpt.config, "n_head", "num_attention_heads")))


@register("gpt_neo")
def gpt_neo_blocks(ckpt):
    yield from linear_stack(
        ckpt, "decoder", "h.{i}.attn.attention.q_proj.weight", "h.{i}.attn.attention.k_proj.weight",
        int(cfg(ckpt.config, "num_heads", "num_attention_heads")), prefixes=("transformer.", ""),
    )


@register("gptj")
def gptj_blocks(ckpt):
    yield from linear_stack(
        ckpt, "decoder", "h.{i}.attn.q_proj.weight", "h.{i}.attn.k_proj.weight",
        int(cfg(ckpt.config, "n_head", "num_attention_heads")), prefixes=("transformer.", ""),
    )
