"""Write config/catalogue/paper.tsv from the paper's model inventory.

    python workflow/scripts/make_paper_catalogue.py \
        config/paper/models.csv config/paper/published_scores.csv config/catalogue/paper.tsv

One line per distinct hub checkpoint the paper reports (models.csv rows with in_paper =
True). Legacy short keys (duplicates of hub ids) and the authors' own training runs
(`custom:`, reproduced by the training rules instead) are left out. The TSV is committed;
rerun this script only when the inventory changes.
"""

from __future__ import annotations

import csv
import re
import sys

import pandas as pd

from wqk import slug

COLUMNS = [
    "slug",
    "model_id",
    "source",
    "revision",
    "family",
    "modality",
    "n_params",
    "figure",
    "synthetic",
    "objective_encoder",
    "objective_decoder",
    "objective_cross",
    "paper_stacks",
    "notes",
]

# Legacy bare ids now live under an organisation on the hub (the old names redirect).
HUB_ID = {
    "albert-base-v2": "albert/albert-base-v2",
    "albert-large-v2": "albert/albert-large-v2",
    "albert-xlarge-v2": "albert/albert-xlarge-v2",
    "albert-xxlarge-v2": "albert/albert-xxlarge-v2",
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "openai-gpt": "openai-community/openai-gpt",
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "gpt2-xl": "openai-community/gpt2-xl",
}

FAMILY = {
    "DINO (ViT)": None,  # decided per id below (DINO.pkl also holds DINOv2)
    "Llama 2 / 3 / 3.1 / 3.2": "Llama",
    "TinyStories (GPT-Neo arch)": "TinyStories",
    "MusicGen text encoder (frozen T5-base)": "MusicGen",
    "GIT image encoder (CLIP ViT)": "GIT",
    "Llama-3.2-Vision (Mllama) vision encoder": "Mllama (Llama-3.2-Vision)",
    "Mask2Former transformer decoder": "Mask2Former",
    "DiT (document BEiT)": "DiT",
}

# Stacks whose self-attention is not causal although the paper plotted them as decoders.
NON_CAUSAL_DECODER = ("DETR", "Mask2Former")


def family_of(row) -> str:
    fam = row.family
    if fam == "DINO (ViT)":
        return "DINOv2" if "dinov2" in row.model_id else "DINO"
    fam = FAMILY.get(fam, fam)
    return re.sub(r" (encoder|decoder)$", "", fam)


def modality_of(rows) -> str:
    kinds = [str(m).split()[0].split("/")[0] for m in rows.modality]
    for m in ("audio", "vision"):
        if m in kinds:
            return m
    return "text"


def figures_of(rows) -> list[str]:
    keys = []
    for used_in, fam in zip(rows.used_in, rows.family):
        if "stray copy" in fam:
            continue  # the authors' misfiled duplicates: noted, not plotted
        for token, key in [
            ("Fig(language)", "language"),
            ("(vision)", "vision"),
            ("(audio)", "audio"),
            ("(encoder-decoder)", "encdec"),
            ("+Table", "table"),
        ]:
            if token in used_in and key not in keys:
                keys.append(key)
    return keys


def objectives_of(rows, family: str) -> tuple[dict, list[str], list[str]]:
    # Cross-attention stacks stay empty: queries and keys live in different spaces, so they
    # have no objective of their own (the aggregates label them "cross-attention").
    obj = {"encoder": "", "decoder": "", "cross": ""}
    paper_stacks, notes = [], []
    kinds = " ".join(rows.architecture_kind)
    if "encoder-decoder" in kinds or family in ("GIT", "Mllama (Llama-3.2-Vision)"):
        obj = {"encoder": "bidirectional", "decoder": "autoregressive", "cross": ""}
    elif "decoder-only" in kinds:
        obj["decoder"] = "autoregressive"
    else:
        obj["encoder"] = "bidirectional"
    for kind in rows.architecture_kind:
        if kind.startswith("decoder"):
            stack = "cross" if family == "MusicGen" else "decoder"
        else:
            stack = "encoder"
        if stack not in paper_stacks:
            paper_stacks.append(stack)
    paper_stacks.sort(key=["encoder", "decoder", "cross"].index)
    if family in NON_CAUSAL_DECODER:
        obj["decoder"] = "bidirectional"
        notes.append(
            "decoder self-attention is NOT causal (set prediction over queries): "
            "bidirectional, though the paper plotted it as a decoder"
        )
    if family == "Mllama (Llama-3.2-Vision)":
        notes.append("the paper plotted its bidirectional vision encoder as a decoder")
    if family == "MusicGen":
        notes.append("the paper's MusicGen 'decoder' scores were read from cross-attention")
    return obj, paper_stacks, notes


def main(models_csv: str, published_csv: str, out_tsv: str) -> None:
    models = pd.read_csv(models_csv, dtype=str, keep_default_na=False)
    models = models[models.in_paper == "True"]
    models = models[~models.model_id.str.startswith("custom:")]
    models = models[~models.notes.str.startswith("legacy")]
    published = pd.read_csv(published_csv, dtype=str, keep_default_na=False)
    n_params = dict(zip(published.model_key, published.n_params))

    rows = []
    for model_id, group in models.groupby("model_id", sort=False):
        main_rows = group[~group.family.str.contains("stray copy")]
        family = family_of(main_rows.iloc[0])
        obj, paper_stacks, notes = objectives_of(main_rows, family)
        if (group.family.str.contains("stray copy")).any():
            notes.append("the paper also plotted a stray copy of it in another figure")
        notes += [n for n in dict.fromkeys(group.notes) if n]
        rows.append(
            {
                "slug": slug(model_id),
                "model_id": model_id,
                "source": HUB_ID.get(model_id, model_id),
                "revision": "main",
                "family": family,
                "modality": modality_of(group),
                "n_params": n_params.get(model_id, ""),
                "figure": ",".join(figures_of(group)),
                "synthetic": "False",
                "objective_encoder": obj["encoder"],
                "objective_decoder": obj["decoder"],
                "objective_cross": obj["cross"],
                "paper_stacks": ",".join(paper_stacks),
                "notes": " | ".join(n.replace("\t", " ") for n in notes),
            }
        )
    rows.sort(key=lambda r: (r["modality"], r["family"], r["slug"]))
    with open(out_tsv, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        w.writeheader()
        w.writerows(rows)
    print(f"{out_tsv}: {len(rows)} models")


if __name__ == "__main__":
    main(*sys.argv[1:4])
