"""Tiny random checkpoints of every model of config/catalogue/paper.tsv, in the shape of the real
hub repo: its model_type and saved class (hence tensor names and prefixes), fused q/k/v where the
real model fuses them, its grouped-query ratio, its dtype, its file format and shard count, and
whether it is gated. Hidden sizes, layer counts and vocabularies are tiny.

What each entry records about the real repo (as of 2024-2025; from the model cards and configs):
the class in `architectures`, `torch_dtype`, the weight files (model.safetensors, sharded with an
index, or pytorch_model.bin only), gating (meta-llama), and names saved by older transformers
releases where they differ from today's (`rename`: Mllama's `language_model.model.`; GPT-2's
unprefixed `h.{i}`). Shard counts are the real ones, capped at the tiny model's tensor count.
The weights are random: nothing here is data.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch


@dataclass(frozen=True)
class Spec:
    model_id: str
    model_type: str  # the real config's model_type
    cls: str  # the transformers class whose names the real checkpoint carries
    dtype: str = "float32"
    shards: int = 1
    fmt: str = "safetensors"  # "safetensors", "bin" (pytorch_model.bin only) or "both"
    gated: bool = False
    config: dict = field(default_factory=dict)  # tiny config overrides (GQA ratio, layers, real small sizes)
    edit: dict = field(default_factory=dict)  # written into config.json after saving
    rename: tuple[tuple[str, str], ...] = ()  # (regex, replacement) on tensor names: older releases' names
    build_type: str = ""  # the transformers model_type to build (MobileLLM: llama), default model_type


def gqa(heads: int, kv: int, layers: int = 2, head_dim: int = 8) -> dict:
    return dict(
        num_attention_heads=heads, num_key_value_heads=kv, hidden_size=heads * head_dim, num_hidden_layers=layers
    )


def _llama(model_id, dtype, shards, heads, kv, layers=2, head_dim=8):
    config = gqa(heads, kv, layers, head_dim)
    return Spec(
        model_id, "llama", "LlamaForCausalLM", dtype, shards, "both" if shards > 1 else "safetensors", True, config
    )


_MOBILELLM_EDIT = {
    "model_type": "mobilellm",
    "architectures": ["MobileLLMForCausalLM"],
    "auto_map": {
        "AutoConfig": "configuration_mobilellm.MobileLLMConfig",
        "AutoModelForCausalLM": "modeling_mobilellm.MobileLLMForCausalLM",
    },
}
_MLLAMA_NAMES = (
    ("^model\\.language_model\\.", "language_model.model."),
    ("^lm_head\\.", "language_model.lm_head."),
    ("^model\\.vision_model\\.", "vision_model."),
    ("^model\\.multi_modal_projector\\.", "multi_modal_projector."),
)


def _mobilellm(size, heads, kv):
    return Spec(
        f"facebook/MobileLLM-{size}",
        "mobilellm",
        "LlamaForCausalLM",
        "float16",
        fmt="bin",
        config=gqa(heads, kv, 3) | {"tie_word_embeddings": True},
        edit=_MOBILELLM_EDIT,
        build_type="llama",
    )


# fmt: off
SPECS: list[Spec] = [
    # --- audio ---
    Spec("facebook/hubert-base-ls960", "hubert", "HubertForCTC"),
    Spec("facebook/hubert-large-ll60k", "hubert", "HubertModel", fmt="bin"),
    Spec("facebook/hubert-xlarge-ll60k", "hubert", "HubertModel", fmt="bin"),
    *[Spec(f"facebook/musicgen-{s}", "musicgen", "MusicgenForConditionalGeneration", shards=n, fmt="both")
      for s, n in (("large", 2), ("medium", 1), ("small", 1), ("stereo-large", 2), ("stereo-medium", 1),
                   ("stereo-small", 1))],
    *[Spec(f"facebook/s2t-{s}-librispeech-asr", "speech_to_text", "Speech2TextForConditionalGeneration", fmt="bin")
      for s in ("large", "medium", "small")],
    Spec("microsoft/speecht5_asr", "speecht5", "SpeechT5ForSpeechToText"),
    Spec("microsoft/speecht5_tts", "speecht5", "SpeechT5ForTextToSpeech"),
    Spec("microsoft/speecht5_vc", "speecht5", "SpeechT5ForSpeechToSpeech"),
    *[Spec(f"microsoft/unispeech-sat-{s}", "unispeech-sat", "UniSpeechSatModel", fmt="bin")
      for s in ("base", "base-plus", "large")],
    Spec("microsoft/wavlm-base-plus", "wavlm", "WavLMModel", fmt="bin"),
    Spec("microsoft/wavlm-base-plus-sd", "wavlm", "WavLMForAudioFrameClassification", fmt="bin"),
    Spec("microsoft/wavlm-large", "wavlm", "WavLMModel", fmt="bin"),
    Spec("openai/whisper-large", "whisper", "WhisperForConditionalGeneration", shards=2, fmt="both"),
    Spec("openai/whisper-large-v2", "whisper", "WhisperForConditionalGeneration", shards=2, fmt="both"),
    Spec("openai/whisper-large-v3", "whisper", "WhisperForConditionalGeneration", "float16", fmt="both"),
    Spec("openai/whisper-medium", "whisper", "WhisperForConditionalGeneration", fmt="both"),
    Spec("openai/whisper-small", "whisper", "WhisperForConditionalGeneration", fmt="both"),
    Spec("openai/whisper-tiny", "whisper", "WhisperForConditionalGeneration", fmt="both"),
    # --- text encoders ---
    *[Spec(f"albert-{s}-v2", "albert", "AlbertForMaskedLM", fmt="both") for s in ("base", "large", "xlarge", "xxlarge")],
    Spec("facebook/bart-base", "bart", "BartModel", fmt="both"),
    Spec("facebook/bart-large", "bart", "BartModel", fmt="both"),
    Spec("facebook/mbart-large-50", "mbart", "MBartForConditionalGeneration", fmt="both"),
    Spec("facebook/mbart-large-en-ro", "mbart", "MBartForConditionalGeneration", fmt="bin"),
    Spec("bert-base-uncased", "bert", "BertForMaskedLM", fmt="both"),
    Spec("bert-large-uncased", "bert", "BertForMaskedLM", fmt="both"),
    Spec("distilbert-base-uncased", "distilbert", "DistilBertForMaskedLM", fmt="both"),
    # google's compact BERTs, their real depth and heads; L-2_H-128 at its real width too (Figure 1
    # draws a 50 x 50 block of its layer 1), the others at width 64
    *[Spec(f"google/bert_uncased_L-{n_l}_H-{h}_A-{a}", "bert", "BertModel", fmt="bin",
           config=dict(num_hidden_layers=n_l, hidden_size=h if h == 128 else 64, num_attention_heads=a,
                       intermediate_size=64),
           edit={"architectures": ["BertForPreTraining"]})
      for n_l, h, a in ((2, 128, 2), (4, 256, 4), (4, 512, 8), (8, 512, 8))],
    Spec("microsoft/deberta-base", "deberta", "DebertaModel", fmt="bin"),
    Spec("microsoft/deberta-large", "deberta", "DebertaModel", fmt="bin"),
    Spec("microsoft/deberta-v2-xlarge", "deberta-v2", "DebertaV2Model", fmt="bin"),
    Spec("microsoft/deberta-v2-xlarge-mnli", "deberta-v2", "DebertaV2ForSequenceClassification", fmt="bin"),
    Spec("microsoft/deberta-v2-xxlarge", "deberta-v2", "DebertaV2Model", fmt="bin"),
    Spec("microsoft/deberta-v2-xxlarge-mnli", "deberta-v2", "DebertaV2ForSequenceClassification", fmt="bin"),
    Spec("answerdotai/ModernBERT-base", "modernbert", "ModernBertForMaskedLM"),
    Spec("answerdotai/ModernBERT-large", "modernbert", "ModernBertForMaskedLM"),
    Spec("distilbert/distilroberta-base", "roberta", "RobertaForMaskedLM", fmt="both"),
    Spec("FacebookAI/roberta-base", "roberta", "RobertaForMaskedLM", fmt="both"),
    Spec("FacebookAI/roberta-large", "roberta", "RobertaForMaskedLM", fmt="both"),
    Spec("FacebookAI/roberta-large-mnli", "roberta", "RobertaForSequenceClassification", fmt="both"),
    Spec("FacebookAI/xlm-roberta-base", "xlm-roberta", "XLMRobertaForMaskedLM", fmt="both"),
    Spec("FacebookAI/xlm-roberta-large", "xlm-roberta", "XLMRobertaForMaskedLM", fmt="both"),
    # --- encoder-decoders ---
    *[Spec(f"google/t5-v1_1-{s}", "t5", "T5ForConditionalGeneration", fmt="bin",
           config=dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False))
      for s in ("base", "large", "small", "xl")],
    Spec("google-t5/t5-11b", "t5", "T5ForConditionalGeneration", fmt="bin"),
    *[Spec(f"google-t5/t5-{s}", "t5", "T5ForConditionalGeneration", fmt="both") for s in ("3b", "base", "large", "small")],
    # --- decoders ---
    # the hub's GPT-2 files predate the LM head's "transformer." prefix: GPT2Model's names
    *[Spec(m, "gpt2", "GPT2Model", fmt="both", edit={"architectures": ["GPT2LMHeadModel"]})
      for m in ("distilbert/distilgpt2", "gpt2", "gpt2-large", "gpt2-medium", "gpt2-xl")],
    Spec("openai-gpt", "openai-gpt", "OpenAIGPTModel", fmt="both", edit={"architectures": ["OpenAIGPTLMHeadModel"]}),
    Spec("EleutherAI/gpt-j-6B", "gptj", "GPTJForCausalLM", fmt="bin"),
    *[Spec(f"EleutherAI/gpt-neo-{s}", "gpt_neo", "GPTNeoForCausalLM", fmt="both") for s in ("1.3B", "125m", "2.7B")],
    _llama("meta-llama/Llama-2-13b-chat-hf", "float16", 3, 4, 4),
    _llama("meta-llama/Llama-2-70b-hf", "float16", 15, 16, 2, 4),
    _llama("meta-llama/Llama-2-7b-chat-hf", "float16", 2, 4, 4),
    _llama("meta-llama/Llama-2-7b-hf", "float16", 2, 4, 4),
    _llama("meta-llama/Llama-3.1-405B", "bfloat16", 191, 32, 2, 4, head_dim=4),
    _llama("meta-llama/Llama-3.1-70B", "bfloat16", 30, 16, 2, 4),
    _llama("meta-llama/Llama-3.1-8B", "bfloat16", 4, 8, 2),
    _llama("meta-llama/Llama-3.2-1B", "bfloat16", 1, 8, 2),
    _llama("meta-llama/Llama-3.2-3B", "bfloat16", 2, 6, 2),
    _llama("meta-llama/Meta-Llama-3-70B", "bfloat16", 30, 16, 2, 4),
    _llama("meta-llama/Meta-Llama-3-8B", "bfloat16", 4, 8, 2),
    Spec("mistralai/Mistral-7B-v0.1", "mistral", "MistralForCausalLM", "bfloat16", 2, "both", config=gqa(8, 2)),
    Spec("mistralai/Mixtral-8x22B-v0.1", "mixtral", "MixtralForCausalLM", "bfloat16", 59,
         config=gqa(12, 2, 4) | dict(intermediate_size=32, num_local_experts=8, num_experts_per_tok=2)),
    _mobilellm("1.5B", 25, 5),
    _mobilellm("125M", 9, 3),
    _mobilellm("1B", 20, 5),
    _mobilellm("350M", 15, 5),
    _mobilellm("600M", 18, 6),
    Spec("microsoft/phi-1", "phi", "PhiForCausalLM", "float32"),
    Spec("microsoft/phi-1_5", "phi", "PhiForCausalLM", "float16"),
    Spec("microsoft/phi-2", "phi", "PhiForCausalLM", "float16", 2),
    Spec("microsoft/Phi-3-mini-128k-instruct", "phi3", "Phi3ForCausalLM", "bfloat16", 2),
    Spec("microsoft/Phi-3-mini-4k-instruct", "phi3", "Phi3ForCausalLM", "bfloat16", 2),
    # TinyStories: GPT-Neo at the real small widths where cheap (Figure 1 draws TinyStories-3M's layer 1)
    Spec("roneneldan/TinyStories-1Layer-21M", "gpt_neo", "GPTNeoForCausalLM", fmt="bin",
         config=dict(num_layers=1, attention_types=[[["global"], 1]])),
    Spec("roneneldan/TinyStories-1M", "gpt_neo", "GPTNeoForCausalLM", fmt="bin",
         config=dict(hidden_size=64, num_heads=16, num_layers=8, attention_types=[[["global", "local"], 4]])),
    Spec("roneneldan/TinyStories-28M", "gpt_neo", "GPTNeoForCausalLM", fmt="bin"),
    Spec("roneneldan/TinyStories-3M", "gpt_neo", "GPTNeoForCausalLM", fmt="bin",
         config=dict(hidden_size=128, num_heads=16, num_layers=8, attention_types=[[["global", "local"], 4]])),
    Spec("roneneldan/TinyStories-8M", "gpt_neo", "GPTNeoForCausalLM", fmt="bin"),
    # --- vision ---
    Spec("microsoft/beit-base-patch16-224", "beit", "BeitForImageClassification", fmt="both"),
    Spec("microsoft/beit-base-patch16-224-pt22k", "beit", "BeitForMaskedImageModeling", fmt="bin"),
    Spec("microsoft/beit-base-patch16-384", "beit", "BeitForImageClassification", fmt="bin"),
    Spec("microsoft/beit-large-patch16-224", "beit", "BeitForImageClassification", fmt="bin"),
    Spec("microsoft/beit-large-patch16-224-pt22k", "beit", "BeitForMaskedImageModeling", fmt="bin"),
    Spec("microsoft/beit-large-patch16-384", "beit", "BeitForImageClassification", fmt="bin"),
    Spec("microsoft/beit-large-patch16-512", "beit", "BeitForImageClassification", fmt="bin"),
    Spec("facebook/detr-resnet-50", "detr", "DetrForObjectDetection", fmt="both"),
    *[Spec(f"facebook/dino-vit{s}", "vit", "ViTModel", fmt="bin") for s in ("b16", "b8", "s16", "s8")],
    *[Spec(f"facebook/dinov2-{s}", "dinov2", "Dinov2Model") for s in ("base", "giant", "large", "small")],
    *[Spec(f"facebook/deit-{s}-patch16-224", "vit", "ViTForImageClassification", fmt="both")
      for s in ("base", "small", "tiny")],
    Spec("microsoft/dit-base", "beit", "BeitForMaskedImageModeling", fmt="bin"),
    Spec("microsoft/dit-large", "beit", "BeitForMaskedImageModeling", fmt="bin"),
    Spec("microsoft/git-base", "git", "GitForCausalLM", fmt="both"),
    Spec("microsoft/git-large", "git", "GitForCausalLM", fmt="both"),
    *[Spec(f"openai/imagegpt-{s}", "imagegpt", "ImageGPTForCausalImageModeling", fmt="bin")
      for s in ("large", "medium", "small")],
    # saved from Mask2FormerForUniversalSegmentation (its loss needs scipy): the inner model under "model."
    *[Spec(f"facebook/mask2former-swin-{s}-coco-instance", "mask2former", "Mask2FormerModel",
           edit={"architectures": ["Mask2FormerForUniversalSegmentation"]}, rename=(("^", "model."),))
      for s in ("base", "large", "tiny")],
    Spec("meta-llama/Llama-3.2-11B-Vision", "mllama", "MllamaForConditionalGeneration", "bfloat16", 5, gated=True,
         rename=_MLLAMA_NAMES),
    Spec("google/vit-base-patch16-224", "vit", "ViTForImageClassification", fmt="both"),
    Spec("google/vit-large-patch16-224", "vit", "ViTForImageClassification", fmt="both"),
    *[Spec(f"google/vit-{s}-in21k", "vit", "ViTModel", fmt="both")
      for s in ("base-patch16-224", "huge-patch14-224", "large-patch16-224")],
    *[Spec(f"facebook/vit-mae-{s}", "vit_mae", "ViTMAEForPreTraining", fmt="both") for s in ("base", "huge", "large")],
]
# fmt: on
SPECS_BY_ID = {s.model_id: s for s in SPECS}


def tiny_config_kwargs(model_type: str) -> dict:
    from tiny_zoo import tiny_config

    return tiny_config(model_type)


def _seed(model_id: str) -> int:
    return int.from_bytes(hashlib.sha256(model_id.encode()).digest()[:4], "little")


def build_model(spec: Spec) -> tuple[dict[str, torch.Tensor], dict]:
    """The tiny model's tensors under the names transformers saves (its reverse conversion maps
    today's module names to the checkpoints' names), renamed, in the spec's dtype; and its config."""
    import tempfile

    import transformers
    from safetensors import safe_open

    from wqk.progress import hub_bars

    transformers.logging.set_verbosity_error()  # tiny vocabularies: token ids out of range, by design
    kind = spec.build_type or spec.model_type
    config = transformers.AutoConfig.for_model(kind, **(tiny_config_kwargs(kind) | spec.config))
    torch.manual_seed(_seed(spec.model_id))
    model = getattr(transformers, spec.cls)(config).eval().to(getattr(torch, spec.dtype))
    tensors = {}
    with tempfile.TemporaryDirectory() as tmp:
        with hub_bars():  # no "Writing model shards" bars
            model.save_pretrained(tmp, safe_serialization=True, max_shard_size="1GB")
        cfg = json.loads((Path(tmp) / "config.json").read_text())
        for file in sorted(Path(tmp).glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as f:
                for key in f.keys():
                    name = key
                    for pattern, repl in spec.rename:
                        name = re.sub(pattern, repl, name)
                    tensors[name] = f.get_tensor(key)
    cfg.update({"architectures": [spec.cls], "torch_dtype": spec.dtype})
    cfg.update(spec.edit)
    return tensors, cfg


def _split(tensors: dict, n: int) -> list[dict]:
    names = list(tensors)
    n = max(1, min(n, len(names)))
    cuts = [round(i * len(names) / n) for i in range(n + 1)]
    return [{k: tensors[k] for k in names[cuts[i] : cuts[i + 1]]} for i in range(n)]


def _write_weights(folder: Path, tensors: dict, shards: int, fmt: str) -> None:
    from safetensors.torch import save_file

    parts = _split(tensors, shards)
    for ext, base in (("safetensors", "model"), ("bin", "pytorch_model")):
        if fmt not in (ext, "both"):
            continue
        if len(parts) == 1:
            names = [f"{base}.{ext}"]
        else:
            names = [f"{base}-{i + 1:05d}-of-{len(parts):05d}.{ext}" for i in range(len(parts))]
            index = {
                "metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
                "weight_map": {k: names[i] for i, p in enumerate(parts) for k in p},
            }
            (folder / f"{base}.{ext}.index.json").write_text(json.dumps(index, indent=2, sort_keys=True))
        for name, part in zip(names, parts):
            if ext == "safetensors":
                save_file(part, str(folder / name), metadata={"format": "pt"})
            else:
                torch.save(part, folder / name)


def write_repo(spec: Spec, folder: Path) -> None:
    tensors, cfg = build_model(spec)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True, default=str))
    _write_weights(folder, tensors, spec.shards, spec.fmt)
    (folder / "README.md").write_text(
        f"# {spec.model_id} (stand-in)\n\nTiny RANDOM weights in the layout of the real repo; not the model.\n"
    )
