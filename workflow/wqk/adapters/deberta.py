"""DeBERTa v1 (fused in_proj, interleaved per head) and DeBERTa-v2/v3 (separate projections).

Only the content-to-content term q.k is a bilinear form of the token states; the
disentangled c2p/p2c position terms are left out, as are the q bias and the
sqrt(k * (1 + len(pos_att_type))) scale.
"""

from __future__ import annotations

from . import linear_heads, layer_indices, register
from ..blocks import AttentionBlock
from .qk_templates import BI, cfg, fused_rows, linear_stack, objectives, prefix_for, template_regex

PREFIXES = ("deberta.", "")
IN_PROJ = "encoder.layer.{i}.attention.self.in_proj.weight"

objectives("deberta", encoder=BI)
objectives("deberta-v2", encoder=BI)


@register("deberta")
def deberta_v1_blocks(ckpt):
    # DebertaDisentangledSelfAttention: transpose_for_scores(in_proj(x)).chunk(3, dim=-1) views
    # the 3*H*k outputs as [H, 3k]: rows come per head as [q_h | k_h | v_h], NOT [q | k | v].
    n_heads = int(cfg(ckpt.config, "num_attention_heads"))
    prefix = prefix_for(ckpt, list(PREFIXES), IN_PROJ)
    for i in layer_indices(ckpt, prefix.replace(".", r"\.") + template_regex(IN_PROJ)):
        w = ckpt.store.get(prefix + IN_PROJ.format(i=i))
        head_dim = w.shape[0] // (3 * n_heads)
        wq, wk, _ = fused_rows(w, n_heads, head_dim, 3, "per_head")
        yield AttentionBlock("encoder", i, linear_heads(wq, n_heads), linear_heads(wk, n_heads))


@register("deberta-v2")
def deberta_v2_blocks(ckpt):
    yield from linear_stack(
        ckpt,
        "encoder",
        "encoder.layer.{i}.attention.self.query_proj.weight",
        "encoder.layer.{i}.attention.self.key_proj.weight",
        int(cfg(ckpt.config, "num_attention_heads")),
        prefixes=PREFIXES,
    )
