"""Tiny random checkpoints of every model of config/catalogue/hub_popular.tsv, under its real hub
id: each one is the tiny model of its row's `model_type` record (`Tiny`: the transformers class
saved, hence the real repo's tensor names and prefixes, and its config), seeded by the hub id.
Rows whose notes say "gated" are gated, as on the hub. The weights are random: nothing here is
data, though config.json carries no wqk_synthetic flag (the real repos have none).

    build_popular(root)   # root/models/<hub id>/, root/manifest.json; `start(root)` serves them
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

POPULAR_CATALOGUE = Path(__file__).resolve().parents[2] / "config" / "catalogue" / "hub_popular.tsv"


def popular_rows(catalogue: Path | None = None) -> list[dict]:
    """The catalogue's rows (default hub_popular.tsv), each with its model_type (a row without
    one cannot be built)."""
    from wqk.catalogue import load_catalogue

    catalogue = catalogue or POPULAR_CATALOGUE
    rows = load_catalogue(catalogue)
    untyped = [r["model_id"] for r in rows if not r.get("model_type")]
    if untyped:
        raise ValueError(
            f"{catalogue}: no model_type for {untyped}: fill the model_type column (the model's config.json "
            "model_type, a record of wqk.adapters) so the stand-in hub can build them"
        )
    return rows


def is_gated(row: dict) -> bool:
    return "gated" in [part.strip() for part in row["notes"].split("|")]


def seed_of(hub_id: str) -> int:
    return int.from_bytes(hashlib.sha256(hub_id.encode()).digest()[:4], "little")


# hub id -> the class its config.json names (architectures), where the record's tiny class is not it: a
# derived record's tiny model is the base model; the real repo holds the task head's names and prefixes
ARCHITECTURES = {
    "sentence-transformers/all-mpnet-base-v2": "MPNetForMaskedLM",
    "Qwen/Qwen2.5-VL-7B-Instruct": "Qwen2_5_VLForConditionalGeneration",
    "google/gemma-3-4b-it": "Gemma3ForConditionalGeneration",
    "openai/gpt-oss-20b": "GptOssForCausalLM",
    "Qwen/Qwen3-30B-A3B": "Qwen3MoeForCausalLM",
    "ibm-granite/granite-3.3-8b-instruct": "GraniteForCausalLM",
    "ibm-granite/granite-3.1-3b-a800m-instruct": "GraniteMoeForCausalLM",
    "google/mt5-base": "MT5ForConditionalGeneration",
    "squeezebert/squeezebert-uncased": "SqueezeBertForMaskedLM",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "Llama4ForConditionalGeneration",
    "facebook/chameleon-7b": "ChameleonForConditionalGeneration",
}


def write_popular_repo(hub_id: str, model_type: str, folder: Path) -> None:
    """The tiny model of model_type's record, as the repo of hub_id: config.json, model.safetensors."""
    import transformers

    from wqk.tiny import build_tiny

    transformers.logging.set_verbosity_error()  # tiny vocabularies: token ids out of range, by design
    build_tiny(model_type, folder, seed=seed_of(hub_id) % 2**31, architecture=ARCHITECTURES.get(hub_id))
    path = folder / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.pop("wqk_synthetic", None)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(
        f"# {hub_id} (stand-in)\n\nTiny RANDOM weights of a {model_type} record's tiny config; not the model.\n"
    )


def build_popular(
    root: Path,
    rows: list[dict] | None = None,
    extra: dict[str, str] | None = None,
    listing: dict[str, dict] | None = None,
) -> Path:
    """Write the stand-in repos of rows (default: every row of hub_popular.tsv) under root,
    plus extra (hub id -> a transformers model_type built by `build_extra`); skipped when
    root/manifest.json already lists exactly these. listing: hub id -> what the hub's listing
    says of it (downloads, pipeline_tag, library_name, tags: listing.py), added to its manifest
    entry. Returns root."""
    root = Path(root)
    rows = popular_rows() if rows is None else rows
    extra = extra or {}
    models = {
        **{r["source"]: {"gated": "manual" if is_gated(r) else False, "model_type": r["model_type"]} for r in rows},
        **{hub_id: {"gated": False, "model_type": mt} for hub_id, mt in extra.items()},
    }
    for hub_id, facts in (listing or {}).items():
        models[hub_id] = {**models[hub_id], **facts}
    manifest = {"models": models, "datasets": {}}
    done = root / "manifest.json"
    if done.is_file() and json.loads(done.read_text()) == manifest:
        return root
    for row in rows:
        write_popular_repo(row["source"], row["model_type"], root / "models" / row["source"])
    for hub_id, model_type in extra.items():
        build_extra(hub_id, model_type, root / "models" / hub_id)
    done.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return root


# transformers model types that wqk has no record for (it refuses them): their tiny configs
EXTRA_CONFIGS = {
    "deepseek_v3": (
        "DeepseekV3ForCausalLM",
        dict(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=32,
            moe_intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            q_lora_rank=16,
            kv_lora_rank=16,
            qk_rope_head_dim=4,
            qk_nope_head_dim=4,
            v_head_dim=8,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=1,
        ),
    ),
}


def build_extra(hub_id: str, model_type: str, folder: Path) -> None:
    """A tiny random transformers model of a model_type wqk refuses (EXTRA_CONFIGS), as hub_id's repo."""
    import torch
    import transformers

    from wqk.progress import hub_bars

    cls, kwargs = EXTRA_CONFIGS[model_type]
    torch.manual_seed(seed_of(hub_id) % 2**31)
    model = getattr(transformers, cls)(transformers.AutoConfig.for_model(model_type, **kwargs)).eval()
    with hub_bars():
        model.save_pretrained(folder, safe_serialization=True)
