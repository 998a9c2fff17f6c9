"""The squared singular value spectra of the heads by objective and modality (beyond the paper:
the statistics of qk-spectral-analysis, wqk.qk_spectra, without its core's transpose): per model
x stack the median over its heads of the skew and excess kurtosis of sigma^2(M) (scale-free: the
other statistics carry the weights' scale), and the leading share sigma_1^2 / sum sigma^2
(attention-bilinear-forms'), a box per objective, markers by modality. Params: stacks, min_box.
"""

from __future__ import annotations

from . import DOUBLE
from .spectral_signatures import signatures

METRICS = {
    "sv2_skew": ("skew of sigma^2", "mean(z^3)", None),
    "sv2_kurtosis": ("excess kurtosis of sigma^2", "mean(z^4) - 3", None),
    "leading_share": ("leading singular value", "sigma_1^2 share", (0.0, 1.05)),
}


def draw(
    data: dict, stacks: str = "encoder,decoder,cross", min_box: int = 3, width: float = DOUBLE, height: float = 3.0
):
    return signatures(data, METRICS, stacks, min_box, width, height, "no qk_spectra metrics in this run")
