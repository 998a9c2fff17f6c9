"""The follow-up papers' metric families (wqk.fingerprint, wqk.bilinear_forms, wqk.qk_spectra)
against independent float64 implementations on the explicit d x d forms: per head, on tiny
BERT-, GPT-2- and Llama-shaped models (and rotary, grouped-query, interleaved and partial
rotary ones), on planted forms whose values are known, and where a peer's published code is
wrong, tests that pin the correct value (and show the defect would move it)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.linalg
import torch

from wqk import api
from wqk.adapters import open_source
from wqk.bilinear_forms import bilinear_columns
from wqk.fingerprint import fingerprint_columns
from wqk.head_forms import HeadForms
from wqk.metric_catalogue import BILINEAR_FORMS_COLUMNS, FINGERPRINT_COLUMNS, LIST_COLUMNS, QK_SPECTRA_COLUMNS
from wqk.qk_spectra import qk_spectra_columns, squared_singular_values
from wqk.rotary import pair_rows
from wqk.tiny import build_tiny

# model_type -> what it covers: LayerNorm pre-norm (gpt2), post-norm (bert), RMSNorm + rotate-half rope +
# grouped-query (llama), interleaved rope (gptj), partial rotary (gpt_neox), QK-norm (qwen3)
TYPES = ("bert", "gpt2", "llama", "gptj", "gpt_neox", "qwen3")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("follow_ups")
    return {t: build_tiny(t, root / t, seed=5) for t in TYPES}


# --- independent float64 implementations on explicit M ----------------------------------------


def _heads(block):
    """(Q_h, K_h) d x k float64 per query head (grouped-query key heads shared)."""
    q, k = block.q.double().numpy(), block.k.double().numpy()
    return [(q[h], k[block.kv_head(h)]) for h in range(block.n_heads)]


def _folded(block, qh, kh):
    if block.q_gain is None:
        return qh, kh
    gq, gk = block.q_gain.double().numpy(), block.k_gain.double().numpy()
    qh, kh = gq[:, None] * qh, gk[:, None] * kh
    if block.norm_centred:
        c = np.eye(len(qh)) - 1 / len(qh)
        qh, kh = c @ qh, c @ kh
    return qh, kh


def oracle_fingerprint(m, qh, kh, rope=None) -> dict:
    """As their code: SVD of M with a 1e-9 rank cut, the k x k core diag(S) V^T U, its eigen-
    decomposition; principal angles by scipy; the rope terms from the complex pair matrices."""
    u, s, vt = np.linalg.svd(m)
    r = int((s > 1e-9 * s[0]).sum())
    core = np.diag(s[:r]) @ vt[:r] @ u[:, :r]
    w, x = np.linalg.eig(core)
    fro = np.linalg.norm(m)
    es = np.linalg.eigvalsh((m + m.T) / 2)
    es = es[np.abs(es) > 1e-9 * np.abs(es).max()]
    angles = np.degrees(scipy.linalg.subspace_angles(qh, kh))
    out = {
        "dir_frac": np.linalg.norm((m - m.T) / 2) / fro,
        "D_head": np.abs(w.imag).sum() / np.abs(w).sum(),
        "imag_mass": np.abs(w.imag).sum() / fro,
        "henrici": np.sqrt(max(fro**2 - (np.abs(w) ** 2).sum(), 0)) / fro,
        "cond_eig": np.linalg.cond(x),
        "spectral_radius_raw": np.abs(w).max(),
        "content_pos_frac": es[es > 0].sum() / np.abs(es).sum(),
        "prin_angle_mean": angles.mean(),
        "prin_angle_max": angles.max(),
    }
    if rope is not None:
        a_rows, b_rows = (t.numpy() for t in pair_rows(rope))
        re, im = [], []
        for ta, tb in zip(a_rows, b_rows):
            mt = np.outer(qh[:, ta] + 1j * qh[:, tb], kh[:, ta] - 1j * kh[:, tb])
            re.append(np.linalg.norm(mt.real)), im.append(np.linalg.norm(mt.imag))
        re, im, theta = np.array(re), np.array(im), np.array(rope.inv_freq, dtype=np.float64)
        high = np.argsort(-theta)[: max(1, len(theta) // 2)]
        out |= {
            "rope_imag_frac": im.sum() / (re.sum() + im.sum()),
            "freq_centroid": (theta * im).sum() / im.sum(),
            "hi_freq_dir": im[high].sum() / im.sum(),
        }
    return out


def oracle_bilinear(m) -> dict:
    lf = m.T  # their L = W_K^T W_Q
    s, t = (lf + lf.T) / 2, (lf - lf.T) / 2
    ev = np.linalg.eigvalsh(s)
    alpha, beta = np.sort(ev[ev > 0])[::-1], np.sort(-ev[ev < 0])[::-1]
    n = max(len(alpha), len(beta))
    alpha, beta = np.pad(alpha, (0, n - len(alpha))), np.pad(beta, (0, n - len(beta)))
    u = alpha - beta
    l2 = (lf**2).sum()
    rho = np.linalg.norm(beta) / np.linalg.norm(alpha)
    c, d = (u[u > 0] ** 2).sum() / l2, (u[u < 0] ** 2).sum() / l2
    imbalance = (c - d) / (c + d) if c + d > 0 else 0.0
    head_type = 1.0 if imbalance > 0.2 and c + d > 0.01 else -1.0 if imbalance < -0.2 and c + d > 0.01 else 0.0
    e = np.linalg.svd(lf, compute_uv=False) ** 2
    return {
        "symmetric_energy": (s**2).sum() / l2,
        "profile_a": (t**2).sum() / l2,
        "profile_b": 2 * alpha @ beta / l2,
        "profile_c": c,
        "profile_d": d,
        "pairing": 1 - np.linalg.norm(u) / np.sqrt((s**2).sum()),
        "rho": rho,
        "pairing_bound": 1 - abs(1 - rho) / np.sqrt(1 + rho**2),
        "lobe_departure": np.linalg.norm(beta - rho * alpha) / np.linalg.norm(beta),
        "trace_ratio": abs(np.trace(lf)) / np.sqrt(l2),
        "participation_ratio": e.sum() ** 2 / (e**2).sum(),
        "leading_share": e[0] / e.sum(),
        "head_type": head_type,
        "stable_rank": e.sum() / e[0],
    }


def oracle_qk_spectra(m, k) -> dict:
    x = np.linalg.svd(m, compute_uv=False)[:k] ** 2
    sd = x.std(ddof=1)
    z = (x - x.mean()) / sd
    return {
        "sv2": x, "sv2_min": x.min(), "sv2_max": x.max(), "sv2_mean": x.mean(), "sv2_std": sd,
        "sv2_skew": (z**3).mean(), "sv2_kurtosis": (z**4).mean() - 3,
    }  # fmt: skip


# --- the tiny models, per head ----------------------------------------------------------------

# float32 Grams (the scoring dtype) against float64 dense: relative agreement to about 1e-5; angles in degrees
TOLERANCE = {"cond_eig": 1e-3, "prin_angle_mean": 1e-4, "prin_angle_max": 1e-4}


@pytest.mark.parametrize("model_type", TYPES)
def test_every_column_equals_the_dense_float64_oracle_per_head(tiny, model_type):
    folder = tiny[model_type]
    scores = api.score(str(folder), progress=False, metrics="follow_ups").set_index(["stack", "layer", "scope", "head"])
    _, blocks = open_source(str(folder))
    checked = set()
    for block in blocks:
        if block.q.shape[1] != block.k.shape[1]:
            continue
        for h, (qh, kh) in enumerate(_heads(block)):
            row = scores.loc[(block.stack, block.layer, "head", h)]
            m = qh @ kh.T
            fq, fk = _folded(block, qh, kh)
            want = oracle_fingerprint(fq @ fk.T, fq, fk, block.rope)
            want |= oracle_bilinear(m) | oracle_qk_spectra(m, qh.shape[1])
            for column, value in want.items():
                rtol = TOLERANCE.get(column, 2e-5)
                assert row[column] == pytest.approx(value, rel=rtol, abs=1e-6), (block.stack, block.layer, h, column)
                checked.add(column)
    expected = set(FINGERPRINT_COLUMNS) | set(BILINEAR_FORMS_COLUMNS) | set(QK_SPECTRA_COLUMNS)
    rotary = {"rope_imag_frac", "freq_centroid", "hi_freq_dir"}
    assert checked == (expected if model_type not in ("bert", "gpt2") else expected - rotary) | {"stable_rank"}
    layer_rows = scores.xs("layer", level="scope")
    assert layer_rows[list(expected - rotary)].isna().all().all()  # head metrics: no layer rows


def test_the_folded_input_is_the_models_own(tiny):
    """GPT-2 (LayerNorm pre-norm) is analysed centred with its gain, Llama (RMSNorm) with its
    gain only, BERT (post-norm) raw: the blocks say which, and the fingerprint sees it."""
    kinds = {}
    for model_type in ("gpt2", "llama", "bert"):
        block = next(open_source(str(tiny[model_type]))[1])
        kinds[model_type] = (block.q_gain is not None, block.norm_centred)
    assert kinds == {"gpt2": (True, True), "llama": (True, False), "bert": (False, None)}


# --- planted forms ------------------------------------------------------------------------------


def _forms(q: np.ndarray, k: np.ndarray) -> HeadForms:
    """HeadForms of one head from its explicit factors (d x k)."""
    q, k = torch.from_numpy(q)[None], torch.from_numpy(k)[None]
    return HeadForms(q.mT @ q, k.mT @ k, k.mT @ q, np.zeros(1, dtype=np.int64))


def _all(q, k) -> dict:
    f = _forms(q, k)
    columns = fingerprint_columns(f) | bilinear_columns(f) | qk_spectra_columns(f)
    return {c: v[0].tolist() if c in LIST_COLUMNS else float(v[0]) for c, v in columns.items()}


def _frame(d=6, k=2, seed=0):
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((d, 2 * k)))[0]


def test_a_symmetric_form():
    q = _frame()[:, :2] * [3.0, 1.0]
    got = _all(q, q)  # M = Q Q^T: symmetric positive semi-definite
    assert got["dir_frac"] == pytest.approx(0, abs=1e-12) and got["D_head"] == pytest.approx(0, abs=1e-12)
    assert got["henrici"] == pytest.approx(0, abs=1e-6) and got["content_pos_frac"] == pytest.approx(1)
    assert got["symmetric_energy"] == pytest.approx(1) and got["profile_a"] == pytest.approx(0, abs=1e-12)
    assert got["prin_angle_max"] == pytest.approx(0, abs=1e-5) and got["trace_ratio"] == pytest.approx(10 / np.sqrt(82))
    assert got["sv2_max"] == pytest.approx(81) and got["sv2_min"] == pytest.approx(1)
    assert got["sv2"] == pytest.approx([81, 1])  # the list, descending (qk-spectral-analysis:eigen_values)


def test_an_antisymmetric_form_has_purely_imaginary_eigenvalues():
    f = _frame()
    u, v = f[:, :1], f[:, 1:2]
    got = _all(np.hstack([u, v]), np.hstack([v, -u]))  # M = u v^T - v u^T
    assert got["dir_frac"] == pytest.approx(1) and got["D_head"] == pytest.approx(1)
    assert got["symmetric_energy"] == pytest.approx(0, abs=1e-12) and got["profile_a"] == pytest.approx(1)
    assert got["henrici"] == pytest.approx(0, abs=1e-6)  # normal
    assert got["imag_mass"] == pytest.approx(2 / np.sqrt(2))  # eigenvalues +-i, ||M|| = sqrt 2


def test_a_rotation_is_normal_with_a_complex_pair():
    f = _frame()
    t = 0.3
    q = f[:, :2]
    k = f[:, :2] @ np.array([[np.cos(t), np.sin(t)], [-np.sin(t), np.cos(t)]])  # M = U R U^T
    got = _all(q, k)
    assert got["D_head"] == pytest.approx(np.sin(t)) and got["henrici"] == pytest.approx(0, abs=1e-6)
    assert got["dir_frac"] == pytest.approx(np.sin(t)) and got["cond_eig"] == pytest.approx(1)
    assert got["symmetric_energy"] == pytest.approx(np.cos(t) ** 2) and got["prin_angle_max"] == pytest.approx(
        0, abs=1e-5
    )


def test_a_nilpotent_rank_one_form():
    """u v^T with u orthogonal to v: every eigenvalue 0 (D_head 0, their convention), yet half
    antisymmetric (dir_frac 1/sqrt 2), as far from normal as can be (henrici 1); the lobes pair
    exactly (alpha = beta = 1/2: c = d = 0, type II)."""
    f = _frame()
    got = _all(f[:, :1], f[:, 1:2])
    assert got["D_head"] == pytest.approx(0, abs=1e-12) and got["dir_frac"] == pytest.approx(2**-0.5)
    assert got["henrici"] == pytest.approx(1) and got["prin_angle_max"] == pytest.approx(90)
    assert got["rho"] == pytest.approx(1) and got["pairing"] == pytest.approx(1) and got["head_type"] == 0
    assert got["participation_ratio"] == pytest.approx(1) and np.isnan(got["sv2_std"])  # one value: no spread


def test_a_non_normal_form_with_real_eigenvalues():
    """M = [[1, 5], [0, 2]] on an orthonormal 2-frame: real eigenvalues (D_head 0), far from
    normal (henrici sqrt(30)/sqrt(30)), eigenvectors nearly parallel (cond_eig large)."""
    f = _frame()
    basis = f[:, :2]
    q, k = basis @ np.array([[1.0, 5.0], [0.0, 2.0]]), basis
    got = _all(q, k)
    m = np.array([[1.0, 5.0], [0.0, 2.0]])
    x = np.linalg.eig(m)[1]
    assert got["D_head"] == pytest.approx(0, abs=1e-12) and got["henrici"] == pytest.approx(5 / np.sqrt(30))
    assert got["cond_eig"] == pytest.approx(np.linalg.cond(x)) and got["cond_eig"] > 10
    assert got["spectral_radius_raw"] == pytest.approx(2)


def test_a_profile_sums_to_one_and_its_type_follows_the_imbalance():
    rng = np.random.default_rng(1)
    types = []
    for _ in range(200):
        q, k = rng.standard_normal((12, 3)), rng.standard_normal((12, 3))
        if rng.random() < 0.3:
            k = q + 0.3 * k  # nearly symmetric: larger positive lobes
        got = _all(q, k)
        assert got["profile_a"] + got["profile_b"] + got["profile_c"] + got["profile_d"] == pytest.approx(1)
        assert got["symmetric_energy"] == pytest.approx(1 - got["profile_a"])
        types.append(got["head_type"])
    assert set(types) == {-1.0, 0.0, 1.0}


# --- the peers' defects, pinned -----------------------------------------------------------------


def _their_core(wq: np.ndarray, wk: np.ndarray, flip: bool = False) -> np.ndarray:
    """qk-spectral-analysis' squared singular values of W_Q^T W_K (W: d_head x d): the thin SVDs
    of W_Q^T and W_K^T, then the core Sigma_A Vh_A^T Vh_B Sigma_B (the defect); flip: one
    singular vector pair of W_Q^T negated (an equally valid SVD)."""
    ua, sa, vha = np.linalg.svd(wq.T, full_matrices=False)
    ub, sb, vhb = np.linalg.svd(wk.T, full_matrices=False)
    if flip:
        ua[:, 0], vha[0] = -ua[:, 0], -vha[0]
    return np.linalg.svd(np.diag(sa) @ vha.T @ vhb @ np.diag(sb), compute_uv=False) ** 2


def test_qk_spectra_are_the_exact_squared_singular_values_not_their_cores():
    rng = np.random.default_rng(0)
    wq, wk = rng.standard_normal((16, 64)), rng.standard_normal((16, 64))  # one head, d_head 16, d 64
    ours = squared_singular_values(_forms(wq.T, wk.T))[0]
    exact = np.linalg.svd(wq.T @ wk, compute_uv=False)[:16] ** 2
    np.testing.assert_allclose(ours, exact, rtol=1e-10)
    theirs, flipped = _their_core(wq, wk), _their_core(wq, wk, flip=True)
    assert abs(theirs.mean() / exact.mean() - 1) > 1e-3  # their published values are off ...
    assert abs(flipped.mean() / theirs.mean() - 1) > 1e-4  # ... and move with the SVD's signs
    assert np.prod(theirs) == pytest.approx(np.prod(exact), rel=1e-8)  # only the product survives


def test_bilinear_forms_read_a_square_projection_by_its_rows(tmp_path):
    """Their extractor transposes any square q_proj/k_proj (OPT: (d, d)): each 'head' becomes a
    slice of residual columns. Heads are rows of an nn.Linear weight: ours equal the row slice's
    oracle and differ from the transposed slice's."""
    folder = build_tiny("opt", tmp_path / "opt", seed=2)
    scores = api.score(str(folder), progress=False, metrics="bilinear_forms")
    _, blocks = open_source(str(folder))
    from safetensors.numpy import load_file

    weights = load_file(folder / "model.safetensors")
    block = next(blocks)
    name = next(n for n in weights if n.endswith("layers.0.self_attn.q_proj.weight"))
    wq, wk = weights[name].astype(np.float64), weights[name.replace("q_proj", "k_proj")].astype(np.float64)
    assert wq.shape[0] == wq.shape[1]  # square: where their shape test misfires
    kd = block.q.shape[2]
    row = scores[(scores["layer"] == 0) & (scores["scope"] == "head") & (scores["stack"] == block.stack)]
    row = row.set_index("head")
    for h in range(block.n_heads):
        rows = slice(h * kd, (h + 1) * kd)
        right = oracle_bilinear(wq[rows].T @ wk[rows])
        wrong = oracle_bilinear(wq.T[rows].T @ wk.T[rows])
        assert row.loc[h, "symmetric_energy"] == pytest.approx(right["symmetric_energy"], rel=2e-5)
        assert abs(right["symmetric_energy"] - wrong["symmetric_energy"]) > 1e-3


def test_their_balance_carries_no_information():
    """balance = 1 - |n_pos - n_neg| / (n_pos + n_neg) over the symmetric part's eigenvalues: for
    any Q, K of full rank 2k, Sylvester's law of inertia gives k of each sign, so balance is 1."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        q, k = rng.standard_normal((20, 4)), rng.standard_normal((20, 4)) * rng.random(4)
        mu = _forms(q, k).sym_eigenvalues[0].numpy()
        assert (mu > 0).sum() == (mu < 0).sum() == 4


def test_the_fingerprint_folds_and_centres_a_layernorm_models_form(tiny):
    """Their training pipeline reads raw W_q W_k^T where the pretrained one folds the gain and
    centres: on GPT-2 the two differ, and ours is the centred, folded one (as the oracle test
    above checks per column)."""
    folder = tiny["gpt2"]
    ours = api.score(str(folder), progress=False, metrics="fingerprint")
    block = next(open_source(str(folder))[1])
    qh, kh = _heads(block)[0]
    fq, fk = _folded(block, qh, kh)
    folded, raw = oracle_fingerprint(fq @ fk.T, fq, fk), oracle_fingerprint(qh @ kh.T, qh, kh)
    row = ours[(ours["layer"] == 0) & (ours["head"] == 0) & (ours["stack"] == block.stack)].iloc[0]
    assert row["dir_frac"] == pytest.approx(folded["dir_frac"], rel=2e-5)
    assert abs(folded["dir_frac"] - raw["dir_frac"]) > 1e-4


def test_the_families_select_what_they_publish():
    from wqk.metric_catalogue import select

    assert "spectra" in select("bilinear_forms")  # their stable_rank is spectra's
    assert set(select("follow_ups")) >= {"fingerprint", "bilinear_forms", "qk_spectra"}
    assert not {"fingerprint", "bilinear_forms", "qk_spectra"} & set(select("default"))


def test_rotary_columns_are_nan_without_rope(tiny):
    scores = api.score(str(tiny["gpt2"]), progress=False, metrics="fingerprint")
    heads = scores[scores["scope"] == "head"]
    assert "rope_imag_frac" not in heads and heads["dir_frac"].notna().all()  # no block has rope: no column
    mixed = pd.concat([heads, api.score(str(tiny["llama"]), progress=False, metrics="fingerprint")])
    assert mixed.loc[mixed["model_type"] == "gpt2", "rope_imag_frac"].isna().all()


def test_the_json_describes_every_column_and_its_transpose_invariance_holds(capsys):
    """`wqk metrics --json`: one object per catalogued column; each column said unchanged by
    M -> M^T is (the block scored with Q and K, their biases, swapped), each said not is not."""
    import json

    from wqk.blocks import AttentionBlock, Rope
    from wqk.cli import main
    from wqk.metric_catalogue import CATALOGUE, select
    from wqk.metric_registry import measure_block

    assert main(["metrics", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["column"] for r in rows] == [c for e in CATALOGUE.values() for c in e.columns]
    assert all(
        set(r) == {"column", "metric", "scope", "input", "transpose_invariant", "reproduces", "definition"}
        for r in rows
    )
    published = {p for r in rows for p in r["reproduces"]}
    assert {"qk-spectral-fingerprint:D_head", "attention-bilinear-forms:symmetric_energy"} <= published
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 16, 8, generator=g, dtype=torch.float64) for _ in range(2))
    bq, bk = (torch.randn(2, 8, generator=g, dtype=torch.float64) for _ in range(2))
    gain = torch.rand(16, generator=g, dtype=torch.float64) + 0.5
    rope = Rope(inv_freq=(1.0, 0.1, 0.01, 0.001), layout="half", context=64)

    def measured(q, k, bq, bk):
        block = AttentionBlock(
            "encoder", 0, q, k, q_bias=bq, k_bias=bk, q_gain=gain, k_gain=gain, norm_centred=True, rope=rope
        )
        return measure_block(block, select("all,fingerprint_null"), dtype=torch.float64)

    forward, swapped = measured(q, k, bq, bk), measured(k, q, bk, bq)
    for r in rows:
        column = r["column"].replace("{d}", "4")
        for scope, a, b in zip(("head", "layer"), forward, swapped):
            if scope not in r["scope"] or r["metric"] == "layer_spectra":
                continue
            if r["transpose_invariant"]:
                np.testing.assert_allclose(a[column], b[column], rtol=1e-7, atol=1e-10, err_msg=f"{column} {scope}")
            else:
                assert not np.allclose(a[column], b[column], rtol=1e-4), f"{column} {scope}: said to see direction"


def test_cond_eig_of_a_rank_deficient_head_is_that_of_its_rank_r_core():
    """A QK-norm gain of 0 on some dims (Gemma 3's first layer) leaves M of rank r < k: the k - r
    zero eigenvalues of C have no eigenvectors to speak of; as theirs, cond_eig is that of the
    rank-r core's eigenvectors: finite, the oracle's."""
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((24, 6)), rng.standard_normal((24, 6))
    q[:, [1, 4]] = 0.0  # rank 4
    got = _all(q, k)
    want = oracle_fingerprint(q @ k.T, q, k)
    assert np.isfinite(got["cond_eig"]) and got["cond_eig"] == pytest.approx(want["cond_eig"], rel=1e-8)
    assert got["D_head"] == pytest.approx(want["D_head"], rel=1e-8)


# --- the fingerprint's null (opt-in) --------------------------------------------------------------


def _explicit_blocks(rng, draws: int, r: int, d: int) -> np.ndarray:
    """V^T U of Haar frames drawn in R^d: QR of Gaussians with the sign of R's diagonal fixed."""
    out = np.empty((draws, r, r))
    for i in range(draws):
        frames = []
        for _ in range(2):
            q, up = np.linalg.qr(rng.standard_normal((d, r)))
            frames.append(q * np.sign(np.diag(up)))
        out[i] = frames[1].T @ frames[0]
    return out


def test_the_null_draws_the_blocks_of_haar_frames():
    """B = V^T U drawn in r x r (Bartlett) has the distribution of explicit frames' in R^d: the
    known E||B||_F^2 = r^2/d, and the null D_head and dir_frac of a spectrum agree within 5
    standard errors (both ways, d = 10 and d = 5: below 2r, Bartlett's cannot be used)."""
    from wqk.fingerprint import basic
    from wqk.fingerprint_null import haar_blocks

    rng = np.random.default_rng(0)
    s = torch.tensor([3.0, 1.0, 0.3], dtype=torch.float64)
    for d in (10, 5):
        ours, theirs = haar_blocks(rng, 4000, 3, d), torch.from_numpy(_explicit_blocks(rng, 4000, 3, d))
        assert (ours**2).sum((-2, -1)).mean().item() == pytest.approx(9 / d, rel=0.03)
        for name in ("D_head", "dir_frac"):
            a, b = ((basic((s * s).sum().expand(4000), ((c * s) * (c * s).mT).sum((-2, -1)), torch.linalg.eigvals(c * s)))[name]
                    for c in (ours, theirs))  # fmt: skip
            se = np.sqrt(a.var().item() / 4000 + b.var().item() / 4000)
            assert abs(a.mean().item() - b.mean().item()) < 5 * se, (d, name)


def test_the_null_is_seeded_by_model_layer_and_head_and_gives_z(tiny):
    folder = str(tiny["gpt2"])
    one = api.score(folder, progress=False, metrics="fingerprint_null", name="m1")
    again = api.score(folder, progress=False, metrics="fingerprint_null", name="m1")
    other = api.score(folder, progress=False, metrics="fingerprint_null", name="m2")
    columns = [c for c in one if c.endswith(("_null_mean", "_null_std", "_z"))]
    assert len(columns) == 12 and "dir_frac" in one  # the real values come with it
    pd.testing.assert_frame_equal(one[columns], again[columns])  # reruns: the same bits
    heads = one[one["scope"] == "head"]
    assert heads["dir_frac_null_mean"].nunique() == len(heads)  # no two heads share draws
    assert not np.array_equal(heads["D_head_null_mean"], other.loc[other["scope"] == "head", "D_head_null_mean"])
    for m in ("dir_frac", "D_head", "imag_mass", "henrici"):
        z = (heads[m] - heads[f"{m}_null_mean"]) / heads[f"{m}_null_std"]
        np.testing.assert_allclose(heads[f"{m}_z"], z, rtol=1e-12)
    from wqk.metric_catalogue import select

    assert "fingerprint_null" not in select("all") and "fingerprint" in select("fingerprint_null")


def test_a_symmetric_head_is_far_below_its_null():
    from wqk.blocks import AttentionBlock
    from wqk.metric_catalogue import select
    from wqk.metric_registry import measure_block

    q = torch.from_numpy(_frame(d=40, k=4)[:, :4] * [4.0, 2.0, 1.0, 0.5])[None]
    heads, _ = measure_block(AttentionBlock("encoder", 0, q, q), select("fingerprint_null"), dtype=torch.float64)
    assert heads["dir_frac"][0] == pytest.approx(0, abs=1e-7)
    assert 0.6 < heads["dir_frac_null_mean"][0] < 0.75 and heads["dir_frac_z"][0] < -5


def test_principal_angles_whiten_by_cholesky_and_cut_a_near_singular_gram():
    """A well-conditioned head's angles (Cholesky whitening) are scipy's; a query direction
    1e-6 the size of the others (its Gram eigenvalue 1e-12 of the largest, below the 1e-10 cut)
    is outside span Q: its angles are those of the other directions'."""
    rng = np.random.default_rng(8)
    q, k = rng.standard_normal((20, 5)), rng.standard_normal((20, 5))
    want = np.cos(np.sort(scipy.linalg.subspace_angles(q, k)))
    np.testing.assert_allclose(_forms(q, k).cosines()[0], want, rtol=1e-10, atol=1e-12)
    q[:, 2] *= 1e-6
    got = _forms(q, k).cosines()[0]
    want = np.cos(np.sort(scipy.linalg.subspace_angles(np.delete(q, 2, axis=1), k)))
    assert len(got) == 4
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
