"""The scores: factored (Gram) path against the dense float64 oracle, and their definitions."""

import numpy as np
import pytest
import torch

from wqk.blocks import AttentionBlock
from wqk.metrics import _layer_transposed, _row_blocks, quad_diag, score_block, score_dense, score_factors, sym_gram


def numpy_scores(M: np.ndarray, n_std: float = 2.0) -> tuple[float, float]:
    """DESIGN.md section 2, written independently of the library (numpy, explicit loops)."""
    S = (M + M.T) / 2
    sym = 2 * (S**2).sum() / (M**2).sum() - 1
    r = np.sqrt((M**2).sum(1))
    c = np.sqrt((M**2).sum(0))
    t_r = r.mean() + n_std * r.std(ddof=1)
    t_c = c.mean() + n_std * c.std(ddof=1)
    e_r = sum(x - t_r for x in r if x > t_r)
    e_c = sum(x - t_c for x in c if x > t_c)
    d = 0.0 if e_r + e_c == 0 else (e_r - e_c) / (e_r + e_c)
    return sym, d


def assert_close_rel(a, b, rel=1e-6):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize(
    "batch,d_q,d_k,w",
    [(3, 16, 16, 4), (2, 40, 40, 40), (4, 64, 64, 96), (2, 24, 32, 8), (1, 7, 7, 1)],
)
def test_factored_equals_dense_oracle(batch, d_q, d_k, w):
    g = torch.Generator().manual_seed(d_q * 1000 + w)
    Q = torch.randn(batch, d_q, w, generator=g, dtype=torch.float64)
    K = torch.randn(batch, d_k, w, generator=g, dtype=torch.float64)
    # make some rows/columns dominant so the directionality excess is not trivially zero
    Q[:, 0] *= 5
    K[:, -1] *= 8
    fact = score_factors(Q, K)
    dense = score_dense(Q @ K.transpose(1, 2))
    for f in ("directionality", "fro_norm", "E_r", "E_c"):
        assert_close_rel(fact[f], dense[f])
    if d_q == d_k:
        assert_close_rel(fact["symmetry"], dense["symmetry"])
    else:
        assert np.isnan(fact["symmetry"]).all() and "non-square" in fact["reason"][0]


def test_dense_matches_independent_numpy_definition():
    rng = np.random.default_rng(0)
    for shape in [(12, 12), (30, 30)]:
        M = rng.standard_normal(shape)
        M[:, 3] *= 6  # a dominant column: negative directionality
        sym, d = numpy_scores(M)
        out = score_dense(torch.from_numpy(M))
        assert out["symmetry"][0] == pytest.approx(sym, rel=1e-9)
        assert out["directionality"][0] == pytest.approx(d, rel=1e-9, abs=1e-12)
        assert d < -0.5


def test_symmetric_skew_and_rank_deficient_cases():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(10, 10, generator=g, dtype=torch.float64)
    eye = torch.eye(10, dtype=torch.float64)
    # Q = K: M = Q Q^T symmetric
    assert score_factors(A, A)["symmetry"][0] == pytest.approx(1.0, abs=1e-12)
    # Q = [A | I], K = [I | -A]: M = A - A^T, skew-symmetric
    skew = score_factors(torch.cat([A, eye], 1), torch.cat([eye, -A], 1))
    assert skew["symmetry"][0] == pytest.approx(-1.0, abs=1e-12)
    # rank one, column dominated: M = u v^T with v concentrated on one key coordinate
    u = torch.randn(10, 1, generator=g, dtype=torch.float64)
    v = torch.full((10, 1), 0.01, dtype=torch.float64)
    v[4] = 3.0
    rank1 = score_factors(u, v)
    assert_close_rel(rank1["symmetry"], score_dense(u @ v.T)["symmetry"])
    assert rank1["directionality"][0] < -0.9


def test_zero_matrix_gives_nan_with_reason():
    out = score_factors(torch.zeros(2, 8, 4), torch.randn(2, 8, 4))
    assert np.isnan(out["symmetry"]).all()
    assert all("zero matrix" in r for r in out["reason"])
    assert (out["fro_norm"] == 0).all()


@pytest.mark.parametrize("d_k", [8, 6])
def test_zero_matrix_has_every_score_nan_in_both_paths(d_k):
    """Directionality too: E_r = E_c = 0 of a zero M is no score of 0 (square or not)."""
    q, k = torch.randn(3, 8, 4), torch.randn(3, d_k, 4)
    k[1] = 0
    for out in (score_factors(q, k), score_dense(q @ k.mT)):
        assert np.isnan(out["symmetry"][1]) and np.isnan(out["directionality"][1])
        assert out["reason"][1].startswith("zero matrix") and out["fro_norm"][1] == 0
        assert np.isfinite(out["directionality"][[0, 2]]).all()
        assert not any(r and r.startswith("zero") for r in (out["reason"][0], out["reason"][2]))


def test_nonfinite_weights_flag_only_their_head():
    q = torch.randn(4, 16, 4)
    k = torch.randn(4, 16, 4)
    q[2, 3, 1] = float("nan")
    k[3, 0, 0] = float("inf")
    out = score_factors(q, k)
    assert np.isfinite(out["symmetry"][:2]).all()
    assert np.isnan(out["symmetry"][2:]).all() and np.isnan(out["directionality"][2:]).all()
    assert out["reason"][:2] == [None, None]
    assert "non-finite" in out["reason"][2] and "non-finite" in out["reason"][3]


def gqa_block(h=8, h_kv=2, d=32, k=4, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return AttentionBlock(
        "decoder", 0, torch.randn(h, d, k, generator=g, dtype=dtype), torch.randn(h_kv, d, k, generator=g, dtype=dtype)
    )


def test_gqa_layer_form_repeats_key_heads():
    block = gqa_block()
    group = block.n_heads // block.n_kv_heads
    M = sum(block.q[h] @ block.k[h // group].T for h in range(block.n_heads))
    qt, kt = _layer_transposed(block.q.mT, block.k.mT, group)
    q_cat, k_cat = qt.T, kt.T
    torch.testing.assert_close(q_cat @ k_cat.T, M)
    assert q_cat.shape[1] == block.n_kv_heads * block.q.shape[2]
    # tiling (h % n_kv), the published code's mistake, gives a different form
    tiled = sum(block.q[h] @ block.k[h % block.n_kv_heads].T for h in range(block.n_heads))
    assert not torch.allclose(tiled, M)


# (16, 4, 1024, 64): factored layer form in 4 triangle blocks; (4, 1, 512, 128): per-head
# forms in 2 blocks; (4, 4, 256, 64): dense layer form.
@pytest.mark.parametrize(
    "shape", [(8, 2, 32, 4), (4, 4, 12, 6), (6, 1, 20, 5), (4, 4, 256, 64), (16, 4, 1024, 64), (4, 1, 512, 128)]
)
def test_score_block_heads_and_layer_against_oracle(shape):
    h, h_kv, d, k = shape
    block = gqa_block(h, h_kv, d, k, seed=h * d)
    per_head, per_layer = score_block(block, dtype=torch.float64)
    group = h // h_kv
    Ms = torch.stack([block.q[i] @ block.k[i // group].T for i in range(h)])
    oracle_heads = score_dense(Ms)
    oracle_layer = score_dense(Ms.sum(0))
    for f in ("symmetry", "directionality", "fro_norm", "E_r", "E_c"):
        assert_close_rel(per_head[f], oracle_heads[f])
        assert_close_rel(per_layer[f], oracle_layer[f])


def test_float32_default_close_to_float64():
    block = gqa_block(8, 2, 128, 16, seed=3)
    h64, l64 = score_block(block, dtype=torch.float64)
    block32 = AttentionBlock(block.stack, block.layer, block.q.float(), block.k.float())
    h32, l32 = score_block(block32)
    for f in ("symmetry", "directionality"):
        np.testing.assert_allclose(h32[f], h64[f], atol=1e-5)
        np.testing.assert_allclose(l32[f], l64[f], atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run on the device machine)")
def test_cuda_matches_cpu():
    block = AttentionBlock("encoder", 0, torch.randn(12, 384, 32), torch.randn(12, 384, 32))
    cpu_h, cpu_l = score_block(block, device="cpu")
    gpu_h, gpu_l = score_block(block, device="cuda")
    for f in ("symmetry", "directionality"):
        np.testing.assert_allclose(gpu_h[f], cpu_h[f], atol=1e-5)
        np.testing.assert_allclose(gpu_l[f], cpu_l[f], atol=1e-5)


@pytest.mark.parametrize("w", [1, 64, 130, 300])
def test_block_triangular_products_equal_full_products(w):
    g = torch.Generator().manual_seed(w)
    x = torch.randn(3, w, 50, generator=g, dtype=torch.float64)
    assert len(_row_blocks(w)) == (1 if w <= 64 else -(-w // 64))  # 130 and 300 take several blocks
    torch.testing.assert_close(sym_gram(x), x @ x.mT)
    # two forms per x (a key head shared by two query heads): diag(x_b^T g_(b,j) x_b)
    a = torch.randn(6, w, w, generator=g, dtype=torch.float64)
    forms = a + a.mT
    expected = torch.stack([torch.diagonal(x[i // 2].mT @ forms[i] @ x[i // 2]) for i in range(6)])
    torch.testing.assert_close(quad_diag(forms, x, group=2), expected)


def test_weight_views_score_exactly_like_aligned_copies():
    """Adapters hand over views of memory-mapped weights, often not 64-byte aligned; the
    scores must not depend on that (MKL's float32 results can), so that a checkpoint and its
    matrices file score the same to the last bit."""
    g = torch.Generator().manual_seed(5)
    h, h_kv, k, d = 8, 2, 8, 64
    storage = torch.randn(2 + (h + h_kv) * k * d, generator=g)
    wq = storage[2 : 2 + h * k * d].view(h * k, d)  # 8 bytes past an aligned address
    wk = storage[2 + h * k * d :].view(h_kv * k, d)
    assert wq.data_ptr() % 64 != 0
    view = AttentionBlock("decoder", 0, wq.view(h, k, d).transpose(1, 2), wk.view(h_kv, k, d).transpose(1, 2))
    copy = AttentionBlock("decoder", 0, view.q.contiguous(), view.k.contiguous())
    for ours, theirs in zip(score_block(view), score_block(copy), strict=True):
        for f in ("symmetry", "directionality", "fro_norm", "E_r", "E_c"):
            np.testing.assert_array_equal(ours[f], theirs[f])


def test_nonfinite_key_head_flags_its_query_heads_and_the_layer():
    block = gqa_block(8, 2, 32, 4, dtype=torch.float32)
    block.k[1, 5, 2] = float("inf")
    per_head, per_layer = score_block(block)
    assert np.isfinite(per_head["symmetry"][:4]).all() and per_head["reason"][:4] == [None] * 4
    assert np.isnan(per_head["symmetry"][4:]).all()
    assert all("non-finite" in r for r in per_head["reason"][4:])
    assert np.isnan(per_layer["symmetry"][0]) and "non-finite" in per_layer["reason"][0]
    clean = gqa_block(8, 2, 32, 4, dtype=torch.float32)
    np.testing.assert_allclose(per_head["symmetry"][:4], score_block(clean)[0]["symmetry"][:4], rtol=1e-5)


def _faulty_quad_diag(monkeypatch, fault, kind: str = "scale") -> list:
    """metrics.quad_diag with a fault put into its float32 results at the calls `fault(n)` picks
    (n counts from 1). kind "scale": the first half of the batch (at least one form) 1e-4 too
    large, as the first layer's row norms came out now and then on a busy Xeon (issue 20);
    "scale_n": the same, 1e-4 * n, never twice alike; "shift": 1% of the first form's largest
    squared norm moved to its smallest, so that every sum stays within float32's roundings
    (issue 29: E_r off, the sums right). Returns the dtypes of the calls made."""
    from wqk import metrics

    real, calls = metrics.quad_diag, []

    def quad_diag(g, x, group=1):
        out = real(g, x, group)
        calls.append(out.dtype)
        if out.dtype == torch.float32 and fault(len(calls)):
            if kind == "shift":
                _shift(out)
            else:
                out[: max(1, len(out) // 2)] *= 1 + 1e-4 * (len(calls) if kind == "scale_n" else 1)
        return out

    monkeypatch.setattr(metrics, "quad_diag", quad_diag)
    return calls


def _shift(norms2: torch.Tensor) -> None:
    lo, hi = int(norms2[0].argmin()), int(norms2[0].argmax())
    moved = norms2[0, hi] * 0.01
    norms2[0, hi] -= moved
    norms2[0, lo] += moved


def _float32_block():
    block = gqa_block(8, 2, 128, 16, seed=3)
    return block, AttentionBlock(block.stack, block.layer, block.q.float(), block.k.float())


@pytest.mark.parametrize("kind, differed", [("scale", 4), ("shift", 1)])
def test_norms_that_come_out_wrong_once_are_computed_again(monkeypatch, caplog, kind, differed):
    """Row norms that came out wrong once, off their sum or within it: computed until two in a row
    agree, to the bits of a run without the fault."""
    _, block = _float32_block()
    clean = score_block(block)
    assert not [r for r in caplog.records if r.name == "wqk.metrics"]  # a fault-free run checks out
    calls = _faulty_quad_diag(monkeypatch, lambda n: n == 1, kind)
    faulty = score_block(block)
    for got, want in zip(faulty, clean):
        for f in ("symmetry", "directionality", "fro_norm", "E_r", "E_c"):
            np.testing.assert_array_equal(got[f], want[f])
    assert calls.count(torch.float32) == len(calls) == 9  # heads: rows 3 times, columns twice; layer: each twice
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "wqk.metrics"]
    assert f"squared row norms of {differed} of 8 forms came out different" in warning
    assert "computed 3 times before two in a row agreed bit for bit" in warning


def test_a_fault_in_the_repeated_key_gram_is_not_carried_into_each_computation(monkeypatch, caplog):
    """The key head's Gram repeated for its query heads (a copy, made by a parallel kernel) came
    out wrong once: each computation makes its own copy, so the fault is outvoted, to the bits of
    a run without it (issue 29: MobileLLM's first layer, with the recomputation already in place)."""
    from wqk import metrics

    _, block = _float32_block()
    clean = score_block(block)
    real, copies = metrics.repeated, []

    def repeated(g, repeat):
        out = real(g, repeat).clone()
        copies.append(repeat)
        if repeat > 1 and len(copies) == 1:
            out[0] *= 1 + 1e-4  # the first query head's copy of its key Gram, slightly off
        return out

    monkeypatch.setattr(metrics, "repeated", repeated)
    faulty = score_block(block)
    for got, want in zip(faulty, clean):
        for f in ("symmetry", "directionality", "fro_norm", "E_r", "E_c"):
            np.testing.assert_array_equal(got[f], want[f])
    assert copies[:3] == [4, 4, 4]  # the rows' three computations, each with its own copy
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "wqk.metrics"]
    assert "squared row norms of 1 of 8 forms came out different" in warning


def test_a_fault_within_the_sum_changes_the_scores_it_is_kept_from():
    """The fault of the shift kind passes the sum check but moves E_r: only a second
    computation can see it (what the test above relies on)."""
    from wqk import metrics

    _, block = _float32_block()
    f = metrics.block_factors(block, torch.device("cpu"))
    fro2 = (f.gram_q.view(2, 4, 16, 16) * f.gram_k[:, None]).sum((-2, -1)).view(8)
    row2 = metrics.quad_diag(f.gram_k.repeat_interleave(f.group, 0), f.qt)
    shifted = row2.clone()
    _shift(shifted)
    assert not metrics._off_sum(shifted, fro2).any() and not metrics._off_sum(row2, fro2).any()
    e_r, e_r_shifted = (metrics._excess(n[:1].sqrt(), 2.0).item() for n in (row2, shifted))
    assert abs(e_r_shifted - e_r) > 1e-3 * e_r


def test_norms_wrong_every_time_are_computed_in_float64(monkeypatch, caplog):
    block64, block = _float32_block()
    _faulty_quad_diag(monkeypatch, lambda n: True)
    heads, layer = score_block(block)
    heads64, layer64 = score_block(block64, dtype=torch.float64)
    for f in ("E_r", "E_c", "directionality"):
        assert_close_rel(heads[f], heads64[f], rel=1e-5)
        assert_close_rel(layer[f], layer64[f], rel=1e-5)
    warnings = [r.getMessage() for r in caplog.records if r.name == "wqk.metrics"]
    assert len(warnings) == 4 and all("the same in two computations: computed in float64" in w for w in warnings)


def test_norms_different_every_time_are_computed_in_float64(monkeypatch, caplog):
    from wqk.metrics import NORM_ATTEMPTS

    block64, block = _float32_block()
    calls = _faulty_quad_diag(monkeypatch, lambda n: True, "scale_n")
    heads, layer = score_block(block)
    heads64, layer64 = score_block(block64, dtype=torch.float64)
    for f in ("E_r", "E_c", "directionality"):
        assert_close_rel(heads[f], heads64[f], rel=1e-5)
        assert_close_rel(layer[f], layer64[f], rel=1e-5)
    assert calls[: NORM_ATTEMPTS + 1] == [torch.float32] * NORM_ATTEMPTS + [torch.float64]
    warnings = [r.getMessage() for r in caplog.records if r.name == "wqk.metrics"]
    assert len(warnings) == 4
    assert all(
        f"came out different in each of {NORM_ATTEMPTS} computations: computed in float64" in w for w in warnings
    )
