"""DeBERTa v1 (fused in_proj, interleaved per head) and DeBERTa-v2/v3 (separate projections).

Names: [deberta.]encoder.layer.{i}.attention.self.in_proj.weight (v1),
[deberta.]encoder.layer.{i}.attention.self.{query,key}_proj.weight (v2/v3).
Only the content-to-content term q.k is a bilinear form of the token states; the
disentangled c2p/p2c position terms are left out, as are the q bias and the
sqrt(k * (1 + len(pos_att_type))) scale.
"""

from __future__ import annotations

from . import BI, register
from .common import config_get, qk_stack

PREFIXES = ("deberta.", "")
IN_PROJ = "encoder.layer.{i}.attention.self.in_proj.weight"
SELF = "encoder.layer.{i}.attention.self.{p}.weight"


@register("deberta", encoder=BI)
def deberta_v1_blocks(ckpt):
    # DebertaDisentangledSelfAttention: transpose_for_scores(in_proj(x)).chunk(3, dim=-1) views
    # the 3*H*k outputs as [H, 3k]: rows come per head as [q_h | k_h | v_h], NOT [q | k | v].
    heads = int(config_get(ckpt, "num_attention_heads"))
    yield from qk_stack(ckpt, "encoder", IN_PROJ, heads, fused="per_head", prefixes=PREFIXES)


@register("deberta-v2", encoder=BI)
def deberta_v2_blocks(ckpt):
    heads = int(config_get(ckpt, "num_attention_heads"))
    yield from qk_stack(ckpt, "encoder", SELF, heads, qk=("query_proj", "key_proj"), prefixes=PREFIXES)
