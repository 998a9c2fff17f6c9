"""The head metrics of "On attention heads and bilinear forms" (aodesky/attention-bilinear-forms,
arXiv 2609.22990), wqk.metric_registry entry "bilinear_forms", from the forms of wqk.head_forms.

Their object is L = W_K^T W_Q = M^T, raw weights; every metric here is unchanged by L -> L^T.
S, T the symmetric and antisymmetric parts, alpha the positive eigenvalues of S and beta the
absolute values of its negative ones, each sorted from the largest, zero-padded to one length
(2 d_head: padding with zeros changes no norm below), u = alpha - beta:

    symmetric_energy = ||S||^2 / ||L||^2
    profile_a, _b, _c, _d: a = ||T||^2 / ||L||^2, b = 2<alpha, beta> / ||L||^2, c = ||u_+||^2 / ||L||^2, d = ||u_-||^2 / ||L||^2
        (a + b + c + d = 1, as ||S||^2 = ||alpha||^2 + ||beta||^2)
    pairing = 1 - ||u|| / ||S||,  rho = ||beta|| / ||alpha||,  pairing_bound = 1 - |1 - rho| / sqrt(1 + rho^2)
    lobe_departure = ||beta - rho alpha|| / ||beta||,  trace_ratio = |tr L| / ||L||_F
    participation_ratio = (sum sigma^2)^2 / sum sigma^4,  leading_share = sigma_1^2 / sum sigma^2
    head_type = +1 (type I+) where (c - d)/(c + d) > 0.2 and c + d > 0.01, -1 (I-) where < -0.2
        and c + d > 0.01, else 0 (type II): their weight_map_types rule
(their stable_rank, sum sigma^2 / sigma_1^2, is the spectra family's stable_rank). Their `balance`
is 1 for every head whose [W_K^T W_Q^T] has full rank (Sylvester's law of inertia): not computed.
"""

from __future__ import annotations

import numpy as np
import torch

from .head_forms import HeadForms, memo
from .metric_catalogue import BILINEAR_FORMS_COLUMNS, Context, register

COLUMNS = BILINEAR_FORMS_COLUMNS
TYPE_IMBALANCE = 0.2  # |(c - d)/(c + d)| above this: a type I head ...
TYPE_EDGE = 0.01  # ... when c + d is above this


def bilinear_columns(forms: HeadForms) -> dict[str, np.ndarray]:
    fro2 = forms.fro2
    defined = (fro2 > 0) & ~forms.failed
    l2 = torch.where(defined, fro2, 1.0)
    s2 = ((fro2 + forms.trace_sq) / 2).clamp_min(0)  # ||S||^2 = (||M||^2 + tr M^2) / 2
    t2 = ((fro2 - forms.trace_sq) / 2).clamp_min(0)
    mu = forms.sym_eigenvalues
    alpha = mu.clamp_min(0).sort(-1, descending=True).values
    beta = (-mu).clamp_min(0).sort(-1, descending=True).values
    u = alpha - beta
    na, nb = alpha.norm(dim=-1), beta.norm(dim=-1)
    nan = torch.full_like(na, torch.nan)
    rho = torch.where(na > 0, nb / torch.where(na > 0, na, 1.0), nan)
    c, d = (u.clamp_min(0) ** 2).sum(-1) / l2, (u.clamp_max(0) ** 2).sum(-1) / l2
    imbalance = torch.where(c + d > 0, (c - d) / torch.where(c + d > 0, c + d, 1.0), 0.0)
    edge = c + d > TYPE_EDGE
    head_type = torch.where(edge & (imbalance > TYPE_IMBALANCE), 1.0, 0.0)
    head_type = torch.where(edge & (imbalance < -TYPE_IMBALANCE), -1.0, head_type)
    sv2 = forms.sv2
    total = sv2.sum(-1)
    safe_total = torch.where(total > 0, total, 1.0)
    out = {
        "symmetric_energy": s2 / l2,
        "profile_a": t2 / l2,
        "profile_b": 2 * (alpha * beta).sum(-1) / l2,
        "profile_c": c,
        "profile_d": d,
        "pairing": torch.where(s2 > 0, 1 - u.norm(dim=-1) / torch.where(s2 > 0, s2, 1.0).sqrt(), nan),
        "rho": rho,
        "pairing_bound": 1 - (1 - rho).abs() / (1 + rho * rho).sqrt(),
        "lobe_departure": torch.where(
            nb > 0, (beta - rho[..., None] * alpha).norm(dim=-1) / torch.where(nb > 0, nb, 1.0), nan
        ),
        "trace_ratio": forms.trace.abs() / l2.sqrt(),
        "participation_ratio": total**2 / (sv2 * sv2).sum(-1).clamp_min(torch.finfo(sv2.dtype).tiny),
        "leading_share": sv2[..., 0] / safe_total,
        "head_type": head_type,
    }
    return {k: torch.where(defined, v, torch.nan).cpu().numpy().astype(np.float64) for k, v in out.items()}


@register(
    "bilinear_forms",
    COLUMNS,
    "per head, of L = M^T (raw weights), as attention-bilinear-forms: symmetric_energy ||S||^2/||L||^2; the "
    "profile a, b, c, d of the symmetric part's lobes (a + b + c + d = 1); pairing, rho, pairing_bound, "
    "lobe_departure; trace_ratio; participation_ratio and leading_share of sigma^2; head_type +1 (I+), 0 (II), -1 (I-).",
    cheap=False,
)
def head_bilinear_forms(ctx: Context):
    if ctx.factors.cross is None:
        return {}, {}
    return bilinear_columns(memo(ctx.factors, "raw", lambda: HeadForms.of(ctx.factors))), {}
