"""Parameter counts of the catalogues: a count shared by models of different families is
almost always one model's count copied onto another (as the paper's inventory gave
Llama-3.2-11B-Vision the count of Llama-2-7B), unless the architectures are the same."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CATALOGUES = sorted((ROOT / "config" / "catalogue").glob("*.tsv"))

# Counts that models of different families rightly share: the same architecture.
KNOWN_SHARED = {
    # HuBERT-base and UniSpeech-SAT-base: the same wav2vec2-base transformer
    94371712: {"facebook/hubert-base-ls960", "microsoft/unispeech-sat-base", "microsoft/unispeech-sat-base-plus"},
    # ViT-B/16 (DINO, ImageNet-1k, ImageNet-21k) and ViT-L/16 (1k, 21k)
    86389248: {"facebook/dino-vitb16", "google/vit-base-patch16-224", "google/vit-base-patch16-224-in21k"},
    304351232: {"google/vit-large-patch16-224", "google/vit-large-patch16-224-in21k"},
}


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t"))


@pytest.mark.parametrize("path", CATALOGUES, ids=[p.name for p in CATALOGUES])
def test_no_two_families_share_a_parameter_count_unless_known(path):
    by_count = defaultdict(list)
    for row in rows(path):
        if row["n_params"]:
            by_count[int(row["n_params"])].append(row)
    for count, group in by_count.items():
        if len({r["family"] for r in group}) < 2:
            continue
        models = {r["model_id"] for r in group}
        assert models <= KNOWN_SHARED.get(count, set()), (
            f"{path.name}: {count} parameters for models of several families: "
            + ", ".join(f"{r['model_id']} ({r['family']})" for r in group)
        )


def test_llama_3_2_vision_has_its_own_parameter_count():
    """10,670,220,835: MllamaForConditionalGeneration built (on the meta device) from the
    model's config.json (vision image_size 560, 8 cross-attention layers in a 40-layer text
    model); the model card rounds it to 10.6B ("11B"). Not Llama-2-7B's 6,607,343,616."""
    row = next(r for r in rows(ROOT / "config" / "catalogue" / "paper.tsv")
               if r["model_id"] == "meta-llama/Llama-3.2-11B-Vision")  # fmt: skip
    assert int(row["n_params"]) == 10_670_220_835
