"""Llama-layout decoders beyond Llama/Mistral: Mixtral (MoE FFN), Phi-1/1.5/2, Phi-3 (fused
qkv_proj), MobileLLM. Grouped-query attention: k holds n_kv heads; query head h reads key
head h // (H // n_kv) (blocks.AttentionBlock pairs them; never tile).

MobileLLM checkpoints (facebook/MobileLLM-*) are remote code with model_type "mobilellm"
and Llama tensor names (model.layers.{i}.self_attn.{q,k}_proj).
"""

from __future__ import annotations

from . import layer_indices, linear_heads, register
from ..blocks import AttentionBlock
from .qk_templates import AR, cfg, linear_stack, objectives, prefix_for, template_regex

for _mt in ("mixtral", "phi", "phi3", "mobilellm"):
    objectives(_mt, decoder=AR)

Q = "layers.{i}.self_attn.q_proj.weight"
K = "layers.{i}.self_attn.k_proj.weight"
QKV = "layers.{i}.self_attn.qkv_proj.weight"


def _heads(config: dict) -> tuple[int, int]:
    h = int(cfg(config, "num_attention_heads"))
    return h, int(cfg(config, "num_key_value_heads", default=h))


@register("mixtral", "phi", "mobilellm")
def llama_layout_blocks(ckpt):
    h, h_kv = _heads(ckpt.config)
    yield from linear_stack(ckpt, "decoder", Q, K, h, h_kv, prefixes=("model.", ""))


@register("phi3")
def phi3_blocks(ckpt):
    # Phi3Attention: qkv = qkv_proj(x); q = qkv[..., :H*k], k = qkv[..., H*k : H*k + H_kv*k]
    # (blocks of output rows; with GQA the k block is H_kv*k rows, not d).
    h, h_kv = _heads(ckpt.config)
    prefix = prefix_for(ckpt, ["model.", ""], QKV)
    for i in layer_indices(ckpt, prefix.replace(".", r"\.") + template_regex(QKV)):
        w = ckpt.store.get(prefix + QKV.format(i=i))
        head_dim = w.shape[0] // (h + 2 * h_kv)
        wq, wk = w[: h * head_dim], w[h * head_dim : (h + h_kv) * head_dim]
        yield AttentionBlock("decoder", i, linear_heads(wq, h), linear_heads(wk, h_kv))
