"""The metrics beyond the paper's two against dense float64 oracles written here from their
definitions (never from wqk's own functions): spectra of M = Q K^T, rotary-aware symmetry
with both row orders, folded forms; and the registry's selection and columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wqk.blocks import AttentionBlock, Rope
from wqk.errors import WqkError
from wqk.metric_registry import REGISTRY, measure_block, select
from wqk.score_table import score_table, to_frame

# ---------------------------------------------------------------- oracles (dense, float64)


def dense_heads(block: AttentionBlock) -> list[np.ndarray]:
    q, k, g = block.q.double().numpy(), block.k.double().numpy(), block.group_size
    return [q[h] @ k[h // g].T for h in range(block.n_heads)]


def paper_oracle(m: np.ndarray, n_std: float = 2.0) -> tuple[float, float]:
    sym = float((m * m.T).sum() / (m * m).sum()) if m.shape[0] == m.shape[1] else np.nan

    def excess(norms):
        t = norms.mean() + n_std * norms.std(ddof=1)
        return np.clip(norms - t, 0, None).sum()

    e_r, e_c = excess(np.linalg.norm(m, axis=1)), excess(np.linalg.norm(m, axis=0))
    return sym, float((e_r - e_c) / (e_r + e_c)) if e_r + e_c > 0 else 0.0


def spectra_oracle(m: np.ndarray) -> dict[str, float]:
    sv = np.linalg.svd(m, compute_uv=False)
    p = sv / sv.sum()
    p = p[p > 0]
    out = {"stable_rank": (sv**2).sum() / sv[0] ** 2, "effective_rank": np.exp(-(p * np.log(p)).sum())}
    if m.shape[0] != m.shape[1]:
        return out | {"spectral_radius": np.nan, "real_eig_share": np.nan, "sym_positive_share": np.nan}
    lam = np.linalg.eigvals(m)
    mod = np.abs(lam)
    real = np.abs(lam.imag) <= 1e-3 * mod
    mu = np.linalg.eigvalsh((m + m.T) / 2)
    return out | {
        "spectral_radius": mod.max() / sv[0],
        "real_eig_share": mod[real].sum() / mod.sum(),
        "sym_positive_share": mu[mu > 0].sum() / np.abs(mu).sum(),
    }


def rotation(k: int, freqs, layout: str, d: int) -> np.ndarray:
    """R(d) on a head's k dims: pair p rotated by d * freqs[p]; dims past the pairs fixed."""
    r, half = np.eye(k), len(freqs)
    for p, f in enumerate(freqs):
        a, b = (p, p + half) if layout == "half" else (2 * p, 2 * p + 1)
        c, s = np.cos(d * f), np.sin(d * f)
        r[a, a], r[a, b], r[b, a], r[b, b] = c, -s, s, c
    return r


def rotary_oracle(q: np.ndarray, k: np.ndarray, rot_plus: np.ndarray, rot_minus: np.ndarray) -> float:
    """s(d) of the form sum_h Q_h R K_h^T from lists of per-head factors."""
    m_plus = sum(qh @ rot_plus @ kh.T for qh, kh in zip(q, k, strict=True))
    m_minus = sum(qh @ rot_minus @ kh.T for qh, kh in zip(q, k, strict=True))
    return float((m_plus * m_minus.T).sum() / (np.linalg.norm(m_plus) * np.linalg.norm(m_minus)))


# ---------------------------------------------------------------- blocks


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def random_block(h=4, h_kv=4, d=24, k=6, seed=0, **extra) -> AttentionBlock:
    g = _gen(seed)
    return AttentionBlock(
        "encoder", 0, torch.randn(h, d, k, generator=g), torch.randn(h_kv, d, k, generator=g), **extra
    )


def planted_symmetric(seed=1) -> AttentionBlock:
    """K_h = Q_h A_h with A_h symmetric: M_h = Q_h A_h Q_h^T is symmetric."""
    g = _gen(seed)
    q = torch.randn(3, 20, 5, generator=g)
    a = torch.randn(3, 5, 5, generator=g)
    return AttentionBlock("encoder", 0, q, q @ (a + a.mT))


def planted_columns(seed=2) -> AttentionBlock:
    """A few rows of K (columns of M = Q K^T) much larger than the rest."""
    g = _gen(seed)
    q, kk = torch.randn(2, 30, 4, generator=g), torch.randn(2, 30, 4, generator=g)
    kk[:, :2] *= 20
    return AttentionBlock("decoder", 0, q, kk)


CASES = {
    "random": random_block(),
    "grouped-query": random_block(h=6, h_kv=2, seed=3),
    "planted symmetric": planted_symmetric(),
    "planted column-dominant": planted_columns(),
    "non-square (cross)": AttentionBlock("cross", 0, torch.randn(2, 12, 4), torch.randn(2, 9, 4)),
}

SPECTRA = ("stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share")


@pytest.mark.parametrize("case", CASES)
def test_spectra_per_head_and_layer_equal_the_dense_oracle(case):
    block = CASES[case]
    heads, layer = measure_block(block, select("all"), dtype=torch.float64)
    dense = dense_heads(block)
    for h, m in enumerate(dense):
        want = spectra_oracle(m)
        for c in SPECTRA:
            np.testing.assert_allclose(heads[c][h], want[c], rtol=1e-7, atol=1e-9, err_msg=f"{case} head {h} {c}")
    want = spectra_oracle(sum(dense))
    for c in SPECTRA:
        np.testing.assert_allclose(layer[c][0], want[c], rtol=1e-7, atol=1e-9, err_msg=f"{case} layer {c}")


def test_planted_structures_read_as_planted():
    heads, _ = measure_block(planted_symmetric(), select("default"), dtype=torch.float64)
    np.testing.assert_allclose(heads["symmetry"], 1.0, atol=1e-10)
    np.testing.assert_allclose(heads["real_eig_share"], 1.0)  # symmetric: every eigenvalue real
    np.testing.assert_allclose(heads["spectral_radius"], 1.0)  # normal: radius = largest singular value
    heads, _ = measure_block(planted_columns(), select("default"), dtype=torch.float64)
    assert (heads["directionality"] < -0.5).all()
    # a random k x k has few real eigenvalues (about sqrt(2k / pi) of k): far from all real
    heads, _ = measure_block(random_block(h=8, d=64, k=32, seed=5), select("default"), dtype=torch.float64)
    assert np.median(heads["real_eig_share"]) < 0.6


def test_float32_spectra_within_1e4_of_the_oracle():
    block = random_block(h=4, h_kv=2, d=64, k=16, seed=7)
    heads, _ = measure_block(block, select("default"))  # float32 weights and Grams
    for h, m in enumerate(dense_heads(block)):
        want = spectra_oracle(m)
        for c in ("stable_rank", "effective_rank", "spectral_radius", "sym_positive_share"):
            np.testing.assert_allclose(heads[c][h], want[c], rtol=1e-4, err_msg=c)


def _rope(k, rotary_dim, layout, theta=10000.0, context=64):
    freqs = tuple(theta ** (-np.arange(0, rotary_dim, 2) / rotary_dim))
    return Rope(freqs, layout, context), freqs


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [8, 4])  # full and partial rotary
@pytest.mark.parametrize("h_kv", [4, 2])
def test_rotary_symmetry_equals_the_dense_oracle(layout, rotary_dim, h_kv):
    k = 8
    rope, freqs = _rope(k, rotary_dim, layout, theta=100.0)
    block = random_block(h=4, h_kv=h_kv, d=20, k=k, seed=11, rope=rope)
    offsets = (0, 1, 3, 16, 63)
    heads, layer = measure_block(block, select("default"), dtype=torch.float64, rotary_offsets=offsets)
    q, kk, g = block.q.double().numpy(), block.k.double().numpy(), block.group_size
    for d in offsets:
        plus, minus = rotation(k, freqs, layout, d), rotation(k, freqs, layout, -d)
        col = f"rotary_symmetry_d{d}"
        for h in range(4):
            want = rotary_oracle([q[h]], [kk[h // g]], plus, minus)
            np.testing.assert_allclose(heads[col][h], want, rtol=1e-9, atol=1e-12, err_msg=f"{col} head {h}")
        want = rotary_oracle(list(q), [kk[h // g] for h in range(4)], plus, minus)
        np.testing.assert_allclose(layer[col][0], want, rtol=1e-9, atol=1e-12, err_msg=f"{col} layer")
    np.testing.assert_allclose(heads["rotary_symmetry_d0"], heads["symmetry"], atol=1e-12)
    assert np.abs(heads["rotary_symmetry_d16"] - heads["symmetry"]).max() > 1e-3  # the rotation matters


def test_rotary_row_order_matters():
    """The same weights read with the other row order give other s(d): the layout is not cosmetic."""
    scores = {}
    for layout in ("half", "interleaved"):
        rope, _ = _rope(8, 8, layout, theta=100.0)
        heads, _ = measure_block(random_block(k=8, seed=4, rope=rope), select("default"), rotary_offsets=(5,))
        scores[layout] = heads["rotary_symmetry_d5"]
    assert np.abs(scores["half"] - scores["interleaved"]).max() > 1e-3


def test_default_offsets_are_powers_of_two_below_the_context():
    rope, _ = _rope(8, 8, "half", context=100)
    heads, _ = measure_block(random_block(k=8, rope=rope), select("default"))
    assert sorted(int(c.rsplit("_d", 1)[1]) for c in heads if c.startswith("rotary_")) == [0, 1, 2, 4, 8, 16, 32, 64]


def test_folded_forms_equal_the_dense_oracle():
    g = _gen(9)
    h, h_kv, d, k = 4, 2, 16, 4
    block = random_block(
        h=h,
        h_kv=h_kv,
        d=d,
        k=k,
        seed=9,
        q_bias=torch.randn(h, k, generator=g),
        k_bias=torch.randn(h_kv, k, generator=g),
        q_gain=torch.rand(d, generator=g) + 0.5,
        k_gain=torch.rand(d, generator=g) + 0.5,
    )
    heads, layer = measure_block(block, select(["folded"]), dtype=torch.float64)
    q, kk, grp = block.q.double().numpy(), block.k.double().numpy(), block.group_size
    gq, gk = np.diag(block.q_gain.double().numpy()), np.diag(block.k_gain.double().numpy())
    qb, kb = block.q_bias.double().numpy(), block.k_bias.double().numpy()
    gained = [gq @ q[i] @ kk[i // grp].T @ gk for i in range(h)]
    biased = [np.vstack([q[i], qb[i]]) @ np.vstack([kk[i // grp], kb[i // grp]]).T for i in range(h)]
    for suffix, forms in (("gain", gained), ("bias", biased)):
        for i, m in enumerate(forms):
            sym, dirn = paper_oracle(m)
            np.testing.assert_allclose(heads[f"symmetry_{suffix}"][i], sym, rtol=1e-9)
            np.testing.assert_allclose(heads[f"directionality_{suffix}"][i], dirn, rtol=1e-9, atol=1e-12)
        sym, dirn = paper_oracle(sum(forms))
        np.testing.assert_allclose(layer[f"symmetry_{suffix}"][0], sym, rtol=1e-9)
        np.testing.assert_allclose(layer[f"directionality_{suffix}"][0], dirn, rtol=1e-9, atol=1e-12)


def test_biases_land_in_the_constant_row_and_column():
    """A large query bias adds b_q^T K^T x_j (a term of the key alone) as the LAST ROW of the
    form on [x; 1] (the query's constant coordinate): the paper's directionality reads one
    dominant row (> 0). A large key bias adds x_i^T Q b_k, the last column: < 0."""
    base, by_q, by_k = [], [], []
    for seed in range(10, 15):
        big = 30 * torch.randn(2, 4, generator=_gen(seed))
        plain = random_block(h=2, h_kv=2, d=40, k=4, seed=seed)
        base += list(measure_block(plain, select("symmetry"), dtype=torch.float64)[0]["directionality"])
        for biased, out in ((dict(q_bias=big), by_q), (dict(k_bias=big), by_k)):
            block = AttentionBlock("encoder", 0, plain.q, plain.k, **biased)
            out += list(measure_block(block, select(["folded"]), dtype=torch.float64)[0]["directionality_bias"])
    assert min(by_q) > 0.5 and max(by_k) < -0.5
    assert min(base) < 0 < max(base)  # the plain forms go either way


def test_metrics_a_block_has_not_are_absent_and_nan_in_the_table():
    plain = random_block(seed=1)
    rope, _ = _rope(6, 6, "half")
    rotary = AttentionBlock("encoder", 1, plain.q, plain.k, rope=rope)
    from wqk.contracts import ModelInfo

    info = ModelInfo("m", "m", "p", "llama", True)
    df = to_frame(score_table([(info, plain), (info, rotary)], progress=False, metrics="all"))
    assert df.loc[df["layer"] == 0, "rotary_symmetry_d0"].isna().all()
    assert df.loc[df["layer"] == 1, "rotary_symmetry_d0"].notna().all()
    assert "symmetry_gain" not in df.columns  # no block has a gain: no column (an aggregate reads it as NaN)
    extra = list(df.columns[df.columns.get_loc("form") + 1 :])  # after the contract's last column
    assert extra[:5] == list(SPECTRA) and extra[5] == "rotary_symmetry_d0"
    # spectra per head by default; per layer only with layer_spectra
    default = to_frame(score_table([(info, plain)], progress=False))
    assert default.loc[default["scope"] == "layer", "stable_rank"].isna().all()
    assert df.loc[df["scope"] == "layer", "stable_rank"].notna().all()


def test_non_finite_weights_give_nan_in_every_metric():
    block = random_block(seed=2)
    block.q[1, 3, 0] = float("nan")
    heads, layer = measure_block(block, select("all"))
    for c in SPECTRA:
        assert np.isnan(heads[c][1]) and not np.isnan(heads[c][0]) and np.isnan(layer[c][0])


def test_selection():
    assert select("default") == ("symmetry", "directionality", "spectra", "rotary_symmetry")
    assert select("symmetry") == ("symmetry", "directionality")  # the paper's two always
    assert set(select("all")) == set(REGISTRY) - {"fingerprint_null"}  # every deterministic metric
    assert "fingerprint_null" in select("fingerprint_null")  # random draws: by name only
    assert select("default,folded")[-1] == "folded"
    with pytest.raises(WqkError, match="unknown metric 'spectrum'.*spectra"):
        select("spectrum")


def test_wqk_score_metrics_flags(tmp_path, capsys):
    from wqk.cli import main
    from wqk.tiny import build_tiny

    folder = build_tiny("bert", tmp_path / "bert")
    paper, every = tmp_path / "paper.parquet", tmp_path / "all.parquet"
    assert main(["score", str(folder), "--out", str(paper), "--quiet", "--metrics", "symmetry,directionality"]) == 0
    assert main(["score", str(folder), "--out", str(every), "--quiet", "--metrics", "all"]) == 0
    import pyarrow.parquet as pq

    a, b = pq.read_table(paper), pq.read_table(every)
    assert "stable_rank" not in a.column_names and "stable_rank" in b.column_names
    assert a.column("symmetry").equals(b.column("symmetry"))  # the paper's two do not move
    assert main(["metrics"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in REGISTRY)
    assert main(["score", str(folder), "--out", str(paper), "--metrics", "nope"]) == 1
