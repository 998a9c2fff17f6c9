"""Numerics of scoring: scale-free scores (weights of any magnitude a float holds), failed
decompositions as NaN with a reason, and row norms that do not depend on the run or on the
thread count (wide grouped-query heads against a float64 oracle)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wqk.blocks import AttentionBlock, Rope
from wqk.metric_registry import measure_block, select
from wqk.metrics import score_block, score_dense, score_factors

ABSOLUTE = ("fro_norm", "E_r", "E_c")
# the follow-up families' columns in the weights' own units: M's eigenvalues scale as M, sigma^2 as M^2
SQUARED_SCALE = ("spectral_radius_raw",)
QUARTIC_SCALE = ("sv2", "sv2_min", "sv2_max", "sv2_mean", "sv2_std")
UNBOUNDED = ("cond_eig", "prin_angle_mean", "prin_angle_max", "participation_ratio", "sv2_kurtosis")


def rich_block(scale: float = 1.0, dtype=torch.float32) -> AttentionBlock:
    """Grouped-query heads with a rotary embedding, q/k biases and norm gains (every metric),
    weights and biases times `scale` (the gains are not: they multiply the weights)."""
    g = torch.Generator().manual_seed(0)
    h, h_kv, d, k = 8, 2, 64, 16
    q, kk = torch.randn(h, d, k, generator=g, dtype=torch.float64), torch.randn(h_kv, d, k, generator=g).double()
    q[:, 3] *= 4  # a dominant row and column: directionality away from 0
    kk[:, 7] *= 6
    qb, kb = torch.randn(h, k, generator=g).double(), torch.randn(h_kv, k, generator=g).double()
    gain = torch.rand(d, generator=g).double() + 0.5
    rope = Rope(tuple(100.0 ** (-np.arange(0, k, 2) / k)), "half", 64)

    def cast(t):
        return (t * 0.1 * scale).to(dtype)

    return AttentionBlock(
        "decoder", 0, cast(q), cast(kk), rope=rope, q_bias=cast(qb), k_bias=cast(kb), q_gain=gain.to(dtype),
        k_gain=gain.to(dtype),
    )  # fmt: skip


def score_columns(out: dict) -> list[str]:
    return [c for c in out if c != "reason" and c not in (*ABSOLUTE, *SQUARED_SCALE, *QUARTIC_SCALE)]


@pytest.mark.parametrize("scale", [1e10, 1e20, 1e-15, 1e-20])
def test_every_metric_is_scale_free(scale):
    """Today's extremes: 1e10 gave symmetry NaN, 1e20 an eigh crash, 1e-15 "zero matrix"."""
    (base_h, base_l), (heads, layer) = (measure_block(rich_block(s), select("all")) for s in (1.0, scale))
    assert heads["reason"] == [None] * 8 and layer["reason"] == [None]
    columns = score_columns(base_h)
    assert {"symmetry", "directionality", "stable_rank", "rotary_symmetry_d16", "symmetry_gain"} <= set(columns)
    assert {"dir_frac", "symmetric_energy", "sv2_skew", "rope_imag_frac"} <= set(columns)  # the follow-up families
    for c in columns:
        if c in UNBOUNDED:  # condition numbers and degrees: their own size times the float32 Grams' rounding
            np.testing.assert_allclose(heads[c], base_h[c], rtol=1e-5, err_msg=c)
            continue
        np.testing.assert_allclose(heads[c], base_h[c], atol=1e-5, err_msg=c)
        if c in base_l:  # the follow-up families have head rows only
            np.testing.assert_allclose(layer[c], base_l[c], atol=1e-5, err_msg=c)
    for c in ABSOLUTE:  # in the weights' own units: M scales by scale^2
        np.testing.assert_allclose(heads[c] / scale**2, base_h[c], rtol=1e-4, err_msg=c)
        np.testing.assert_allclose(layer[c] / scale**2, base_l[c], rtol=1e-4, err_msg=c)
    for columns, power in ((SQUARED_SCALE, 2), (QUARTIC_SCALE, 4)):
        for c in columns:
            np.testing.assert_allclose(heads[c] / scale**power, base_h[c], rtol=1e-4, err_msg=c)


SPECTRA = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")


@pytest.mark.parametrize("power", [12, -15, 40, -60])
def test_power_of_two_scales_give_the_same_bits(power):
    """Scaling by 2^p is exact: every score bit-identical, the absolute columns exactly 4^p times;
    the spectra to rounding (LAPACK's eig is not scale-equivariant to the last bit)."""
    (base_h, base_l), (heads, layer) = (measure_block(rich_block(s), select("all")) for s in (1.0, 2.0**power))
    for ours, base in ((heads, base_h), (layer, base_l)):
        for c in score_columns(base):
            if c in SPECTRA:
                np.testing.assert_allclose(ours[c], base[c], rtol=1e-6, err_msg=c)
            else:
                np.testing.assert_array_equal(ours[c], base[c], err_msg=c)
        for c in ABSOLUTE:
            np.testing.assert_array_equal(ours[c], np.ldexp(base[c], 2 * power), err_msg=c)
    for columns, times in ((SQUARED_SCALE, 2), (QUARTIC_SCALE, 4)):
        for c in columns:
            np.testing.assert_array_equal(heads[c], np.ldexp(base_h[c], times * power), err_msg=c)


def test_extreme_factors_and_dense_forms_against_float64():
    """score_factors and score_dense (the oracle path) are scale-free too, in float32."""
    g = torch.Generator().manual_seed(1)
    Q, K = torch.randn(3, 40, 8, generator=g, dtype=torch.float64), torch.randn(3, 40, 8, generator=g).double()
    want = score_dense(Q @ K.mT)
    for scale in (1e15, 1e-18):
        q, k = (Q * scale).float(), (K * scale).float()
        for out in (score_factors(q, k), score_dense((Q @ K.mT * scale**2).float())):
            np.testing.assert_allclose(out["symmetry"], want["symmetry"], atol=1e-5)
            np.testing.assert_allclose(out["directionality"], want["directionality"], atol=1e-5)
            np.testing.assert_allclose(out["fro_norm"] / scale**2, want["fro_norm"], rtol=1e-5)


def test_only_a_truly_zero_form_is_a_zero_matrix():
    """Tiny weights are no zero matrix; Q and K on disjoint head dimensions (Q K^T = 0 exactly) are."""
    q, k = torch.zeros(2, 16, 4), torch.zeros(2, 16, 4)
    g = torch.Generator().manual_seed(2)
    q[0], k[0] = torch.randn(16, 4, generator=g) * 1e-30, torch.randn(16, 4, generator=g) * 1e-30
    q[1, :, :2], k[1, :, 2:] = torch.randn(16, 2, generator=g), torch.randn(16, 2, generator=g)
    heads, _ = score_block(AttentionBlock("encoder", 0, q, k))
    assert heads["reason"][0] is None and np.isfinite(heads["symmetry"][0]) and heads["fro_norm"][0] > 0
    assert heads["reason"][1].startswith("zero matrix") and heads["fro_norm"][1] == 0
    assert np.isnan(heads["symmetry"][1]) and np.isnan(heads["directionality"][1])


def test_a_zero_head_sets_no_scale_for_the_layer():
    """Tiny heads beside a zero one: the layer form is scored at the tiny heads' scale."""
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(4, 32, 8, generator=g, dtype=torch.float64), torch.randn(2, 32, 8, generator=g).double()
    q[1] = 0
    want = score_dense(sum(q[h] @ k[h // 2].T for h in range(4)))
    heads, layer = score_block(AttentionBlock("decoder", 0, (q * 1e-25).float(), (k * 1e-25).float()))
    assert heads["reason"][1].startswith("zero matrix") and layer["reason"] == [None]
    np.testing.assert_allclose(layer["symmetry"], want["symmetry"], atol=1e-5)
    np.testing.assert_allclose(layer["directionality"], want["directionality"], atol=1e-5)


def test_a_failed_decomposition_is_nan_with_a_reason(monkeypatch):
    """LAPACK failing on one head's eigenvalues: that head's spectra NaN and its reason says why;
    the other heads and the paper's two scores are untouched."""
    block = rich_block()
    want, _ = measure_block(block, select("default"))
    eigvals, calls = torch.linalg.eigvals, []

    def failing(x):
        calls.append(len(x))
        if len(x) > 1 or len(calls) == 3:  # the batch, then the second head alone
            raise torch.linalg.LinAlgError("linalg.eigvals: the algorithm failed to converge")
        return eigvals(x)

    monkeypatch.setattr(torch.linalg, "eigvals", failing)
    heads, layer = measure_block(block, select("default"))
    assert calls[0] == 8  # the batch of heads came first
    assert all(np.isnan(heads[c][1]) for c in ("stable_rank", "spectral_radius", "sym_positive_share"))
    assert "did not converge" in heads["reason"][1]
    assert [r for i, r in enumerate(heads["reason"]) if i != 1] == [None] * 7 and layer["reason"] == [None]
    others = [0, 2, 3, 4, 5, 6, 7]
    np.testing.assert_array_equal(heads["spectral_radius"][others], want["spectral_radius"][others])
    for c in ("symmetry", "directionality", "E_r"):
        np.testing.assert_array_equal(heads[c], want[c])


def wide_block(d: int, n_heads: int, n_kv: int, k: int = 128) -> AttentionBlock:
    """A random grouped-query Llama layer at nn.Linear init scale (bench_score_llama's)."""
    g = torch.Generator().manual_seed(d)
    wq = torch.randn(n_heads * k, d, generator=g) * d**-0.5
    wk = torch.randn(n_kv * k, d, generator=g) * d**-0.5
    return AttentionBlock("decoder", 0, wq.view(n_heads, k, d).mT, wk.view(n_kv, k, d).mT)


def float64_oracle(block: AttentionBlock) -> dict:
    q, k, group = block.q.double(), block.k.double(), block.group_size
    per_head = [score_dense(q[h] @ k[h // group].T) for h in range(block.n_heads)]
    return {c: np.concatenate([o[c] for o in per_head]) for c in ("symmetry", "directionality", "E_r", "E_c")}


def test_wide_heads_rerun_identically_on_one_and_two_threads():
    """Row norms (E_r) of wide grouped-query heads: bit-identical on every rerun at a thread
    count, within 1e-5 of float64 and of each other across one and two threads."""
    block = wide_block(d=2048, n_heads=8, n_kv=2)
    oracle = float64_oracle(block)
    threads = torch.get_num_threads()
    runs = {}
    try:
        for n in (1, 2, 1, 2, 2):
            torch.set_num_threads(n)
            runs.setdefault(n, []).append(score_block(block))
    finally:
        torch.set_num_threads(threads)
    for n, outs in runs.items():
        first_h, first_l = outs[0]
        for heads, layer in outs[1:]:
            for c in ("symmetry", "directionality", "E_r", "E_c"):
                np.testing.assert_array_equal(heads[c], first_h[c], err_msg=f"{c}, {n} threads")
                np.testing.assert_array_equal(layer[c], first_l[c], err_msg=f"{c}, {n} threads, layer")
        for c, want in oracle.items():
            np.testing.assert_allclose(first_h[c], want, atol=1e-5, err_msg=f"{c}, {n} threads")
    for c in ("symmetry", "directionality", "E_r", "E_c"):
        np.testing.assert_allclose(runs[1][0][0][c], runs[2][0][0][c], atol=1e-5, err_msg=c)
        np.testing.assert_allclose(runs[1][0][1][c], runs[2][0][1][c], atol=1e-5, err_msg=c)


def test_every_function_torch_hands_to_mkl_vml_is_primed():
    """wqk.vml.prime calls each function of ATen/cpu/vml.h that torch computes with MKL's VML
    (a function it missed would be set up by its first, parallel call: the fault it avoids)."""
    import re
    from pathlib import Path

    from wqk import vml

    header = Path(torch.__file__).parent / "include" / "ATen" / "cpu" / "vml.h"
    if not (header.exists() and torch.backends.mkl.is_available()):
        pytest.skip("this torch computes no function with MKL's VML (or ships no ATen headers)")
    listed = set(re.findall(r"^IMPLEMENT_VML_MKL\((\w+),", header.read_text(), re.M))
    assert listed == set(vml.FUNCTIONS)
    assert all(callable(getattr(torch, name)) for name in vml.FUNCTIONS)
