"""The head metrics of "Spectral taxonomy of QK circuits" (SD-interp/qk-spectral-analysis),
wqk.metric_registry entry "qk_spectra", from the forms of wqk.head_forms.

Per head the squared singular values of W_Q^T W_K (their nn.Linear slices: our M, raw weights),
the d_head largest (the rest are structural zeros), in the weights' own scale, and their
statistics: min, max, mean, std (n - 1), skew = mean(z^3) and excess kurtosis = mean(z^4) - 3
with z standardised by that std, as their code computes them (the plug-in g1 and g2 of
scipy.stats.skew / kurtosis with bias=True are skew ((n - 1)/n)^-1.5 and
(kurtosis + 3)((n - 1)/n)^-2 - 3). Their low-rank core, Sigma_A Vh_A^T Vh_B Sigma_B where
Sigma_A Vh_A Vh_B^T Sigma_B is meant, changes every value but the product of the sigma; here
sigma^2 = eigvalsh(L^T G_k L) (wqk.head_forms), exact. `squared_singular_values` gives the list.
"""

from __future__ import annotations

import numpy as np
import torch

from .head_forms import HeadForms, memo
from .metric_catalogue import QK_SPECTRA_COLUMNS, Context, register

COLUMNS = QK_SPECTRA_COLUMNS


def squared_singular_values(forms: HeadForms) -> np.ndarray:
    """[B, k] sigma^2 of each head's M, descending, in the weights' own scale (NaN where undefined)."""
    scale = torch.from_numpy(np.ldexp(1.0, 2 * forms.scale)).to(forms.sv2)
    out = forms.sv2 * scale[:, None]
    return torch.where(forms.failed[:, None], torch.nan, out).cpu().numpy()


def qk_spectra_columns(forms: HeadForms) -> dict[str, np.ndarray]:
    x = torch.from_numpy(squared_singular_values(forms))
    mean, n = x.mean(-1), x.shape[-1]
    std = ((x - mean[:, None]) ** 2).sum(-1).div(n - 1).sqrt() if n > 1 else torch.full_like(mean, torch.nan)
    z = (x - mean[:, None]) / std.clamp_min(1e-300)[:, None]
    flat = std == 0
    return {
        "sv2": x.numpy(),  # [B, k]: a list per head
        "sv2_min": x.amin(-1).numpy(),
        "sv2_max": x.amax(-1).numpy(),
        "sv2_mean": mean.numpy(),
        "sv2_std": std.numpy(),
        "sv2_skew": torch.where(flat, torch.nan, (z**3).mean(-1)).numpy(),
        "sv2_kurtosis": torch.where(flat, torch.nan, (z**4).mean(-1) - 3).numpy(),
    }


@register(
    "qk_spectra",
    COLUMNS,
    "per head, the d_head squared singular values of M (raw weights) as qk-spectral-analysis lists them, without "
    "its core's transpose: their min, max, mean, std (n - 1), skew and excess kurtosis (z by that std).",
    cheap=False,
)
def head_qk_spectra(ctx: Context):
    return qk_spectra_columns(memo(ctx.factors, "raw", lambda: HeadForms.of(ctx.factors))), {}
