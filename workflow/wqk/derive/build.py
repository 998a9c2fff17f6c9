"""The tiny model of a config and the inputs of its forward.

`model_class` picks transformers' base model class of a config (AutoModel's, else the one class
of the type's modeling module built on that config class); `build` instantiates it with eager
attention, random weights in float64 (a fixed seed), every 1-d parameter (biases, gains) drawn
too; `forward_inputs` makes the keyword arguments of its forward from its signature and config.
"""

from __future__ import annotations

import importlib
import inspect

import torch

B, T = 2, 9  # batch, tokens
SEED = 0


def modeling_module(model_type: str):
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


def model_class(config):
    """The base model class of config (AutoModel's mapping, else the one PreTrainedModel of the
    type's modeling module whose config_class is the config's class)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(config.model_type)
    if isinstance(name, (list, tuple)):
        name = name[0]
    if name and hasattr(transformers, name):
        return getattr(transformers, name)
    module = modeling_module(config.model_type)
    found = [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, transformers.PreTrainedModel)
        and getattr(c, "config_class", None) is type(config)
        and "For" not in c.__name__
        and c.__module__ == module.__name__
    ]
    found.sort(key=lambda c: (not c.__name__.endswith("Model"), len(c.__name__)))
    if not found:
        raise LookupError(f"no base model class for config {type(config).__name__} in {module.__name__}")
    return found[0]


def build(config, cls=None) -> torch.nn.Module:
    """The model of config in float64, eval mode, eager attention, every parameter drawn at
    random from a fixed seed (1-d ones around 1 for gains, around 0 for biases)."""
    cls = cls or model_class(config)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    try:
        model = cls._from_config(config, attn_implementation="eager", torch_dtype=torch.float64)
    except TypeError:
        model = cls._from_config(config, attn_implementation="eager")
    model.eval().double()
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=p.dtype)
            if p.ndim == 1:
                p.copy_((0.0 if name.endswith("bias") else 1.0) + 0.2 * noise)
            else:
                p.copy_(noise / max(1.0, p.shape[-1]) ** 0.5)
    return model


def _sub(config, *names):
    for n in names:
        sub = getattr(config, n, None)
        if sub is not None:
            return sub
    return config


def _int(v):
    return v[0] if isinstance(v, (list, tuple)) else v


def forward_inputs(model, tokens: int = T) -> dict:
    """Keyword arguments of model's forward: token ids, pixels, audio or features as its
    signature asks, shaped by its config; decoder ids for an encoder-decoder."""
    config = model.config
    params = inspect.signature(model.forward).parameters
    g = torch.Generator().manual_seed(SEED + 2)
    kwargs = {}
    vocab = getattr(_sub(config, "text_config"), "vocab_size", None) or 100

    def ids(n=tokens):
        return torch.randint(3, max(4, min(vocab, 100)), (B, n), generator=g)

    main = getattr(model, "main_input_name", "input_ids")
    if main == "input_ids" or ("input_ids" in params and main not in params):
        kwargs["input_ids"] = ids()
    if main == "pixel_values" or "pixel_values" in params and main == "pixel_values":
        vision = _sub(config, "vision_config")
        size = _int(getattr(vision, "image_size", 32))
        channels = getattr(vision, "num_channels", 3)
        kwargs["pixel_values"] = torch.randn(B, channels, size, size, generator=g, dtype=torch.float64)
    if main == "input_values":
        kwargs["input_values"] = torch.randn(B, 1600, generator=g, dtype=torch.float64)
    if main == "input_features":
        mels = getattr(config, "num_mel_bins", None) or getattr(config, "feature_size", 80)
        frames = 2 * getattr(config, "max_source_positions", 16)
        kwargs["input_features"] = torch.randn(B, mels, frames, generator=g, dtype=torch.float64)
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        kwargs["decoder_input_ids"] = ids(tokens - 2)
    return kwargs
