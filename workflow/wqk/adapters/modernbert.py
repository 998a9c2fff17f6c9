"""ModernBERT: fused Wqkv nn.Linear, outputs viewed as [3, H, k] (q | k | v blocks).

The weight is [out, in]: Q must be the transpose of the q rows (the form lives in the
input/embedding space, d x d), which is what linear_heads does.
"""

from __future__ import annotations

from . import linear_heads, layer_indices, register
from ..blocks import AttentionBlock
from .qk_templates import BI, cfg, fused_rows, objectives, prefix_for, template_regex

WQKV = "layers.{i}.attn.Wqkv.weight"
objectives("modernbert", encoder=BI)


@register("modernbert")
def modernbert_blocks(ckpt):
    n_heads = int(cfg(ckpt.config, "num_attention_heads"))
    prefix = prefix_for(ckpt, ["model.", ""], WQKV)
    for i in layer_indices(ckpt, prefix.replace(".", r"\.") + template_regex(WQKV)):
        w = ckpt.store.get(prefix + WQKV.format(i=i))
        wq, wk, _ = fused_rows(w, n_heads, w.shape[0] // (3 * n_heads), 3, "blocks")
        yield AttentionBlock("encoder", i, linear_heads(wq, n_heads), linear_heads(wk, n_heads))
