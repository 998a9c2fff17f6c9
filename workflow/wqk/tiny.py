"""Tiny RANDOM models of a model_type, for tests and for null references.

build_tiny() instantiates the transformers class of a small config with a fixed seed and
saves config.json + model.safetensors with save_pretrained. The weights are random: the
config carries wqk_synthetic=True so that nothing downstream mistakes them for data.
Same model_type, seed and overrides -> byte-identical model.safetensors.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .progress import hub_bars

_BERT = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    vocab_size=128,
    max_position_embeddings=64,
)

# Config kwargs per model_type: small, but with the shapes that matter (GQA, d_kv != d/H, ...).
# fmt: off
TINY_CONFIGS: dict[str, dict] = {
    "bert": dict(_BERT),
    "roberta": dict(_BERT, max_position_embeddings=72, pad_token_id=1, bos_token_id=0, eos_token_id=2),
    "xlm-roberta": dict(_BERT, max_position_embeddings=72, pad_token_id=1, bos_token_id=0, eos_token_id=2),
    "albert": dict(_BERT, embedding_size=32, num_hidden_groups=1, inner_group_num=1),
    "distilbert": dict(dim=64, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=128, max_position_embeddings=64),
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=128, bos_token_id=0, eos_token_id=0),
    "gpt_neox": dict(_BERT, bos_token_id=0, eos_token_id=0),
    "llama": dict(_BERT, num_attention_heads=8, num_key_value_heads=2),
    "mistral": dict(_BERT, num_attention_heads=8, num_key_value_heads=2, sliding_window=32),
    # d_kv * num_heads = 32 != d_model = 64 on purpose; decoder deeper than encoder.
    "t5": dict(d_model=64, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=3, num_heads=4, vocab_size=128,
               decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
    "vit": dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32, patch_size=8
    ),
    "whisper": dict(d_model=64, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                    decoder_attention_heads=8, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=128,
                    num_mel_bins=16, max_source_positions=32, max_target_positions=32, pad_token_id=0,
                    bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, begin_suppress_tokens=None,
                    suppress_tokens=None),
}
# fmt: on

# The class saved: the task head that hub checkpoints usually come from, so the names carry
# the same prefixes as real checkpoints ("bert.", "transformer.", "model.", ...).
TINY_ARCHITECTURES: dict[str, str] = {
    "bert": "BertForMaskedLM",
    "roberta": "RobertaForMaskedLM",
    "xlm-roberta": "XLMRobertaForMaskedLM",
    "albert": "AlbertForMaskedLM",
    "distilbert": "DistilBertForMaskedLM",
    "gpt2": "GPT2LMHeadModel",
    "gpt_neox": "GPTNeoXForCausalLM",
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "t5": "T5ForConditionalGeneration",
    "vit": "ViTForImageClassification",
    "whisper": "WhisperForConditionalGeneration",
}


def tiny_model(model_type: str, seed: int = 0, architecture: str | None = None, **overrides):
    """The tiny model instance (random weights, eval mode), not saved."""
    import transformers

    from .errors import UnsupportedModelType

    if model_type not in TINY_CONFIGS:
        raise UnsupportedModelType(
            f"no tiny config for model_type {model_type!r}; known: {', '.join(sorted(TINY_CONFIGS))}"
        )
    config = transformers.AutoConfig.for_model(model_type, **{**TINY_CONFIGS[model_type], **overrides})
    config.wqk_synthetic = True
    cls = getattr(transformers, architecture or TINY_ARCHITECTURES[model_type])
    torch.manual_seed(seed)
    return cls(config).eval()


def build_tiny(model_type: str, out_dir: Path, seed: int = 0, architecture: str | None = None, **overrides) -> Path:
    """Build and save a tiny random model of model_type into out_dir (created); returns out_dir.

    overrides are config kwargs (e.g. is_decoder=True); architecture names another
    transformers class (e.g. "BertModel" for a checkpoint without prefix).
    """
    out_dir = Path(out_dir)
    model = tiny_model(model_type, seed, architecture, **overrides)
    with hub_bars():  # no "Writing model shards" frames in the tiny rule's log
        model.save_pretrained(out_dir, safe_serialization=True)
    # transformers 5 writes model.safetensors through a private temp file (mode 0600):
    # give the files the permissions any other file written here would get.
    mask = os.umask(0)
    os.umask(mask)
    for f in out_dir.iterdir():
        f.chmod(0o666 & ~mask)
    return out_dir
