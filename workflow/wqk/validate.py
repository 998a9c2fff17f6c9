"""Our per-model statistics against the paper's published ones.

Inputs: models.parquet (wqk aggregate), the paper's published_scores.csv (group, file,
model_key, n_layers, n_params, {symmetry,directionality}_{median,q25,q75}) and models.csv
(model_id, architecture_kind, notes: where the authors' mistakes are documented).

Matching: a published model_key matches our model id exactly (case-insensitive), or by the
name after the organisation when one of the two has none ("gpt2" = "openai-community/gpt2").
Published rows of legacy short keys (notes starting "legacy": duplicates of hub ids, some
corrupt) are left out. The stack of a published row comes from its result file
("T5Decoder.pkl" -> decoder, "whisper-encoder.pkl" -> encoder), else from the model's
architecture kind (decoder-only -> decoder, otherwise encoder); in that second case, if our
model lacks that stack but has a single self-attention stack, that one is used.

Output, one row per published row x metric: model, paper_key, stack, group, file, metric,
ours, paper, difference (ours - paper, medians), ours/paper quartiles and layer counts,
flag (|difference| > tolerance or undefined), expected_cause (known mistakes of the
authors' code that apply to that model and stack, plus a layer-count mismatch), explained
(flagged and a cause applies) and note (mistakes of grouping that leave numbers alone).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .contracts import SELF_STACKS
from .errors import WqkError

TOLERANCE = 0.02
METRICS = ("symmetry", "directionality")

# (pattern in models.csv notes, the expected cause written in the comparison); the last
# one is about grouping only, so it does not explain a numerical difference.
KNOWN_MISTAKES = (
    (r"GQA BUG", "paper tiled grouped-query key heads (h mod n_kv) instead of repeating them (h // group size)"),
    (r"randomly initiali[sz]ed", "paper scored randomly initialised weights, not the checkpoint"),
    (r"GPT-NeoX query_key_value rows are interleaved", "paper split the per-head interleaved GPT-NeoX qkv as [q|k|v] (its scores are noise)"),
    (r"DeBERTa v1 in_proj is interleaved", "paper split the per-head interleaved DeBERTa-v1 in_proj as [q|k|v] (its scores are noise)"),
    (r"(forgets|omits) the transpose", "paper omitted a transpose of the fused qkv (form computed in head space, not embedding space)"),
    (r"aliases num_hidden_layers", "paper scored only SpeechT5 decoder layers 0-4 of 6 (layer count read from an aliased config field)"),
    (r"num_hidden_layers comes from the 6-layer TEXT decoder", "paper scored only the first 6 layers of the GIT image encoder (text decoder's layer count)"),
    (r"PATH IS encoder_attn", "paper's MusicGen 'decoder' is the cross-attention; ours is the decoder self-attention"),
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


def expected_causes(model_key: str, stack: str, paper_models: pd.DataFrame, table=KNOWN_MISTAKES) -> list[str]:
    rows = paper_models[(paper_models["model_id"] == model_key)]
    rows = rows[rows["architecture_kind"].map(_side) == stack] if len(rows) > 1 else rows
    notes = " | ".join(rows["notes"].dropna().astype(str))
    return [cause for pattern, cause in table if re.search(pattern, notes, flags=re.IGNORECASE)]


def compare(
    models: pd.DataFrame,
    published: pd.DataFrame,
    paper_models: pd.DataFrame,
    tolerance: float = TOLERANCE,
) -> pd.DataFrame:
    need = {"model", "stack", *(f"{m}_{s}" for m in METRICS for s in ("median", "q25", "q75"))}
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
    rows = []
    for p in pub.sort_values(["group", "file", "model_key"]).to_dict("records"):
        model = ids.get(p["model_key"])
        if model is None:
            continue
        stack = paper_stack = published_stack(p, paper_models)
        if (model, stack) not in ours_by:
            # a single-stack model whose side we guessed: use its one self-attention stack
            self_stacks = [s for s in stacks_of[model] if s in SELF_STACKS]
            if _stack_of_file(p["file"]) or len(self_stacks) != 1:
                continue
            stack = self_stacks[0]
        o = ours_by[(model, stack)]
        causes = expected_causes(p["model_key"], paper_stack, paper_models)
        ours_n, paper_n = int(o.get("n_layers", -1)), int(p["n_layers"])
        if ours_n != paper_n:
            causes.append(f"layer count differs: ours {ours_n}, paper {paper_n}")
        notes = expected_causes(p["model_key"], paper_stack, paper_models, GROUPING_MISTAKES)
        for m in METRICS:
            diff = float(o[f"{m}_median"]) - float(p[f"{m}_median"])
            rows.append(
                {
                    "model": model, "paper_key": p["model_key"], "stack": stack, "group": p["group"],
                    "file": p["file"], "metric": m, "ours": float(o[f"{m}_median"]),
                    "paper": float(p[f"{m}_median"]), "difference": diff,
                    "ours_q25": float(o[f"{m}_q25"]), "ours_q75": float(o[f"{m}_q75"]),
                    "paper_q25": float(p[f"{m}_q25"]), "paper_q75": float(p[f"{m}_q75"]),
                    "ours_n_layers": ours_n, "paper_n_layers": paper_n,
                    "flag": bool(np.isfinite(diff) and abs(diff) > tolerance) or not np.isfinite(diff),
                    "expected_cause": "; ".join(causes),
                    "explained": bool(causes),
                    "note": "; ".join(notes),
                }
            )  # fmt: skip
    cols = [
        "model", "paper_key", "stack", "group", "file", "metric", "ours", "paper", "difference",
        "ours_q25", "ours_q75", "paper_q25", "paper_q75", "ours_n_layers", "paper_n_layers", "flag",
        "expected_cause", "explained", "note",
    ]  # fmt: skip
    out = pd.DataFrame(rows, columns=cols)
    out["explained"] = out["flag"] & out["explained"].astype(bool)
    return out.sort_values(["model", "stack", "metric", "group", "file"], kind="stable").reset_index(drop=True)


def errata(comparison: pd.DataFrame) -> pd.DataFrame:
    """Flagged differences, one per model x stack x metric: model, metric, paper, ours,
    difference, cause ("not explained by a known mistake" when none applies)."""
    df = comparison[comparison["flag"].astype(bool)].copy()
    df = df.drop_duplicates(["model", "stack", "metric", "paper"])
    cause = df["expected_cause"].fillna("").astype(str)
    out = pd.DataFrame(
        {
            "model": df["model"] + " [" + df["stack"] + "]",
            "metric": df["metric"],
            "paper": df["paper"].astype(float),
            "ours": df["ours"].astype(float),
            "difference": df["difference"].astype(float),
            "cause": cause.where(cause != "", "not explained by a known mistake"),
        }
    )
    return out.reset_index(drop=True)


def read_inputs(models_path, published_path, paper_models_path):
    def read(path, what, reader):
        try:
            return reader(path)
        except FileNotFoundError as e:
            raise WqkError(f"{what} {path} not found") from e

    return (
        read(models_path, "models table", pd.read_parquet),
        read(published_path, "published scores", pd.read_csv),
        read(paper_models_path, "paper models list", pd.read_csv),
    )
