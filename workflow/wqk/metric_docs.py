"""What each metric column is (`wqk metrics --json`, README's tables): its metric (the registry
name), scope (head and/or layer rows), input (raw weights; gain_folded: diag(g) M diag(g), centred
C M C for a LayerNorm; bias_augmented), whether it is unchanged by M -> M^T (a metric that is
cannot see direction: "Self-attention as transport", arXiv 2605.04893), the published columns
it reproduces ("repository:column"), and its definition. Without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .metric_catalogue import CATALOGUE

FINGERPRINT, BILINEAR, QK_SPECTRA = "qk-spectral-fingerprint", "attention-bilinear-forms", "qk-spectral-analysis"


@dataclass(frozen=True)
class Column:
    definition: str
    transpose_invariant: bool
    input: str = "raw"
    reproduces: tuple[str, ...] = ()
    scope: tuple[str, ...] = ("head",)


BOTH = ("head", "layer")
_FOLDED = "gain_folded"

COLUMNS: dict[str, Column] = {
    "symmetry": Column("<M, M^T>_F / ||M||_F^2: 1 symmetric, -1 antisymmetric (the paper's)", True, scope=BOTH),
    "directionality": Column(
        "(E_r - E_c) / (E_r + E_c), E the excess of row (column) norms of M over mean + 2 std: < 0 column-dominant "
        "(the paper's)",
        False,
        scope=BOTH,
    ),  # fmt: skip
    "E_r": Column("the excess of M's row norms over their mean + 2 std", False, scope=BOTH),
    "E_c": Column("the excess of M's column norms over their mean + 2 std", False, scope=BOTH),
    "stable_rank": Column(
        "||M||_F^2 / ||M||_2^2 = sum sigma^2 / sigma_1^2", True, reproduces=(f"{BILINEAR}:stable_rank",)
    ),
    "effective_rank": Column("exp(H(sigma / sum sigma)), H the entropy", True),
    "spectral_radius": Column("max |lambda(M)| / ||M||_2 (1 for a normal M)", True),
    "real_eig_share": Column("the share of sum |lambda(M)| on real eigenvalues", True),
    "sym_positive_share": Column("the share of the symmetric part's sum |mu| on its positive eigenvalues", True),
    "rotary_symmetry_d{d}": Column(
        "<M(d), M(-d)^T>_F / (||M(d)|| ||M(-d)||), M(d) = Q R(d) K^T the form at rotary offset d", True, scope=BOTH
    ),
    "symmetry_gain": Column("symmetry of diag(g) M diag(g)", True, "gain_folded (not centred)", scope=BOTH),
    "directionality_gain": Column(
        "directionality of diag(g) M diag(g)", False, "gain_folded (not centred)", scope=BOTH
    ),
    "symmetry_bias": Column("symmetry of [Q; b_q^T][K; b_k^T]^T", True, "bias_augmented", scope=BOTH),
    "directionality_bias": Column("directionality of [Q; b_q^T][K; b_k^T]^T", False, "bias_augmented", scope=BOTH),
    # qk-spectral-fingerprint ("Fingerprint, Not Blueprint")
    "dir_frac": Column("||M_A||_F / ||M||_F, M_A = (M - M^T)/2", True, _FOLDED, (f"{FINGERPRINT}:dir_frac",)),
    "D_head": Column("sum |Im lambda| / sum |lambda| over M's eigenvalues", True, _FOLDED, (f"{FINGERPRINT}:D_head",)),
    "imag_mass": Column("sum |Im lambda| / ||M||_F", True, _FOLDED, (f"{FINGERPRINT}:imag_mass",)),
    "henrici": Column(
        "sqrt(max(||M||_F^2 - sum |lambda|^2, 0)) / ||M||_F: departure from normality",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:henrici",),
    ),  # fmt: skip
    "cond_eig": Column(
        "2-norm condition number of M's unit right eigenvectors (of its d_head nonzero-rank eigenvalues); left and "
        "right differ, so M^T gives another value",
        False,
        _FOLDED,
        (f"{FINGERPRINT}:cond_eig",),
    ),  # fmt: skip
    "spectral_radius_raw": Column(
        "max |lambda(M)|, in the weights' own scale (unnormalised)", True, _FOLDED, (f"{FINGERPRINT}:spectral_radius",)
    ),
    "content_pos_frac": Column(
        "sum of the positive eigenvalues of (M + M^T)/2 over the sum of their absolute values",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:content_pos_frac",),
    ),  # fmt: skip
    "prin_angle_mean": Column(
        "mean principal angle (degrees) between span W_q and span W_k",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:prin_angle_mean",),
    ),
    "prin_angle_max": Column(
        "largest principal angle (degrees) between span W_q and span W_k",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:prin_angle_max",),
    ),  # fmt: skip
    "rope_imag_frac": Column(
        "sum_t ||Im M_t|| / sum_t (||Re M_t|| + ||Im M_t||), M_t = (a + ic)(b - id)^T of rotary pair t (the model's "
        "own pairing and frequencies)",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:rope_imag_frac",),
    ),  # fmt: skip
    "freq_centroid": Column(
        "sum_t theta_t ||Im M_t|| / sum_t ||Im M_t||, theta in rad/token",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:freq_centroid",),
    ),
    "hi_freq_dir": Column(
        "the share of sum_t ||Im M_t|| on the highest-frequency half of the pairs",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:hi_freq_dir",),
    ),  # fmt: skip
    # attention-bilinear-forms
    "symmetric_energy": Column(
        "||S||^2 / ||L||^2, L = M^T, S its symmetric part", True, reproduces=(f"{BILINEAR}:symmetric_energy",)
    ),
    "profile_a": Column("||T||^2 / ||L||^2, T the antisymmetric part", True, reproduces=(f"{BILINEAR}:a",)),
    "profile_b": Column(
        "2 <alpha, beta> / ||L||^2, alpha (beta) the positive (absolute negative) eigenvalues of S, sorted, "
        "zero-padded",
        True,
        reproduces=(f"{BILINEAR}:b",),
    ),  # fmt: skip
    "profile_c": Column("||(alpha - beta)_+||^2 / ||L||^2", True, reproduces=(f"{BILINEAR}:c",)),
    "profile_d": Column("||(alpha - beta)_-||^2 / ||L||^2", True, reproduces=(f"{BILINEAR}:d",)),
    "pairing": Column("1 - ||alpha - beta|| / ||S||_F", True, reproduces=(f"{BILINEAR}:pairing",)),
    "rho": Column("||beta|| / ||alpha||", True, reproduces=(f"{BILINEAR}:rho",)),
    "pairing_bound": Column("1 - |1 - rho| / sqrt(1 + rho^2)", True, reproduces=(f"{BILINEAR}:pairing_bound",)),
    "lobe_departure": Column("||beta - rho alpha|| / ||beta||", True, reproduces=(f"{BILINEAR}:lobe_departure",)),
    "trace_ratio": Column("|tr L| / ||L||_F", True, reproduces=(f"{BILINEAR}:trace_ratio",)),
    "participation_ratio": Column(
        "(sum sigma^2)^2 / sum sigma^4 over L's singular values", True, reproduces=(f"{BILINEAR}:participation_ratio",)
    ),
    "leading_share": Column("sigma_1^2 / sum sigma^2", True, reproduces=(f"{BILINEAR}:leading_share",)),
    "head_type": Column(
        "+1 type I+ where (c - d)/(c + d) > 0.2 and c + d > 0.01, -1 type I- where < -0.2 and c + d > 0.01, "
        "0 type II (their weight_map_types rule)",
        True,
        reproduces=(f"{BILINEAR}:type",),
    ),  # fmt: skip
    # qk-spectral-analysis
    "sv2": Column(
        "the d_head squared singular values of M (W_Q^T W_K), descending, in the weights' scale: a list per head",
        True,
        reproduces=(f"{QK_SPECTRA}:eigen_values",),
    ),
    "sv2_min": Column(
        "min of the d_head squared singular values of M (W_Q^T W_K)",
        True,
        reproduces=(f"{QK_SPECTRA}:eigen_values_stats.MIN",),
    ),
    "sv2_max": Column("max of them", True, reproduces=(f"{QK_SPECTRA}:eigen_values_stats.MAX",)),
    "sv2_mean": Column("mean of them", True, reproduces=(f"{QK_SPECTRA}:eigen_values_stats.MEAN",)),
    "sv2_std": Column("standard deviation (n - 1) of them", True, reproduces=(f"{QK_SPECTRA}:eigen_values_stats.STD",)),
    "sv2_skew": Column(
        "mean(z^3), z standardised by that std (theirs; scipy's bias=True g1 is this times ((n - 1)/n)^-1.5)",
        True,
        reproduces=(f"{QK_SPECTRA}:eigen_values_stats.SKEW",),
    ),  # fmt: skip
    "sv2_kurtosis": Column(
        "mean(z^4) - 3 (theirs; scipy's bias=True Fisher g2 is (this + 3)((n - 1)/n)^-2 - 3)",
        True,
        reproduces=(f"{QK_SPECTRA}:eigen_values_stats.KURTOSIS",),
    ),  # fmt: skip
}
for _m in ("dir_frac", "D_head", "imag_mass", "henrici"):
    COLUMNS[f"{_m}_null_mean"] = Column(
        f"mean of {_m} over the null: the head's singular values in random Haar frames (100 draws seeded by model, "
        "layer and head)", True, _FOLDED, (f"{FINGERPRINT}:{_m}_null_mean",),
    )  # fmt: skip
    COLUMNS[f"{_m}_null_std"] = Column(
        f"standard deviation (n - 1) of {_m} over the null (theirs: ddof 0)",
        True,
        _FOLDED,
        (f"{FINGERPRINT}:{_m}_null_std",),
    )
    COLUMNS[f"{_m}_z"] = Column(f"({_m} - its null mean) / its null std", True, _FOLDED, (f"{FINGERPRINT}:{_m}_z",))


def described() -> list[dict]:
    """One object per column of every catalogued metric, in catalogue order."""
    out = []
    for name, entry in CATALOGUE.items():
        for column in entry.columns:
            c = COLUMNS[column]
            scope = ["layer"] if name == "layer_spectra" else list(c.scope)
            out.append(
                {
                    "column": column,
                    "metric": name,
                    "scope": scope,
                    "input": c.input,
                    "transpose_invariant": c.transpose_invariant,
                    "reproduces": list(c.reproduces) if name != "layer_spectra" else [],
                    "definition": c.definition
                    + (" (of the layer form, the sum over heads)" if name == "layer_spectra" else ""),
                }
            )
    return out
