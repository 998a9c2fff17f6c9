"""DeepSeek-V2 and -V3 (multi-head latent attention): known, and not scored.

Their queries and keys are read from low-rank latents (q_a_proj, kv_a_proj_with_mqa) through a
per-token RMSNorm (q_a_layernorm, kv_a_layernorm) between x and q/k, and each head's query and
key carry a decoupled rotary part (the rope key shared by all heads): the logits are no bilinear
form x Q_h K_h^T y of the token vectors, nor one up to a per-token scale of q and k."""

from __future__ import annotations

from . import refuse

_WHY = (
    "multi-head latent attention: queries and keys come from low-rank latents through a per-token "
    "RMSNorm (q_a_layernorm, kv_a_layernorm) between x and q/k, plus a decoupled rotary part of each head, "
    "so the logits are not a bilinear form x Q_h K_h^T y of the token vectors"
)
for _model_type in ("deepseek_v2", "deepseek_v3"):
    refuse(_model_type, _WHY)
