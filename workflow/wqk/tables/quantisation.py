"""What quantisation does to the structure (beyond the paper).

data["quantisation"]: results/quantisation/summary.csv (`wqk quantisation --summary-out`: the
real float checkpoints of `quantisation.models`, their q/k quantised with each type the gguf
package can write, dequantised and scored per layer; wqk.quantisation.summary). One row per
model, stack and quant type, in order of bits per weight: the median over layers of |change| in symmetry and in directionality
(quantised minus float), the largest, and the null's spread (the standard deviation of that
score over random Gaussian forms of the layer's shapes, median over layers) with the ratio of
the two. A type whose blocks do not divide the model's width has no row.
"""

from __future__ import annotations

import pandas as pd

CAPTION = (
    "What quantisation does to the structure: the float checkpoints' q/k quantised with each GGUF type "
    "and scored per layer; median over layers of |change| in symmetry and directionality, the largest, "
    "and the spread of the null reference (std over random forms of the same shapes) with their ratio."
)
COLUMNS = [
    "model", "stack", "quant_type", "bits_per_weight", "n_layers",
    "abs_d_symmetry_median", "abs_d_symmetry_max", "null_symmetry_std", "symmetry_change_over_null",
    "abs_d_directionality_median", "abs_d_directionality_max", "null_directionality_std",
    "directionality_change_over_null",
]  # fmt: skip


def build(data: dict[str, pd.DataFrame]) -> pd.DataFrame:
    return data["quantisation"][COLUMNS]
