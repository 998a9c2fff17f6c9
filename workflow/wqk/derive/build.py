"""The tiny model of a config and the inputs of its forward.

`model_class` picks transformers' base model class of a config (AutoModel's, else the one class
of the type's modeling module built on that config class); `build` instantiates it with eager
attention, random weights in float64 (a fixed seed), every 1-d parameter (biases, gains) drawn
too; `forward_inputs` makes the keyword arguments of its forward from its signature and config.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import re

import torch

B, T = 2, 9  # batch, tokens
MAX_BYTES = 2**29  # a tiny model past 512 MiB (float32, before float64) is refused, not run
SEED = 0


def modeling_module(model_type: str):
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


class NoModelClass(LookupError):
    """transformers builds no model from the config alone (a part of a composite's config)."""


def model_class(config):
    """The base model class of config (AutoModel's mapping, else the one PreTrainedModel of the
    type's modeling module whose config_class is the config's class)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(config.model_type)
    if isinstance(name, (list, tuple)):
        name = name[0]
    if name and hasattr(transformers, name) and _has_forward(getattr(transformers, name)):
        return getattr(transformers, name)
    module = modeling_module(config.model_type)
    models = [
        c
        for m in (module, *_sibling_modules(module))
        for _, c in inspect.getmembers(m, inspect.isclass)
        if issubclass(c, transformers.PreTrainedModel)
        and getattr(c, "config_class", None) is type(config)
        and not c.__name__.endswith("PreTrainedModel")
        and c.__module__ == m.__name__
    ]
    if not models and not name:
        raise NoModelClass(
            f"no model class of {module.__name__.rpartition('.')[0]} is built from {type(config).__name__}: a part "
            "of a composite model's config (scored with the composite)"
        )
    found = [c for c in models if _has_forward(c)]
    # a base model first, else a task head (a type whose only model is one: depth estimation)
    found.sort(key=lambda c: ("For" in c.__name__, not c.__name__.endswith("Model"), len(c.__name__)))
    if not found:
        raise LookupError(f"no base model class for config {type(config).__name__} in {module.__name__}")
    return found[0]


def _sibling_modules(module) -> list:
    """The other modeling modules of module's package (BLIP's text model lives in modeling_blip_text)."""
    import pkgutil

    package = importlib.import_module(module.__name__.rpartition(".")[0])
    out = []
    for info in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{info.name}"
        if info.name.startswith("modeling_") and name != module.__name__ and "_tf_" not in info.name:
            try:
                out.append(importlib.import_module(name))
            except Exception:  # a module that needs a library not installed
                continue
    return out


def _has_forward(cls) -> bool:
    return cls.forward is not torch.nn.Module.forward and cls.forward.__name__ != "_forward_unimplemented"


def build(config, cls=None, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """The model of config in dtype (float64; float32 where its forward insists), eval mode, eager
    attention, every parameter drawn at random from a fixed seed (1-d ones around 1 for gains,
    around 0 for biases)."""
    cls = cls or model_class(config)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = cls._from_config(config, attn_implementation="eager", experts_implementation="eager")
    size = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    if size > MAX_BYTES:  # a default the shrinking missed (a table of positions squared): not tiny
        raise MemoryError(f"the tiny model holds {size / 2**30:.1f} GiB of parameters and buffers")
    model.eval().to(dtype)
    _fit_rope_sections(model)
    return randomised(model)


def randomised(model: torch.nn.Module) -> torch.nn.Module:
    """model's parameters drawn afresh from a fixed seed, in place: 1-d ones around 1 (gains) or
    0 (biases), matrices with unit-variance outputs; learned scalars kept."""
    generator = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=p.dtype)
            if p.ndim == 0:  # a learned scalar (CLIP's logit scale): kept
                continue
            if p.ndim == 1:
                p.copy_((0.0 if name.endswith("bias") else 1.0) + 0.2 * noise)
            else:
                p.copy_(noise / max(1.0, p.shape[-1]) ** 0.5)
    return model


def _fit_rope_sections(model) -> None:
    """Multimodal rope sections a model class defaults to for its full head (Qwen2.5-VL's
    [16, 24, 24]) rescaled to its tiny head's frequencies, proportions kept."""
    for module in model.modules():
        sections, inv_freq = getattr(module, "mrope_section", None), getattr(module, "inv_freq", None)
        if isinstance(sections, (list, tuple)) and sections and isinstance(inv_freq, torch.Tensor):
            n = inv_freq.numel()
            if sum(sections) != n:
                new = [max(1, round(x * n / sum(sections))) for x in sections]
                new[0] += n - sum(new)
                module.mrope_section = type(sections)(new)


def _sub(config, *names):
    for n in names:
        sub = getattr(config, n, None)
        if sub is not None:
            return sub
    return config


def _int(v):
    return v[0] if isinstance(v, (list, tuple)) else v


def _pixels(config, g) -> torch.Tensor:
    vision = _sub(config, "vision_config")
    size = getattr(vision, "image_size", None) or 32
    square = not (isinstance(size, (list, tuple)) and len(size) == 2)  # MGP-STR's [height, width]: [32, 128]
    height, width = (_int(size),) * 2 if square else size
    channels = getattr(vision, "num_channels", 3)
    return torch.randn(B, channels, height, width, generator=g, dtype=torch.float64)


def _features(config, g) -> torch.Tensor:
    audio = _sub(config, "audio_config")
    mels = getattr(audio, "num_mel_bins", None) or getattr(audio, "feature_size", None) or 80
    frames = 2 * (getattr(audio, "max_source_positions", None) or 16)
    return torch.randn(B, mels, frames, generator=g, dtype=torch.float64)


FLAT_SIDE = 4  # SigLIP 2's flattened patches: a grid of 4 x 4


def _flat_patches(config, g) -> dict:
    """An image as SigLIP 2 (NaFlex) reads it: [B, patches, channels x patch x patch], its grid
    of patches (height, width) and a mask of every patch real."""
    vision = _sub(config, "vision_config")
    patch = _int(getattr(vision, "patch_size", None) or 16)
    channels = getattr(vision, "num_channels", None) or 3
    n = FLAT_SIDE * FLAT_SIDE
    return {
        "pixel_values": torch.randn(B, n, channels * patch * patch, generator=g, dtype=torch.float64),
        "spatial_shapes": torch.tensor([[FLAT_SIDE, FLAT_SIDE]] * B),
        "pixel_attention_mask": torch.ones(B, n, dtype=torch.long),
    }


def _positioned_patches(config, g) -> dict:
    """Gemma 4's flattened patches [B, patches, channels x patch x patch] and each patch's (x, y):
    a square grid of FLAT_SIDE patches a side, rounded up to whole pooling kernels."""
    vision = _sub(config, "vision_config")
    patch = _int(getattr(vision, "patch_size", None) or 16)
    channels = getattr(vision, "num_channels", None) or 3
    kernel = getattr(vision, "pooling_kernel_size", None) or 1
    side = kernel * math.ceil(FLAT_SIDE / kernel)
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    return {
        "pixel_values": torch.randn(B, side * side, channels * patch * patch, generator=g, dtype=torch.float64),
        "pixel_position_ids": torch.stack([xs.flatten(), ys.flatten()], -1).expand(B, -1, -1).contiguous(),
    }


def _tiles(config, pixels: torch.Tensor, g) -> dict:
    """Mllama's images of tiles [B, 1 image, tiles, channels, height, width]: as many tiles as
    its tile embeddings hold (max_num_tiles), in the first aspect ratio of that many tiles."""
    vision = _sub(config, "vision_config")
    tiles = getattr(vision, "max_num_tiles", None) or 1
    ratios = [tuple(r) for r in getattr(vision, "supported_aspect_ratios", None) or []]
    ratio = next((n + 1 for n, r in enumerate(ratios) if math.prod(r) == tiles), None)  # ids from 1 (0: padding)
    if ratio is None:
        tiles, ratio = 1, 1
    return {
        "pixel_values": torch.randn(B, 1, tiles, *pixels.shape[1:], generator=g, dtype=torch.float64),
        "aspect_ratio_ids": torch.full((B, 1), ratio, dtype=torch.long),
        "aspect_ratio_mask": torch.ones(B, 1, tiles, dtype=torch.long),
    }


def _packed_patches(config, g) -> dict:
    """An image as NaViT packers (MiniCPM-V) read it: its patches laid side by side in one strip
    [1, channels, patch, patches x patch], and its grid of patches (height, width). One image of
    one merge window (window_kernel_size), else of FLAT_SIDE x FLAT_SIDE: every attention then
    sees every patch (packed images, or windows, split an attention's tokens into parts)."""
    vision = _sub(config, "vision_config")
    patch = _int(getattr(vision, "patch_size", None) or 16)
    channels = getattr(vision, "num_channels", None) or 3
    window = getattr(vision, "window_kernel_size", None)
    height, width = window if isinstance(window, (list, tuple)) and len(window) == 2 else (FLAT_SIDE, FLAT_SIDE)
    return {
        "pixel_values": torch.randn(1, channels, patch, height * width * patch, generator=g, dtype=torch.float64),
        "target_sizes": torch.tensor([[height, width]]),
    }


def _placed_patches(config, g) -> torch.Tensor:
    """Pix2Struct's flattened patches [B, patches, 2 + patch pixels]: each patch's row and column
    (a grid of FLAT_SIDE x FLAT_SIDE) before its pixels."""
    vision = _sub(config, "vision_config")
    pixels = getattr(vision, "patch_embed_hidden_size", None) or 768
    rows, cols = torch.meshgrid(torch.arange(FLAT_SIDE), torch.arange(FLAT_SIDE), indexing="ij")
    place = torch.stack([rows.flatten(), cols.flatten()], -1).to(torch.float64).expand(B, -1, -1)
    return torch.cat([place, torch.randn(B, FLAT_SIDE * FLAT_SIDE, pixels, generator=g, dtype=torch.float64)], -1)


def _video(config, g) -> torch.Tensor:
    """A clip [B, frames, channels, size, size]: as many frames as the config names (at least
    two tubelets), else 2."""
    vision = _sub(config, "vision_config")
    size = _int(getattr(vision, "crop_size", None) or getattr(vision, "image_size", None) or 32)
    channels = getattr(vision, "in_chans", None) or getattr(vision, "num_channels", None) or 3
    frames = getattr(vision, "frames_per_clip", None) or getattr(vision, "num_frames", None) or 2
    frames = max(frames, 2 * (_int(getattr(vision, "tubelet_size", None)) or 1))  # VideoPrism: [t, h, w]
    return torch.randn(B, frames, channels, size, size, generator=g, dtype=torch.float64)


def _patches(config, g) -> dict:
    """One image of 2m x 2m patches (m: the spatial merge), flattened as Qwen2-VL's vision tower
    reads them: [patches, channels x temporal patch x patch x patch], and its grid (1, 2m, 2m)."""
    side = 2 * _merge(config)
    grid = torch.tensor([[1, side, side]])
    x = torch.randn(side * side, math.prod(_patch_shape(config)), generator=g, dtype=torch.float64)
    return {"hidden_states": x, "grid_thw": grid}


def _merge(config) -> int:
    return getattr(config, "spatial_merge_size", None) or getattr(config, "merge_size", None) or 2


def _patch_shape(config) -> tuple[int, ...]:
    """One flattened patch's shape: (channels, temporal patch, patch, patch), the temporal one
    left out where it is 1."""
    channels = getattr(config, "in_channels", None) or getattr(config, "in_chans", None) or 3
    patch = _int(getattr(config, "patch_size", None) or 14)
    temporal = getattr(config, "temporal_patch_size", None) or getattr(config, "patch_temporal", None) or 1
    return (channels, temporal, patch, patch) if temporal > 1 else (channels, patch, patch)


def _layout_variants(model, variants: list[dict]) -> list[dict]:
    """Pixels laid out otherwise: flattened patches beside a grid_thw, each patch as a small image
    [patches, channels, patch, patch] (Kimi-K2.5's tower convolves each), and these as a batch of
    one [1, patches, channels, patch, patch] (PaddleOCR-VL's); a clip's frames as a
    batch of images [B x frames, channels, height, width] (X-CLIP's vision model)."""
    out = []
    for inputs in variants:
        pixels = inputs.get("pixel_values")
        if pixels is not None and pixels.ndim == 5:
            out.append(dict(inputs, pixel_values=pixels.flatten(0, 1)))
        name = next((k for k in ("pixel_values", "hidden_states") if k in inputs), None)
        if "grid_thw" in inputs and name and inputs[name].ndim == 2:
            x = inputs[name]
            x = x.reshape(x.shape[0], *_patch_shape(model.config))
            out += [dict(inputs, **{name: x}), dict(inputs, **{name: x[None]})]
    return out


def input_variants(model, seed: int = 0) -> list[dict]:
    """The inputs to try, in order: every modality the forward takes, then its main one alone;
    audio features as [B, mel bins, frames] (Whisper), then [B, frames, mel bins] (conformers);
    then waveforms and patches laid out otherwise."""
    out = []
    dtype = next(model.parameters()).dtype
    for every in (True, False):
        inputs = {
            k: v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for k, v in forward_inputs(model, every=every, seed=seed).items()
        }
        out.append(inputs)
        features = inputs.get("input_features")
        if features is not None and features.ndim == 3:
            out.append(_with_mask(dict(inputs, input_features=features.transpose(1, 2).contiguous())))
    return out + _waveform_variants(model, out, seed) + _layout_variants(model, out)


def _with_mask(inputs: dict) -> dict:
    """input_features_mask, where given, over the frames of input_features as they now lie."""
    if "input_features_mask" in inputs:
        inputs["input_features_mask"] = _every_frame(inputs["input_features"])
    return inputs


def _every_frame(features: torch.Tensor) -> torch.Tensor:
    """A mask of every frame real, over the last axis of [B, ..., frames] features."""
    return torch.ones(features.shape[0], features.shape[-1], dtype=torch.long)


def _waveform_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others: a waveform as [B, 1, samples] (codecs' one channel), and input_values as
    [B, frames, mel bins] where the config has mel bins (AST's spectrogram)."""
    g = torch.Generator().manual_seed(SEED + 7 + 1000 * seed)
    mels = getattr(model.config, "num_mel_bins", None)
    out = []
    for inputs in variants:
        values = inputs.get("input_values")
        if values is None or values.ndim != 2:
            continue
        out.append(dict(inputs, input_values=values[:, None].contiguous()))
        if isinstance(mels, int):
            frames = getattr(model.config, "max_length", None) or 64  # AST's positions fix its frames
            frames = frames if isinstance(frames, int) and frames <= 1024 else 64
            out.append(dict(inputs, input_values=torch.randn(B, frames, mels, generator=g, dtype=values.dtype)))
    return out


def forward_inputs(model, tokens: int = T, every: bool = True, seed: int = 0) -> dict:
    """Keyword arguments of model's forward: its main input (token ids, pixels, audio or features,
    shaped by its config) and, with every, the other modalities its signature and config have
    (CLIP's ids and pixels); decoder ids for an encoder-decoder."""
    config = model.config
    params = inspect.signature(model.forward).parameters
    g = torch.Generator().manual_seed(SEED + 2 + 1000 * seed)
    vocab = getattr(_sub(config, "text_config"), "vocab_size", None) or getattr(config, "vocab_size", None) or 100

    def ids(n=tokens):
        return torch.randint(3, max(4, min(vocab, 100)), (B, n), generator=g)

    makers = {
        "input_ids": ids,
        "pixel_values": lambda: _pixels(config, g),
        "input_values": lambda: torch.randn(B, _samples(config, tokens), generator=g, dtype=torch.float64),
        "input_features": lambda: _features(config, g),
    }
    if "grid_thw" in params:  # Qwen2-VL's vision tower and its kin: flattened patches and their grid
        patches = _patches(config, g)
        if "hidden_states" not in params and "pixel_values" in params:  # the patches' name in newer towers
            patches["pixel_values"] = patches.pop("hidden_states")
        if "merge_sizes" in params:  # Video-LLaMA 3: each image's spatial merge
            patches["merge_sizes"] = torch.tensor([_merge(config)])
        return patches
    main = getattr(model, "main_input_name", "input_ids")
    if main not in params:
        main = next((k for k in makers if k in params), main)
    first = next((k for k, p in params.items() if p.default is p.empty and p.kind in NAMED), None)
    if main not in params and first and (main == "pixel_values" or "image" in first):
        # pixels under the forward's own name (Florence 2's vision backbone: hidden_states; BridgeTower's: image)
        makers[first], main = makers["pixel_values"], first
    kwargs = {main: makers[main]()} if main in makers and main in params else {}
    if every:
        if (
            "input_ids" in params
            and "input_ids" not in kwargs
            and getattr(_sub(config, "text_config"), "vocab_size", None)
        ):
            kwargs["input_ids"] = ids()
        has_vision = hasattr(config, "vision_config") or hasattr(config, "image_size")
        if "pixel_values" in params and "pixel_values" not in kwargs and has_vision:
            kwargs["pixel_values"] = makers["pixel_values"]()
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        kwargs["decoder_input_ids"] = ids(tokens - 2)
    _by_signature(model, params, kwargs, g, tokens)
    return kwargs


NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)  # not *args, **kwargs


def _samples(config, tokens: int) -> int:
    """A waveform's length: 1600 samples, or tokens frames of a codec that states its frame rate
    (Mimi's 1920 samples a frame, where 1600 samples would give its transformers one frame), or
    tokens of an encoder that states its samples per token (Muse Spark's: it takes only whole ones)."""
    per_token = getattr(config, "samples_per_token", None)
    if isinstance(per_token, int) and 0 < per_token <= 64_000 // tokens:
        return tokens * per_token
    rate, frames = getattr(config, "sampling_rate", None), getattr(config, "frame_rate", None)
    if not (isinstance(rate, (int, float)) and isinstance(frames, (int, float)) and frames > 0):
        return 1600
    return max(1600, min(tokens * math.ceil(rate / frames), 64_000))


def _width(config) -> int:
    return getattr(config, "hidden_size", None) or getattr(config, "d_model", None) or 32


def _by_signature(model, params, kwargs: dict, g, tokens: int) -> None:
    """Inputs some forwards need besides their main one, named by their signature."""
    config = model.config
    if "use_cache" in params:  # no cache: hybrid models (Jamba, Zamba) build one only for generation
        kwargs["use_cache"] = False
    frames = getattr(_sub(config, "vision_config"), "num_frames", None)  # X-CLIP: its vision config's
    if "pixel_values" in kwargs and isinstance(frames, int) and kwargs["pixel_values"].ndim == 4:  # video
        # frames that differ (X-CLIP's attention across frames would see one frame's token again and again)
        image = kwargs["pixel_values"].shape[1:]
        kwargs["pixel_values"] = torch.randn(B, frames, *image, generator=g, dtype=torch.float64)
    if "input_features" in kwargs and getattr(config, "input_feat_per_channel", None):  # Speech2Text: [B, T, features]
        feats = config.input_feat_per_channel * getattr(config, "input_channels", 1)
        kwargs["input_features"] = torch.randn(B, 4 * tokens, feats, generator=g, dtype=torch.float64)
    if "input_values" in kwargs and "decoder_input_values" in params:  # SpeechT5 without pre-nets: hidden states
        kwargs["input_values"] = torch.randn(B, tokens, _width(config), generator=g, dtype=torch.float64)
        kwargs["decoder_input_values"] = torch.randn(B, tokens - 2, _width(config), generator=g, dtype=torch.float64)
    if "aspect_ratio_ids" in params and "pixel_values" in kwargs:  # Mllama's vision tower: images of tiles
        kwargs.update(_tiles(config, kwargs["pixel_values"], g))
    if "spatial_shapes" in params and "pixel_values" in kwargs:  # SigLIP 2 (NaFlex): patches, their grid, a mask
        kwargs.update(_flat_patches(config, g))
    if "pixel_position_ids" in params and "pixel_values" in kwargs:  # Gemma 4: flat patches and their places
        kwargs.update(_positioned_patches(config, g))
    if "target_sizes" in params and "pixel_values" in kwargs:  # MiniCPM-V: patches packed in a strip, their grid
        kwargs.update(_packed_patches(config, g))
    if "flattened_patches" in params and "flattened_patches" not in kwargs:  # Pix2Struct, Kosmos-2.5
        kwargs["flattened_patches"] = _placed_patches(config, g)
    if "pixel_values_videos" in params and not kwargs:  # a video model (V-JEPA 2, VideoPrism): a clip
        kwargs["pixel_values_videos"] = _video(config, g)
    if not kwargs and ("spectrogram" in params or "mel_spectrogram" in params):  # vocoders: mel frames in
        mels = getattr(config, "model_in_dim", None) or getattr(config, "mel_dim", None) or 80
        if "spectrogram" in params:  # HiFi-GAN (SpeechT5, FastSpeech 2): [B, frames, mel bins]
            kwargs["spectrogram"] = torch.randn(B, tokens, mels, generator=g, dtype=torch.float64)
        else:  # BigVGAN (Qwen2.5-Omni): [B, mel bins, frames]
            kwargs["mel_spectrogram"] = torch.randn(B, mels, tokens, generator=g, dtype=torch.float64)
    if not kwargs and "latents" in params:  # a codec's decoder (Mimi): continuous latents [B, width, frames]
        kwargs["latents"] = torch.randn(B, _width(config), tokens, generator=g, dtype=torch.float64)
    if "input_points" in params and "pixel_values" in kwargs:  # SAM: one prompt of two points per image
        size = kwargs["pixel_values"].shape[-1]
        kwargs["input_points"] = torch.rand(B, 1, 2, 2, generator=g, dtype=torch.float64) * size
    mask = params.get("input_features_mask")
    if mask is not None and "input_features" in kwargs and mask.default is inspect.Parameter.empty:
        kwargs["input_features_mask"] = _every_frame(kwargs["input_features"])  # Qwen3-ASR's encoder
    for name in ("hidden_states", "query_embeds", "context"):
        p = params.get(name)
        if p is not None and p.default is inspect.Parameter.empty and not kwargs:
            # a tower that reads its states as they come from another (FLAVA's multimodal encoder), or
            # learned queries (BLIP-2's Q-Former), or a resampler's context (Idefics2's perceiver)
            width = getattr(config, "input_dim", None) or _width(config)
            kwargs[name] = torch.randn(B, tokens, width, generator=g, dtype=torch.float64)
            mask = params.get("attention_mask")
            if mask is not None and mask.default is inspect.Parameter.empty:  # every token real
                kwargs["attention_mask"] = torch.ones(B, tokens, dtype=torch.long)
    crosses = any("crossattention" in n or "encoder_attn" in n or "cross_attn" in n for n, _ in model.named_modules())
    if "encoder_hidden_states" in params and crosses and not getattr(config, "is_encoder_decoder", False):
        width = (
            getattr(config, "cross_attention_hidden_size", None)
            or getattr(config, "encoder_hidden_size", None)
            or _width(config)
        )
        kwargs["encoder_hidden_states"] = torch.randn(B, tokens - 3, width, generator=g, dtype=torch.float64)


def has_attention_source(model_type: str) -> bool:
    """Whether the modeling code of the type, or of a type its default config holds (a composite's
    towers), computes a softmax over logits (eager or SDPA attention, torch's multi-head
    attention): a type whose tiny model cannot run is refused as having no attention only when
    none of that code has one."""
    import transformers
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    types = {model_type}
    try:
        config = transformers.AutoConfig.for_model(model_type)
        stack = [config]
        while stack:
            c = stack.pop()
            for v in vars(c).values():
                if isinstance(v, transformers.PretrainedConfig):
                    types.add(v.model_type)
                    stack.append(v)
    except Exception:  # a config class that needs arguments: its own code only
        pass
    pattern = re.compile(r"softmax|scaled_dot_product_attention|eager_attention_forward|MultiheadAttention")
    root = os.path.join(os.path.dirname(transformers.__file__), "models")
    for t in sorted(types):
        folder = os.path.join(root, model_type_to_module_name(t))
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.startswith("modeling_") and name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    if pattern.search(f.read()):
                        return True
    return False
