"""DeBERTa v1 (fused in_proj, interleaved per head) and DeBERTa-v2/v3 (separate projections).

Names: [deberta.]encoder.layer.{i}.attention.self.in_proj.weight (v1),
[deberta.]encoder.layer.{i}.attention.self.{query,key}_proj.weight (v2/v3).
Only the content-to-content term q.k is a bilinear form of the token states; the
disentangled c2p/p2c position terms are left out, as is the
sqrt(k * (1 + len(pos_att_type))) scale. Post-norm.

v1: DebertaDisentangledSelfAttention: transpose_for_scores(in_proj(x)).chunk(3, dim=-1)
views the 3*H*k outputs as [H, 3k]: rows come per head as [q_h | k_h | v_h], NOT
[q | k | v]. The in_proj has no bias; q_bias [H*k] is added per head after the split. The
authors read it as [q | k | v] and untransposed.
"""

from __future__ import annotations

from . import BI, Attention, Authors, Record, Tiny, register
from .sizes import TEXT_32

register(
    Record(
        "deberta",
        (
            Attention(
                "encoder",
                "encoder.layer.{i}.attention.self.in_proj.weight",
                fused="per_head",
                prefixes=("deberta.", ""),
                bias=None,
                q_bias="encoder.layer.{i}.attention.self.q_bias",
                pre_norm=False,
            ),
        ),
        dict(encoder=BI),
        authors=Authors(untransposed=True),
        tiny=Tiny(
            "DebertaForMaskedLM",
            dict(TEXT_32, relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=16),
        ),
    )
)
register(
    Record(
        "deberta-v2",
        (
            Attention(
                "encoder",
                "encoder.layer.{i}.attention.self.{p}.weight",
                qk=("query_proj", "key_proj"),
                prefixes=("deberta.", ""),
                pre_norm=False,
            ),
        ),
        dict(encoder=BI),
        tiny=Tiny(
            "DebertaV2Model",
            dict(
                TEXT_32,
                relative_attention=True,
                pos_att_type=["p2c", "c2p"],
                position_buckets=8,
                norm_rel_ebd="layer_norm",
            ),
        ),
    )
)
