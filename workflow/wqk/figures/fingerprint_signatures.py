"""The fingerprint family by objective and modality (beyond the paper: the metrics of
qk-spectral-fingerprint, wqk.fingerprint): as spectral_signatures draws the spectra, per model
x stack the median over its heads of dir_frac, D_head, henrici, content_pos_frac and
rope_imag_frac (on the gain-folded, for a LayerNorm centred, form), a box per objective,
markers by modality, the null reference dashed. All five are unchanged by M -> M^T: none sees
the direction the paper's directionality measures. Params: stacks, min_box (spectral_signatures').
"""

from __future__ import annotations

from . import DOUBLE
from .spectral_signatures import signatures

METRICS = {
    "dir_frac": ("antisymmetric share", "||M_A||_F / ||M||_F", (0.0, 1.05)),
    "D_head": ("complex eigenvalues", "sum |Im lambda| / sum |lambda|", (0.0, 1.05)),
    "henrici": ("departure from normality", "Henrici / ||M||_F", (0.0, 1.05)),
    "content_pos_frac": ("symmetric part", "positive share of its |eig| mass", (0.0, 1.05)),
    "rope_imag_frac": ("rotary pairs", "sum ||Im M_t|| / sum (||Re|| + ||Im||)", (0.0, 1.05)),
}


def draw(
    data: dict, stacks: str = "encoder,decoder,cross", min_box: int = 3, width: float = DOUBLE, height: float = 4.4
):
    return signatures(data, METRICS, stacks, min_box, width, height, "no fingerprint metrics in this run")
