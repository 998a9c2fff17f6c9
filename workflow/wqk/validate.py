"""Our statistics against the paper's published ones, per model and per layer, at the paper's
own precision.

Inputs: models.parquet and layers.parquet (wqk aggregate), the paper's published_scores.csv
(group, file, model_key, n_layers, n_params, {symmetry,directionality}_{median,q25,q75}),
published_layer_scores.csv (group, file, model_key, layer, symmetry, directionality) and
models.csv (model_id, architecture_kind, notes: where the authors' mistakes are documented);
optionally the same two aggregate tables computed with `wqk score --method authors` (the
published code path, mistakes included).

Matching: a published model_key matches our model id exactly (case-insensitive), or by the
name after the organisation when one of the two has none ("gpt2" = "openai-community/gpt2").
Published rows of legacy short keys (notes starting "legacy": duplicates of hub ids, some
corrupt) are left out. The stack of a published row comes from its result file
("T5Decoder.pkl" -> decoder, "whisper-encoder.pkl" -> encoder), else from the model's
architecture kind (decoder-only -> decoder, otherwise encoder); in that second case, if our
model lacks that stack but has a single self-attention stack, that one is used. A published
"decoder" that the authors read from cross-attention (MusicGen) is compared with our "cross".

Tolerance (TOLERANCE = 1e-4): the published medians and quartiles carry 4 decimals (rounding
moves them by up to 5e-5) and the per-layer scores 5 (5e-6); the authors computed in float32
from the stored weights and we compute from k x k Grams in float64 (float32 on the GPU), which
differ by ~1e-6 to 3e-5 on float16/bfloat16 checkpoints (the oracle tests of tests/test_scores.py
bound ours at 1e-5). 5e-5 + 3e-5 rounded up: identical weights agree within 1e-4, and a
difference above it is a different computation or different weights.

Output, one row per published statistic: level "model" (statistic median, q25, q75 of each
metric) or "layer" (one row per published layer and metric, statistic "value"), with model,
paper_key, stack, group, file, layer, metric, statistic, ours, paper, difference (ours -
paper), authors (ours with the authors' method, when given), ours/paper layer counts, flag
(|difference| > tolerance or undefined), expected_cause (known mistakes of the authors' code
that apply to that model and stack, plus a layer-count mismatch), explained and explained_by:
a flagged row is explained only when the authors' method on the same weights gives the
published value within the tolerance, or, for a model the paper scored on random weights,
when the published value lies within our null reference's interquartile range (widened by
the tolerance) and ours does not. Anything else flagged is unexplained: a finding.
note: mistakes of grouping that leave numbers alone.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .contracts import SELF_STACKS
from .errors import WqkError

TOLERANCE = 1e-4
METRICS = ("symmetry", "directionality")
STATS = ("median", "q25", "q75")
RANDOM_WEIGHTS = "paper scored randomly initialised weights, not the checkpoint"
CROSS_READ_AS_DECODER = r"PATH IS encoder_attn"  # models.csv: the published "decoder" read cross-attention

# (pattern in models.csv notes, the expected cause written in the comparison); the last
# one is about grouping only, so it does not explain a numerical difference.
KNOWN_MISTAKES = (
    (r"GQA BUG", "paper tiled grouped-query key heads (h mod n_kv) instead of repeating them (h // group size)"),
    (r"randomly initiali[sz]ed", RANDOM_WEIGHTS),
    (r"GPT-NeoX query_key_value rows are interleaved", "paper split the per-head interleaved GPT-NeoX qkv as [q|k|v] (its scores are noise)"),
    (r"DeBERTa v1 in_proj is interleaved", "paper split the per-head interleaved DeBERTa-v1 in_proj as [q|k|v] (its scores are noise)"),
    (r"(forgets|omits) the transpose", "paper omitted a transpose of the fused qkv (form computed in head space, not embedding space)"),
    (r"aliases num_hidden_layers", "paper scored only SpeechT5 decoder layers 0-4 of 6 (layer count read from an aliased config field)"),
    (r"num_hidden_layers comes from the 6-layer TEXT decoder", "paper scored only the first 6 layers of the GIT image encoder (text decoder's layer count)"),
    (CROSS_READ_AS_DECODER, "paper's MusicGen 'decoder' is the cross-attention (compared with our cross-attention)"),
    (r"global layers skipped", "paper scored only the 32 local layers of the Mllama vision encoder (8 global layers skipped)"),
)  # fmt: skip
GROUPING_MISTAKES = (
    (r"plotted as (a )?\"?decoder", "not causal: the paper plotted this bidirectional stack as a decoder (grouping only)"),
)  # fmt: skip


def _stack_of_file(file: str) -> str | None:
    f = file.lower()
    if "decoder" in f:
        return "decoder"
    if "encoder" in f or "git-images" in f:
        return "encoder"
    return None


def _side(kind) -> str:
    kind = str(kind).lower()
    if kind.startswith("decoder") or "decoder side" in kind or "transformer decoder" in kind:
        return "decoder"
    return "encoder"


def published_stack(row, paper_models: pd.DataFrame) -> str:
    stack = _stack_of_file(row["file"])
    if stack:
        return stack
    kinds = paper_models.loc[paper_models["model_id"] == row["model_key"], "architecture_kind"].dropna()
    sides = {_side(k) for k in kinds}
    return sides.pop() if len(sides) == 1 else "encoder"


def _name(model_id: str) -> str:
    return model_id.lower().rsplit("/", 1)[-1]


def match_ids(ours: list[str], keys: list[str]) -> dict[str, str]:
    """published key -> our model id."""
    exact = {m.lower(): m for m in ours}
    by_name: dict[str, list[str]] = {}
    for m in ours:
        by_name.setdefault(_name(m), []).append(m)
    out = {}
    for k in keys:
        if k.lower() in exact:
            out[k] = exact[k.lower()]
            continue
        cands = [m for m in by_name.get(_name(k), []) if "/" not in k or "/" not in m]
        if len(cands) == 1:
            out[k] = cands[0]
    return out


def legacy_keys(paper_models: pd.DataFrame) -> set[str]:
    notes = paper_models["notes"].fillna("").astype(str)
    return set(paper_models.loc[notes.str.match(r"\s*legacy"), "model_id"])


def _notes(model_key: str, stack: str, paper_models: pd.DataFrame) -> list[str]:
    rows = paper_models[(paper_models["model_id"] == model_key)]
    rows = rows[rows["architecture_kind"].map(_side) == stack] if len(rows) > 1 else rows
    return list(rows["notes"].dropna().astype(str))


def expected_causes(model_key: str, stack: str, paper_models: pd.DataFrame, table=KNOWN_MISTAKES) -> list[str]:
    notes = " | ".join(_notes(model_key, stack, paper_models))
    return [cause for pattern, cause in table if re.search(pattern, notes, flags=re.IGNORECASE)]


def _matched(models: pd.DataFrame, published: pd.DataFrame, paper_models: pd.DataFrame):
    """(published row, our model id, our stack, the paper's stack, our row) of every published
    row that matches one of our real (not synthetic) models."""
    need = {"model", "stack", *(f"{m}_{s}" for m in METRICS for s in STATS)}
    missing = need - set(models.columns)
    if missing:
        raise WqkError(f"models table lacks column(s) {sorted(missing)}: is it results/aggregate/models.parquet?")
    real = models[~models.get("synthetic", pd.Series(False, index=models.index)).astype(bool)]
    legacy = legacy_keys(paper_models)
    pub = published[~published["model_key"].isin(legacy)]
    ids = match_ids(sorted(real["model"].unique()), sorted(pub["model_key"].unique()))
    ours_by = {(r["model"], r["stack"]): r for r in real.to_dict("records")}
    stacks_of: dict[str, list[str]] = {}
    for m, s in ours_by:
        stacks_of.setdefault(m, []).append(s)
    for p in pub.sort_values(["group", "file", "model_key"]).to_dict("records"):
        model = ids.get(p["model_key"])
        if model is None:
            continue
        stack = paper_stack = published_stack(p, paper_models)
        if (model, "cross") in ours_by and any(
            re.search(CROSS_READ_AS_DECODER, n) for n in _notes(p["model_key"], paper_stack, paper_models)
        ):
            stack = "cross"  # the paper's "decoder" is this model's cross-attention: compare like with like
        if (model, stack) not in ours_by:
            # a single-stack model whose side we guessed: use its one self-attention stack
            self_stacks = [s for s in stacks_of[model] if s in SELF_STACKS]
            if _stack_of_file(p["file"]) or len(self_stacks) != 1:
                continue
            stack = self_stacks[0]
        yield p, model, stack, paper_stack, ours_by[(model, stack)]


def _explain(flag: bool, paper: float, authors: float, causes: list[str], null_band, ours: float, tol: float) -> str:
    """Why a flagged value is the paper's mistake, when that is shown; "" otherwise."""
    if not flag:
        return ""
    if np.isfinite(authors) and abs(authors - paper) <= tol:
        return "the authors' method reproduces it"
    if RANDOM_WEIGHTS in causes and null_band is not None:
        lo, hi = null_band[0] - tol, null_band[1] + tol
        if lo <= paper <= hi and not lo <= ours <= hi:
            return "within the null reference's spread (random weights), ours is not"
    return ""


def _layer_index(layers: pd.DataFrame | None) -> dict:
    if layers is None:
        return {}
    return {(r["model"], r["stack"], int(r["layer"])): r for r in layers.to_dict("records")}


def compare(
    models: pd.DataFrame,
    published: pd.DataFrame,
    paper_models: pd.DataFrame,
    tolerance: float = TOLERANCE,
    *,
    layers: pd.DataFrame | None = None,
    published_layers: pd.DataFrame | None = None,
    authors: pd.DataFrame | None = None,
    authors_layers: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The comparison table (see the module docstring): model rows, and layer rows when both
    our layers and the published ones are given; authors' values when `authors` (and
    `authors_layers`) are given."""
    authors_by = {} if authors is None else {(r["model"], r["stack"]): r for r in authors.to_dict("records")}
    ours_layers, auth_layers = _layer_index(layers), _layer_index(authors_layers)
    pub_layers = published_layers.groupby(["group", "file", "model_key"]) if published_layers is not None else None
    pub_layer_keys = set(pub_layers.groups) if pub_layers is not None else set()
    rows = []
    for p, model, stack, paper_stack, o in _matched(models, published, paper_models):
        causes = expected_causes(p["model_key"], paper_stack, paper_models)
        ours_n, paper_n = int(o.get("n_layers", -1)), int(p["n_layers"])
        if ours_n != paper_n:
            causes.append(f"layer count differs: ours {ours_n}, paper {paper_n}")
        base = {
            "model": model, "paper_key": p["model_key"], "stack": stack, "group": p["group"], "file": p["file"],
            "ours_n_layers": ours_n, "paper_n_layers": paper_n, "expected_cause": "; ".join(causes),
            "note": "; ".join(expected_causes(p["model_key"], paper_stack, paper_models, GROUPING_MISTAKES)),
        }  # fmt: skip
        # the authors' method names stacks as the paper does (MusicGen's cross-attention: "decoder")
        a = authors_by.get((model, paper_stack)) or authors_by.get((model, stack), {})
        for m in METRICS:
            band = (o.get(f"null_{m}_q25", np.nan), o.get(f"null_{m}_q75", np.nan))
            band = band if all(np.isfinite(band)) else None
            for stat in STATS:
                ours, paper = float(o[f"{m}_{stat}"]), float(p[f"{m}_{stat}"])
                rows.append(_row(base, "model", None, m, stat, ours, paper, a.get(f"{m}_{stat}", np.nan),
                                 causes, band, tolerance))  # fmt: skip
        key = (p["group"], p["file"], p["model_key"])
        if key not in pub_layer_keys:
            continue
        for pl in pub_layers.get_group(key).sort_values("layer").to_dict("records"):
            layer = int(pl["layer"])
            ol = ours_layers.get((model, stack, layer), {})
            al = auth_layers.get((model, paper_stack, layer)) or auth_layers.get((model, stack, layer), {})
            for m in METRICS:
                rows.append(_row(base, "layer", layer, m, "value", float(ol.get(m, np.nan)), float(pl[m]),
                                 float(al.get(m, np.nan)), causes, None, tolerance))  # fmt: skip
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["layer"] = out["layer"].astype("Int64")
    order = {"median": 0, "q25": 1, "q75": 2, "value": 3}
    out = out.assign(_o=out["statistic"].map(order), _l=out["level"].map({"model": 0, "layer": 1}))
    out = out.sort_values(["model", "stack", "_l", "metric", "_o", "layer", "group", "file"], kind="stable")
    return out.drop(columns=["_o", "_l"]).reset_index(drop=True)


COLUMNS = [
    "model", "paper_key", "stack", "group", "file", "level", "layer", "metric", "statistic", "ours", "paper",
    "difference", "authors", "ours_n_layers", "paper_n_layers", "flag", "expected_cause", "explained",
    "explained_by", "note",
]  # fmt: skip


def _row(base, level, layer, metric, stat, ours, paper, authors, causes, band, tol) -> dict:
    diff = ours - paper
    flag = bool(not np.isfinite(diff) or abs(diff) > tol)
    why = _explain(flag, paper, float(authors), causes, band, ours, tol)
    return {**base, "level": level, "layer": layer, "metric": metric, "statistic": stat, "ours": ours,
            "paper": paper, "difference": diff, "authors": float(authors), "flag": flag,
            "explained": bool(why), "explained_by": why}  # fmt: skip


def errata(comparison: pd.DataFrame) -> pd.DataFrame:
    """Where the paper is wrong, one row per model x stack x metric whose published median is
    flagged: published, ours with the authors' method (equal to the published value when the
    cause is proven), ours (exact), how far the figure point moves (ours - published), the
    expected cause and whether it is proven ("proven: ..." / "not proven" / "no known cause")."""
    df = comparison[_truthy(comparison["flag"])]
    df = df[(df["level"] == "model") & (df["statistic"] == "median")]
    df = df.drop_duplicates(["model", "stack", "metric", "paper"])
    cause = df["expected_cause"].astype("string").fillna("")
    why = df["explained_by"].astype("string").fillna("")
    status = np.where(why != "", "proven: " + why, np.where(cause != "", "not proven", "no known cause"))
    out = pd.DataFrame(
        {
            "model": df["model"] + " [" + df["stack"] + "]",
            "metric": df["metric"],
            "paper": df["paper"].astype(float),
            "authors_method": df["authors"].astype(float),
            "ours": df["ours"].astype(float),
            "point_moves_by": df["difference"].astype(float),
            "cause": cause.where(cause != "", "not explained by a known mistake"),
            "status": status,
        }
    )
    return out.reset_index(drop=True)


def _truthy(col: pd.Series) -> pd.Series:
    return col.astype(str).str.lower().isin(("true", "1"))


def read_inputs(models_path, published_path, paper_models_path, **optional):
    """The three required tables, then each optional one (None when its path is None)."""

    def read(path, what):
        if path is None:
            return None
        try:
            return pd.read_parquet(path) if str(path).endswith(".parquet") else pd.read_csv(path)
        except FileNotFoundError as e:
            raise WqkError(f"{what} {path} not found") from e

    required = (
        read(models_path, "models table"),
        read(published_path, "published scores"),
        read(paper_models_path, "paper models list"),
    )
    return required, {k: read(v, k.replace("_", " ")) for k, v in optional.items()}
