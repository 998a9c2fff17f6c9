"""The inputs of a tiny model's forward.

`forward_inputs` makes the keyword arguments of its forward from its signature and config (ids,
pixels, audio, the states a part of a composite reads); `input_variants` the forwards the
derivation runs (two of other tokens at the same positions, and the layouts a model needs).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re

import torch

from .build import CROSS, SEED

B, T = 2, 9  # batch, tokens


@contextlib.contextmanager
def one_sample():
    """Inputs of one sample (B = 1) while it lasts: a model that packs its batch into one sequence
    and attends within each sample's part (Qwen3-ASR's cu_seqlens) runs one product per sample,
    which no single attention call of the traces reads."""
    global B
    was, B = B, 1
    try:
        yield
    finally:
        B = was


def _sub(config, *names):
    for n in names:
        sub = getattr(config, n, None)
        if sub is not None:
            return sub
    return config


def _int(v):
    return v[0] if isinstance(v, (list, tuple)) else v


LEVEL_SIDE = 4  # the coarsest feature level of a multi-level detector: 4 x 4 tokens


def _pixels(config, g) -> torch.Tensor:
    """An image of the config's size (its vision tower's, its backbone's; [height, width] too: MGP-STR's
    [32, 128]), else 32 pixels, or as many as give a detector's coarsest feature level (its largest
    stride: RT-DETR's AIFI attends over it) LEVEL_SIDE tokens a side."""
    vision = _sub(config, "vision_config", "backbone_config")
    if getattr(vision, "image_size", None) is None:
        # a tower that embeds its pixels in a sub-config (DeepSeek-OCR 2's SAM): its image where larger than
        # 32 pixels (Depth Pro's 8 are a patch of the image its other sub-configs read)
        sub = next((c for c in vars(vision).values() if getattr(c, "image_size", None) is not None), None)
        vision = sub if sub is not None and _int(sub.image_size) > 32 else vision
    strides = getattr(config, "feat_strides", None) or getattr(config, "feature_strides", None)
    coarsest = max(strides) if isinstance(strides, (list, tuple)) and strides else 0
    size = getattr(vision, "image_size", None) or _timm_image(vision) or max(32, LEVEL_SIDE * coarsest)
    square = not (isinstance(size, (list, tuple)) and len(size) == 2)
    height, width = (_int(size),) * 2 if square else size
    channels = getattr(vision, "num_channels", 3)
    return torch.randn(B, channels, height, width, generator=g, dtype=torch.float64)


def _features(config, g, frames: int | None = None) -> torch.Tensor:
    """Audio features [B, width, frames]: as many frames as the positions allow (twice the source
    positions), else one attention window's chunk (Qwen3-ASR pads to whole chunks of 2 n_window)."""
    audio = _audio(config)
    window = getattr(audio, "n_window", None)
    frames = frames or 2 * (getattr(audio, "max_source_positions", None) or (window if isinstance(window, int) else 16))
    return torch.randn(B, _feature_width(config), frames, generator=g, dtype=torch.float64)


def _audio(config):
    """The config that sizes the audio features (a composite's audio config, its speech or semantic
    encoder's)."""
    return _sub(_sub(config, "audio_config"), "asr_config", "semantic_model_config")


def _mels(config) -> int | None:
    audio = _audio(config)
    for name in ("num_mel_bins", "feature_size", "input_feat_size"):
        if isinstance(getattr(audio, name, None), int):
            return getattr(audio, name)
    return None


def _feature_width(config) -> int:
    """The width of one frame of features: the projection's input where the config names it
    (Wav2Vec2-BERT stacks two frames of mel bins), else the mel bins times the frames stacked
    (Fun-ASR's num_stacked_frames), 80 bins where the config names none."""
    audio = _audio(config)
    projected = getattr(audio, "feature_projection_input_dim", None)
    if isinstance(projected, int):
        return projected
    return (_mels(config) or 80) * (getattr(audio, "num_stacked_frames", None) or 1)


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


def _linear_patches(model) -> bool:
    """A vision tower that embeds its patches with a linear map (Molmo 2's: patches flattened by its
    processor, channels x patch x patch each)."""
    return isinstance(getattr(model, "patch_embedding", None), torch.nn.Linear)


def _patch_rows(pixels: torch.Tensor, embedding: torch.nn.Linear, g) -> torch.Tensor:
    """The image's patches as rows [B, patches, pixels a patch], as many as the image holds."""
    side = round((embedding.in_features / pixels.shape[1]) ** 0.5)  # channels x side^2 pixels a patch
    n = (pixels.shape[2] // side) * (pixels.shape[3] // side)
    return torch.randn(pixels.shape[0], n, embedding.in_features, generator=g, dtype=pixels.dtype)


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


def _timm_image(vision) -> int | None:
    """The image size a timm model is built for (model_args' img_size: shrink._tiny_timm's), if any."""
    return (getattr(vision, "model_args", None) or {}).get("img_size")


def _video(config, g) -> torch.Tensor:
    """A clip [B, frames, channels, size, size]: as many frames as the config names (at least
    two tubelets), else 2."""
    vision = _sub(config, "vision_config")
    size = _int(getattr(vision, "crop_size", None) or getattr(vision, "image_size", None) or _timm_image(vision) or 32)
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
    extra = _mel_variants(model, out, seed) + _stacked_variants(model, out, seed)
    extra += _waveform_variants(model, out, seed) + _layout_variants(model, out) + _state_variants(model, out, seed)
    extra += _codebook_variants(model, out) + _pair_variants(out, seed)
    channels = _channel_variants(model, out, seed)
    extra += channels + _encoder_variants(model, [*out[:1], *channels], seed) + _embeds_variants(model, out, seed)
    out += extra + _feature_variants(model, out, seed)
    out += _box_variants(model, out, seed) + _images_per_text_variants(model, out) + _grid_variants(model, out, seed)
    out += _frame_patch_variants(model, out, seed)
    out += _aligned_audio_variants(model, out, seed)
    return out + [_one_example(inputs) for inputs in out[:1]]


def _aligned_audio_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """Last, where the forward takes token ids and audio features and makes audio embeddings of
    its own (get_audio_features): the ids beside features of as many frames as make one audio
    embedding a token (Voxtral Realtime adds them to the token embeddings position by position,
    and refuses ids alone); the frames a token measured by a forward of the audio part."""
    params = inspect.signature(model.forward).parameters
    ids = variants[0].get("input_ids") if variants else None
    method = getattr(model, "get_audio_features", None)
    if ids is None or "input_features" not in params or "input_features" in variants[0] or not callable(method):
        return []
    g = torch.Generator().manual_seed(SEED + 14 + 1000 * seed)
    dtype = next(model.parameters()).dtype
    probe = _features(model.config, g, 8 * ids.shape[1]).to(dtype)
    try:
        with torch.no_grad():
            made = method(input_features=probe).pooler_output
    except Exception:  # an audio part this probe does not fit: no such variant
        return []
    embeds = made.shape[-2] if made.ndim == 3 else made.shape[0] // B
    if not embeds or probe.shape[-1] % embeds:
        return []
    frames = probe.shape[-1] // embeds * ids.shape[1]
    return [dict(variants[0], input_features=_features(model.config, g, frames).to(dtype))]


def _state_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others, where the first variant gave pixels under the name hidden_states (Florence
    2's backbone takes them so): hidden_states as states [B, tokens, width] (SLANet's head reads its
    backbone's)."""
    states = variants[0].get("hidden_states") if variants else None
    if states is None or states.ndim != 4:
        return []
    g = torch.Generator().manual_seed(SEED + 12 + 1000 * seed)
    width = getattr(model.config, "input_dim", None) or _int_field(model.config, "input_size") or _width(model.config)
    return [dict(variants[0], hidden_states=torch.randn(B, T, width, generator=g, dtype=states.dtype))]


def _mel_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """Where the config names no mel bins (Gemma 4's audio encoder, fixed to 128 by its
    subsampling's widths): the [B, frames, mel bins] features again with 128 bins, the other
    common count."""
    if _mels(model.config) is not None or "input_features" not in inspect.signature(model.forward).parameters:
        return []
    return _widened(model, variants, 128, torch.Generator().manual_seed(SEED + 8 + 1000 * seed))


def _stacked_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """Where the model's first linear layer reads a whole multiple of the mel bins (Granite Speech
    5: frames delta-expanded and stacked in pairs by its processor, 4 x mel bins, which no config
    field states): the [B, frames, mel bins] features again, that wide."""
    mels = _mels(model.config)
    first = next((m for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
    if not mels or first is None or first.in_features % mels or first.in_features == _feature_width(model.config):
        return []
    return _widened(model, variants, first.in_features, torch.Generator().manual_seed(SEED + 10 + 1000 * seed))


def _widened(model, variants: list[dict], width: int, g) -> list[dict]:
    """The variants' [B, frames, feature width] features again, width wide (random, from g)."""
    out = []
    for inputs in variants:
        features = inputs.get("input_features")
        if features is not None and features.ndim == 3 and features.shape[-1] == _feature_width(model.config):
            wide = torch.randn(*features.shape[:2], width, generator=g, dtype=features.dtype)
            out.append(_with_mask(dict(inputs, input_features=wide)))
    return out


def _codebook_variants(model, variants: list[dict]) -> list[dict]:
    """After the others, where the config has codebooks: token ids of every codebook, [B x
    codebooks, tokens] (MusicGen Melody's decoder reads one row per codebook), then one token per
    codebook (Moshi's depth decoder: a step per codebook). Where only the decoder's config has
    codebooks (MusicGen's, beside its text encoder), only the decoder's ids."""
    books, names = getattr(model.config, "num_codebooks", None), CODEBOOK_IDS
    decoder = getattr(model.config, "decoder", None)
    if not isinstance(books, int) and isinstance(getattr(decoder, "num_codebooks", None), int):
        books, names = decoder.num_codebooks, ("decoder_input_ids",)
    if not isinstance(books, int) or books < 2:
        return []
    out = []
    for inputs in variants:
        rows = {k: v.repeat_interleave(books, 0) for k, v in inputs.items() if k in names and v.ndim == 2}
        if rows:
            out.append(dict(inputs, **rows))
    for inputs in variants:
        ids = inputs.get("input_ids")
        if ids is not None and ids.ndim == 2 and ids.shape[1] > books:  # with the states beside them
            n = ids.shape[1]
            out.append({k: v[:, :books] if _along(v, n) else v for k, v in inputs.items()})
    return out


def _channel_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others, where the config has codebooks (or audio channels: Dia's decoder): one
    of the token ids 3-d, a token per codebook at each step, as [B, tokens, codebooks] (Dia),
    [B, tokens, 1 + codebooks] (Kyutai's text stream beside its audio codebooks), [B, codebooks,
    tokens]."""
    books = _books(model.config)
    ids = {k: v for k, v in (variants[0].items() if variants else ()) if k in CODEBOOK_IDS and v.ndim == 2}
    if not books or not ids:
        return []
    g = torch.Generator().manual_seed(SEED + 13 + 1000 * seed)
    high = max(4, min(_vocab(model.config), 100))
    out = []
    for name, v in ids.items():
        n = v.shape[1]
        for shape in ((B, n, books), (B, n, 1 + books), (B, books, n)):
            out.append(dict(variants[0], **{name: torch.randint(3, high, shape, generator=g)}))
    return out


def _books(config) -> int | None:
    """The codebooks of a config or its decoder's: num_codebooks, else the audio channels of a
    config with no image (num_channels: Dia's 9 codebooks)."""
    for c in (config, getattr(config, "decoder_config", None)):
        books = _int_field(c, "num_codebooks") or _int_field(c, "n_codes_total")  # Bark's fine model: n_codes_total
        if books is None and not any(hasattr(c, k) for k in ("image_size", "patch_size", "vision_config")):
            books = _int_field(c, "num_channels")
        if books and books >= 2:
            return books
    return None


def _along(v, tokens: int) -> bool:
    return isinstance(v, torch.Tensor) and v.ndim >= 2 and v.shape[1] == tokens


CODEBOOK_IDS = ("input_ids", "decoder_input_ids")


def _encoder_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others: encoder states for a decoder whose forward takes them and holds no module
    named a cross-attention (T5Gemma 2's decoder: merged with its own states in one attention), or
    of an encoder-decoder's (Dia's decoder of 3-d ids): each of variants with them."""
    params = inspect.signature(model.forward).parameters
    if not variants or "encoder_hidden_states" not in params or "encoder_hidden_states" in variants[0]:
        return []
    g = torch.Generator().manual_seed(SEED + 11 + 1000 * seed)
    states = _encoder_states(model.config, g, T).to(next(model.parameters()).dtype)
    return [dict(inputs, encoder_hidden_states=states) for inputs in variants]


def _embeds_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others: states [B, tokens, width] as inputs_embeds instead of the token ids, for
    a forward that takes both (SeamlessM4T's text-to-unit model reads the text decoder's states)."""
    params = inspect.signature(model.forward).parameters
    ids = variants[0].get("input_ids") if variants else None
    if ids is None or ids.ndim != 2 or "inputs_embeds" not in params:
        return []
    g = torch.Generator().manual_seed(SEED + 12 + 1000 * seed)
    dtype = next(model.parameters()).dtype
    states = torch.randn(*ids.shape, _width(model.config), generator=g, dtype=dtype)
    inputs = {k: v for k, v in variants[0].items() if k != "input_ids"}
    return [dict(inputs, inputs_embeds=states, **_projected_embeds(model, params, ids, g, dtype))]


def _projected_embeds(model, params, ids: torch.Tensor, g, dtype) -> dict:
    """Other states the forward takes as *_embeds and projects with a linear map of the same stem
    (BLT's local decoder: patch_embeds, the global transformer's, through patch_embedding_projection):
    [B, a state per PATCH_BYTES tokens, the map's input width]."""
    out = {}
    for name in params:
        stem = name.removesuffix("_embeds")
        if name == "inputs_embeds" or stem == name:
            continue
        linear = getattr(model, f"{stem}_embedding_projection", None)
        if isinstance(linear, torch.nn.Linear):
            n = -(-ids.shape[1] // PATCH_BYTES)
            out[name] = torch.randn(ids.shape[0], n, linear.in_features, generator=g, dtype=dtype)
    return out


def _feature_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others: audio features beside the first variant's inputs, where the forward takes
    them and no variant gave them (CLVP's conditioning encoder reads
    the text and a mel spectrogram)."""
    params = inspect.signature(model.forward).parameters
    if not variants or "input_features" not in params or "input_features" in variants[0]:
        return []
    g = torch.Generator().manual_seed(SEED + 12 + 1000 * seed)
    features = _features(model.config, g).to(next(model.parameters()).dtype)
    return [dict(variants[0], input_features=features)]


def _box_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others: a box of each token [B, tokens, (x0, y0, x1, y1)], normalised to the page,
    where the forward takes them (UDOP places its image's patches by the boxes of the text)."""
    params = inspect.signature(model.forward).parameters
    if not variants or "bbox" not in params or "bbox" in variants[0] or "input_ids" not in variants[0]:
        return []
    g = torch.Generator().manual_seed(SEED + 13 + 1000 * seed)
    dtype = next(model.parameters()).dtype
    corner = 0.5 * torch.rand(*variants[0]["input_ids"].shape, 2, generator=g, dtype=dtype)
    size = 0.5 * torch.rand(corner.shape, generator=g, dtype=dtype)
    return [dict(variants[0], bbox=torch.cat([corner, corner + size], -1))]


def _images_per_text_variants(model, variants: list[dict]) -> list[dict]:
    """After the others: images per text [B, images, channels, height, width] and the images each
    token attends to (one), where the forward takes such a mask (IDEFICS; FLAVA's, a mask over
    patches, runs before)."""
    params = inspect.signature(model.forward).parameters
    first = variants[0] if variants else {}
    pixels, ids = first.get("pixel_values"), first.get("input_ids")
    if "image_attention_mask" not in params or pixels is None or pixels.ndim != 4 or ids is None:
        return []
    mask = torch.ones(*ids.shape, 1, dtype=torch.long)
    return [dict(first, pixel_values=pixels[:, None], image_attention_mask=mask)]


def _grid_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others, where the forward requires an image_grid_thw that no variant gave: one image
    of 2 x 2 merge windows, as Qwen2-VL's flattened patches with its grid in patches, then as squares of
    a merge window's pixels, channels last [tokens, merge x patch, merge x patch, channels], with its
    grid in merged tokens (Inkling 2's vision tower)."""
    p = inspect.signature(model.forward).parameters.get("image_grid_thw")
    first = variants[0] if variants else {}
    if p is None or p.default is not inspect.Parameter.empty or "image_grid_thw" in first or "input_ids" in first:
        return []
    config, g = model.config, torch.Generator().manual_seed(SEED + 14 + 1000 * seed)
    patches = _patches(config, g)
    merge, patch = _merge(config), _int(getattr(config, "patch_size", None) or 14)
    channels = getattr(config, "num_channels", None) or 3
    squares = torch.randn(4, merge * patch, merge * patch, channels, generator=g, dtype=torch.float64)
    return [
        dict(first, pixel_values=patches["hidden_states"], image_grid_thw=patches["grid_thw"]),
        dict(first, pixel_values=squares, image_grid_thw=torch.tensor([[1, 2, 2]])),
    ]


def _frame_patch_variants(model, variants: list[dict], seed: int) -> list[dict]:
    """After the others, where the config has a temporal patch and the first variant an image: its
    patches, each its frames channels last [patches, temporal patch, patch, patch, channels] (Inkling's
    vision tower folds them to depth)."""
    config = model.config
    pixels = variants[0].get("pixel_values") if variants else None
    temporal, patch = _int_field(config, "temporal_patch_size"), _int(getattr(config, "patch_size", None))
    if pixels is None or pixels.ndim != 4 or not temporal or not isinstance(patch, int):
        return []
    g = torch.Generator().manual_seed(SEED + 15 + 1000 * seed)
    shape = (FLAT_SIDE, temporal, patch, patch, pixels.shape[1])
    return [dict(variants[0], pixel_values=torch.randn(*shape, generator=g, dtype=pixels.dtype))]


def _pair_variants(variants: list[dict], seed: int) -> list[dict]:
    """After the others: images as pairs [B, 2, channels, height, width] (keypoint matchers:
    LightGlue, SuperGlue, EfficientLoFTR), two images each."""
    g = torch.Generator().manual_seed(SEED + 9 + 1000 * seed)
    pixels = variants[0].get("pixel_values") if variants else None
    if pixels is None or pixels.ndim != 4:
        return []
    return [dict(variants[0], pixel_values=torch.randn(B, 2, *pixels.shape[1:], generator=g, dtype=pixels.dtype))]


def _one_example(inputs: dict) -> dict:
    """inputs of a batch of one, last: a forward that runs on no more (TVP views its column
    positions with the batch size)."""
    return {k: v[:1] if isinstance(v, torch.Tensor) and v.ndim and v.shape[0] == B else v for k, v in inputs.items()}


def _with_mask(inputs: dict) -> dict:
    """input_features_mask, where given, over the frames of input_features [B, frames, features]."""
    if "input_features_mask" in inputs:
        inputs["input_features_mask"] = _every_frame(inputs["input_features"], axis=1)
    return inputs


def _every_frame(features: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """A mask of every frame real, over the frames' axis of features (the last: [B, ..., frames])."""
    return torch.ones(features.shape[0], features.shape[axis], dtype=torch.long)


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

    def ids(n=tokens):
        return _ids(config, g, n)

    makers = {
        "input_ids": ids,
        "pixel_values": lambda: _pixels(config, g),
        "input_values": lambda: torch.randn(B, _samples(config, tokens), generator=g, dtype=torch.float64),
        "input_features": lambda: _features(config, g),
        "audio_mel": lambda: _features(config, g).transpose(1, 2).contiguous(),  # Gemma 3n: [B, frames, mel bins]
    }
    if "grid_thw" in params:  # Qwen2-VL's vision tower and its kin: flattened patches and their grid
        patches = _patches(config, g)
        if "hidden_states" not in params and "pixel_values" in params:  # the patches' name in newer towers
            patches["pixel_values"] = patches.pop("hidden_states")
        if "merge_sizes" in params:  # Video-LLaMA 3: each image's spatial merge
            patches["merge_sizes"] = torch.tensor([_merge(config)])
        return patches
    main = getattr(model, "main_input_name", "input_ids")
    if isinstance(main, (list, tuple)):  # OneFormer's pixels and task tokens: the first one made here
        main = next((k for k in main if k in makers), "input_ids")
    if main not in params:
        main = next((k for k in makers if k in params), main)
    first = next((k for k, p in params.items() if p.default is p.empty and p.kind in NAMED), None)
    if (
        main not in params
        and first
        and (main == "pixel_values" or "image" in first)
        and _pixels_fit(config, params[first])
    ):
        # pixels under the forward's own name (Florence 2's vision backbone: hidden_states; BridgeTower's: image)
        makers[first], main = makers["pixel_values"], first
    kwargs = {main: makers[main]()} if main in makers and main in params else {}
    for name, make in makers.items():  # the other inputs it requires (X-Codec 2: a waveform and its features)
        if name in params and name not in kwargs and params[name].default is inspect.Parameter.empty:
            kwargs[name] = make()
    if every:
        if (
            "input_ids" in params
            and "input_ids" not in kwargs
            and getattr(_sub(config, "text_config"), "vocab_size", None)
        ):
            kwargs["input_ids"] = ids()
        has_vision = any(hasattr(config, k) for k in ("vision_config", "image_size", "backbone_config"))
        if "pixel_values" in params and "pixel_values" not in kwargs and has_vision:
            kwargs["pixel_values"] = makers["pixel_values"]()
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        kwargs["decoder_input_ids"] = _ids(_decoder_config(config), g, tokens - 2)
    _by_signature(model, params, kwargs, g, tokens)
    return kwargs


NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)  # not *args, **kwargs


def _decoder_config(config):
    """The decoder's own config where it has one (MusicGen's decoder over 2048 codes beside a T5
    text encoder of 32128 tokens), else the config."""
    from transformers import PretrainedConfig

    decoder = getattr(config, "decoder", None)
    return decoder if isinstance(decoder, PretrainedConfig) and getattr(decoder, "vocab_size", None) else config


def _ids(config, g, n: int) -> torch.Tensor:
    """[B, n] token ids of the vocabulary (its first 100), past the special ones."""
    return torch.randint(3, max(4, min(_vocab(config), 100)), (B, n), generator=g)


def _samples(config, tokens: int) -> int:
    """A waveform's length: tokens frames of a model that states its samples per frame (Mimi's
    1920 samples a frame, where 1600 samples would give its transformers one frame), else 1600."""
    unit = _samples_per_frame(config)
    if not unit:
        return 1600
    return min(max(tokens * unit, math.ceil(1600 / unit) * unit), 64_000 // unit * unit)


def _samples_per_frame(config) -> int | None:
    """Samples a frame: at the frame rate (Mimi), the samples per token (Muse Spark's audio, whose
    forward wants whole tokens) or the hop length (PE Audio's DAC codec), where the config has them."""
    rate, frames = getattr(config, "sampling_rate", None), getattr(config, "frame_rate", None)
    if isinstance(rate, (int, float)) and isinstance(frames, (int, float)) and frames > 0:
        return math.ceil(rate / frames)
    for c in (config, getattr(config, "dac_config", None)):
        for name in ("samples_per_token", "hop_length"):
            if isinstance(getattr(c, name, None), int):
                return getattr(c, name)
    return None


def _int_field(config, name: str) -> int | None:
    v = getattr(config, name, None)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _series(config, params, g) -> dict:
    """A time series model's inputs: past values [B, context, channels] (PatchTST, PatchTSMixer),
    [B, steps] of a few patches (TimesFM, with no padding and the first frequency), or, for the
    forecasting encoder-decoders (Time Series Transformer, Informer, Autoformer), the context and
    its lags' history with time features and an all-observed mask, and the future window that
    their decoder reads."""

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    if "past_time_features" in params:
        steps = config.context_length + max(config.lags_sequence)
        size, features, horizon = config.input_size, config.num_time_features, config.prediction_length
        values = (B, steps) if size == 1 else (B, steps, size)
        future = (B, horizon) if size == 1 else (B, horizon, size)
        return dict(
            past_values=randn(*values),
            past_time_features=randn(B, steps, features),
            past_observed_mask=torch.ones(values, dtype=torch.float64),
            future_values=randn(*future),
            future_time_features=randn(B, horizon, features),
        )
    channels = getattr(config, "num_input_channels", None)
    if isinstance(channels, int):
        return dict(past_values=randn(B, config.context_length, channels))
    steps = 4 * config.patch_length
    out = dict(past_values=randn(B, steps))
    if "past_values_padding" in params:
        out["past_values_padding"] = torch.zeros(B, steps, dtype=torch.long)
    if "freq" in params:
        out["freq"] = torch.zeros(B, 1, dtype=torch.long)
    return out


BOXES = 5  # LXMERT's image regions
PATCH_BYTES = 3  # BLT's bytes a patch
UNITS_PER_TOKEN = 2  # characters a token spells (SeamlessM4T v2's char_count_per_id)
VOCAB_FLOOR = 100  # ids drawn below this where the config names no vocabulary


def _trajectory(config, g, tokens: int) -> dict:
    """An offline-RL trajectory of tokens steps: states, actions, returns to go and timesteps."""

    def floats(*shape):
        return torch.randn(B, tokens, *shape, generator=g, dtype=torch.float64)

    return {
        "states": floats(config.state_dim),
        "actions": floats(config.act_dim),
        "returns_to_go": floats(1),
        "timesteps": torch.arange(tokens).expand(B, -1),
        "attention_mask": torch.ones(B, tokens, dtype=torch.long),
    }


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
        if "input_ids" in kwargs and hasattr(config, "prompt_layers"):  # X-CLIP's texts: one batch for every
            ids = kwargs["input_ids"]  # video, its prompt generator's queries (B of them are too few; TVP pairs them)
            kwargs["input_ids"] = torch.cat([ids, torch.randint(3, int(ids.max()) + 1, ids.shape, generator=g)])
    if "input_features" in kwargs and getattr(config, "input_feat_per_channel", None):  # Speech2Text: [B, T, features]
        feats = config.input_feat_per_channel * getattr(config, "input_channels", 1)
        kwargs["input_features"] = torch.randn(B, 4 * tokens, feats, generator=g, dtype=torch.float64)
    if "input_values" in kwargs and "decoder_input_values" in params:  # SpeechT5 without pre-nets: hidden states
        kwargs["input_values"] = torch.randn(B, tokens, _width(config), generator=g, dtype=torch.float64)
        kwargs["decoder_input_values"] = torch.randn(B, tokens - 2, _width(config), generator=g, dtype=torch.float64)
    if "aspect_ratio_ids" in params and "pixel_values" in kwargs:  # Mllama's vision tower: images of tiles
        kwargs.update(_tiles(config, kwargs["pixel_values"], g))
    if "patch_ids" in params and "num_patches" in params and "input_ids" in kwargs:
        # BLT's local encoder: bytes pooled into patches, PATCH_BYTES bytes each
        n = kwargs["input_ids"].shape[1]
        kwargs["patch_ids"] = (torch.arange(n) // PATCH_BYTES).expand(kwargs["input_ids"].shape[0], -1)
        kwargs["num_patches"] = -(-n // PATCH_BYTES)
    if "pixel_values" in kwargs and kwargs["pixel_values"].ndim == 4 and _linear_patches(model):
        kwargs["pixel_values"] = _patch_rows(kwargs["pixel_values"], model.patch_embedding, g)
    if "patch_lengths" in params and "input_ids" in kwargs:
        # BLT: bytes in patches of PATCH_BYTES (its tiny entropy model, random, would start a patch at
        # every byte, and each patch's query would see one byte)
        n = kwargs["input_ids"].shape[1]
        lengths = [PATCH_BYTES] * (n // PATCH_BYTES) + ([n % PATCH_BYTES] if n % PATCH_BYTES else [])
        kwargs["patch_lengths"] = torch.tensor(lengths).expand(kwargs["input_ids"].shape[0], -1)
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
    if "past_values" in params and not set(kwargs) - {"use_cache"}:  # a time series model
        kwargs.update(_series(config, params, g))
    if not kwargs and "latents" in params:  # a codec's decoder (Mimi): continuous latents [B, width, frames]
        kwargs["latents"] = torch.randn(B, _width(config), tokens, generator=g, dtype=torch.float64)
    if not kwargs and "states" in params and "actions" in params:  # a trajectory (Decision Transformer)
        kwargs.update(_trajectory(config, g, tokens))
    if "visual_feats" in params and "visual_feats" not in kwargs:  # LXMERT: region features and boxes
        kwargs["visual_feats"] = torch.randn(B, BOXES, config.visual_feat_dim, generator=g, dtype=torch.float64)
        kwargs["visual_pos"] = torch.rand(B, BOXES, config.visual_pos_dim, generator=g, dtype=torch.float64)
    if "last_hidden_state" in params and "input_ids" in kwargs:  # Moshi's depth decoder: the main decoder's states
        width = getattr(config, "input_size", None) or _width(config)
        kwargs["last_hidden_state"] = torch.randn(B, tokens, width, generator=g, dtype=torch.float64)
    for name, p in params.items():  # Bark's fine model: the codebook it predicts, the first after those given
        if name.endswith("codebook_idx") and p.default is inspect.Parameter.empty:
            kwargs[name] = _int_field(config, "n_codes_given") or 1
    sizes = params.get("image_sizes")
    if sizes is not None and sizes.default is inspect.Parameter.empty and "pixel_values" in kwargs:
        # required (Emu3's VQ-VAE crops its tokens to them): each image's (height, width)
        kwargs["image_sizes"] = torch.tensor([list(kwargs["pixel_values"].shape[-2:])] * B)
    if "input_ids" in kwargs and _reads_unmade(model, "t_cond"):  # Voxtral Realtime's text model: the time
        kwargs["t_cond"] = torch.randn(1, _width(config), generator=g, dtype=torch.float64)  # its composite embeds
    if "lang_ids" in params and "input_ids" in kwargs:  # X-MOD: each sequence's language adapter, the first
        kwargs["lang_ids"] = torch.zeros(B, dtype=torch.long)
    if "image_embeds_position_mask" in params and "pixel_values" in kwargs and "input_ids" in kwargs:
        kwargs.update(_image_places(kwargs["input_ids"], getattr(config, "latent_query_num", None) or 1))
    if "prompt_pixel_values" in params and "pixel_values" in kwargs:  # SegGPT: a prompt and the image, stacked
        kwargs.update(_stacked_with_prompt(config, g))
    for name, p in params.items():
        if name.endswith("_input_ids") and name not in kwargs and (tower := _ids_tower(model, name)) is not None:
            kwargs.update(_tower_ids(name, tower, params, g, tokens))
        elif name.endswith("_input_ids") and name not in kwargs and p.default is inspect.Parameter.empty:
            # OmDet-Turbo's classes and task prompts: text of the text config's vocabulary, and their
            # structure where required (classes_structure: classes a task, one)
            kwargs.update(_tower_ids(name, _sub(config, "text_config"), params, g, tokens))
            structure = name.removesuffix("input_ids") + "structure"
            if structure in params and params[structure].default is inspect.Parameter.empty:
                kwargs[structure] = torch.ones(B, dtype=torch.long)
    for name in params:  # SeamlessM4T v2's text-to-unit model: each token spelled in two characters
        unit = name.removesuffix("_count_per_id")
        if unit != name and f"{unit}_input_ids" in params and "input_ids" in kwargs:
            kwargs[name] = torch.full((B, tokens), UNITS_PER_TOKEN)
            vocab = _int_field(config, f"{unit}_vocab_size") or VOCAB_FLOOR
            kwargs[f"{unit}_input_ids"] = torch.randint(
                3, max(4, min(vocab, 100)), (B, UNITS_PER_TOKEN * tokens), generator=g
            )
    delimiters = getattr(model, "special_tokens", None)
    if isinstance(delimiters, torch.Tensor) and "input_ids" in kwargs:
        kwargs["input_ids"] = _phrases(kwargs["input_ids"], delimiters, vocab=_vocab(config))
    if "input_points" in params and "pixel_values" in kwargs:  # SAM: one prompt of two points per image
        size = kwargs["pixel_values"].shape[-1]
        kwargs["input_points"] = torch.rand(B, 1, 2, 2, generator=g, dtype=torch.float64) * size
    elif "input_boxes" in params and "pixel_values" in kwargs:  # SAM 3: a box prompt, normalised (cx, cy, w, h)
        kwargs["input_boxes"] = 0.25 + 0.5 * torch.rand(B, 1, 4, generator=g, dtype=torch.float64)
    for name, p in params.items():  # OneFormer's task_inputs: a task's tokens, task_seq_len of them
        length = getattr(config, name.removesuffix("_inputs") + "_seq_len", None)
        if name.endswith("_inputs") and p.default is inspect.Parameter.empty and isinstance(length, int):
            kwargs.setdefault(name, _ids(config, g, length))
    hop = getattr(config, "encoder_hop_length", None) or getattr(config, "hop_length", None)
    if "input_values" in kwargs and "input_features" in kwargs and isinstance(hop, int):
        # a codec that reads both (X-Codec 2): a frame of features per code of the waveform
        kwargs["input_features"] = _features(config, g, kwargs["input_values"].shape[-1] // hop)
    channels = getattr(_audio(config), "patch_embed_input_channels", None)
    if "input_features" in kwargs and isinstance(channels, int) and kwargs["input_features"].ndim == 3:
        # CLAP: spectrograms as images, [B, channels (crops), frames, mel bins]
        frames = kwargs["input_features"].transpose(1, 2)[:, None]
        kwargs["input_features"] = frames.expand(-1, channels, -1, -1).contiguous()
    if "audio_mel_mask" in params and "audio_mel" in kwargs:  # Gemma 3n: True where a frame is padding
        kwargs["audio_mel_mask"] = torch.zeros(kwargs["audio_mel"].shape[:2], dtype=torch.bool)
    hop = _int_field(_audio(config), "hop_length")
    if "chunk_sample_lengths" in params and "input_features" in kwargs and hop:  # dots.note: each chunk's samples
        kwargs["chunk_sample_lengths"] = torch.full((B,), kwargs["input_features"].shape[-1] * hop)
    if "feature_lens" in params and "input_features" in kwargs:  # Qwen2.5-Omni's audio: one sample's frames, packed
        kwargs["input_features"] = kwargs["input_features"][0]
        kwargs["feature_lens"] = torch.tensor([kwargs["input_features"].shape[-1]])
    if "input_features_mask" in params and "input_features" in kwargs:  # Qwen3-ASR, Audio Flamingo 3
        kwargs["input_features_mask"] = _every_frame(kwargs["input_features"])
    if {"quantized_code", "condition_vector", "speaker_embedding", "time_step"} <= set(params) and not kwargs:
        kwargs.update(_dit_inputs(config, g))
    for name in ("hidden_states", "query_embeds", "inputs_embeds", "context"):
        p = params.get(name)
        if p is not None and p.default is inspect.Parameter.empty and not kwargs:
            # a tower that reads its states as they come from another (FLAVA's multimodal encoder, BLT's
            # global transformer), learned queries (BLIP-2's Q-Former), a resampler's context (Idefics2's
            # perceiver), or a conformer's features (Phi-4's audio encoder: input_size features a frame,
            # time_reduction frames a token)
            width = getattr(config, "input_dim", None) or _int_field(config, "input_size") or _width(config)
            frames = tokens * (_int_field(config, "time_reduction") or 1)
            kwargs[name] = torch.randn(B, frames, width, generator=g, dtype=torch.float64)
    p = params.get("patch_embeds")
    if p is not None and p.default is inspect.Parameter.empty and not kwargs:
        # a tower fed another's patch embeddings (Unlimited-OCR's CLIP encoder, its SAM's): [B, width, grid, grid]
        side = _patch_grid(config) or FLAT_SIDE
        kwargs["patch_embeds"] = torch.randn(B, _width(config), side, side, generator=g, dtype=torch.float64)
    p = params.get("num_patches")
    states = next((kwargs[n] for n in ("inputs_embeds", "hidden_states") if n in kwargs), None)
    if p is not None and p.default is inspect.Parameter.empty and states is not None and "num_patches" not in kwargs:
        # the image's patches first among the states, then its queries (DeepSeek-OCR 2's encoder: open over the
        # patches, causal over the queries)
        kwargs["num_patches"] = states.shape[1] // 2
    mask = params.get("attention_mask")
    if mask is not None and mask.default is inspect.Parameter.empty and "attention_mask" not in kwargs and kwargs:
        # required (Idefics2's perceiver: over its context): every token real
        first = next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
        if first is not None and first.ndim >= 2:
            kwargs["attention_mask"] = torch.ones(first.shape[:2], dtype=torch.long)
    for name, p in params.items():  # required, and may be None (Phi-4's audio encoder's mask): None
        required = p.default is inspect.Parameter.empty and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        if name not in kwargs and required and "None" in str(p.annotation):
            kwargs[name] = None
    kwargs.update(_states_by_name(config, params, kwargs, g, tokens))
    crosses = any(CROSS.search(n) for n, _ in model.named_modules())
    if (
        "encoder_hidden_states" in params
        and kwargs.get("encoder_hidden_states") is None
        and crosses
        and not getattr(config, "is_encoder_decoder", False)
    ):
        kwargs["encoder_hidden_states"] = _encoder_states(config, g, tokens)


POOL = 4  # patches pooled into one token


def _dit_inputs(config, g) -> dict:
    """A code-to-mel DiT's (Qwen2.5-Omni's talker): noised mel frames, `repeats` a code, a reference
    mel, a speaker embedding per frame, the codes, and one time step (no classifier-free guidance,
    which would double the batch)."""
    codes = 4
    frames = codes * config.repeats
    return dict(
        hidden_states=torch.randn(B, frames, config.mel_dim, generator=g, dtype=torch.float64),
        condition_vector=torch.randn(B, 6, config.mel_dim, generator=g, dtype=torch.float64),
        speaker_embedding=torch.randn(B, frames, config.enc_emb_dim, generator=g, dtype=torch.float64),
        quantized_code=torch.randint(0, config.num_embeds, (B, codes), generator=g),
        time_step=torch.full((B,), 0.5, dtype=torch.float64),
        apply_cfg=False,
    )


def _layers_concatenated(config, name: str) -> int:
    """How many layers' states a states input concatenates: a draft model's context, its target's
    at target_layer_ids (DFlash's); an adapter's image features, the ViT's at vision_feature_layer
    (Molmo 2's); one otherwise."""
    for prefix, field in (("context", "target_layer_ids"), ("image_features", "vision_feature_layer")):
        layers = getattr(config, field, None)
        if name.startswith(prefix) and isinstance(layers, (list, tuple)):
            return len(layers)
    return 1


def _reads_unmade(model, name: str) -> bool:
    """Whether some module's forward takes name, which the model's own forward neither takes nor
    makes (its layers' conditioning that a composite computes and passes on through **kwargs)."""
    root = type(model).forward
    if name in inspect.signature(root).parameters or name in inspect.getsource(root):
        return False
    return any(name in inspect.signature(m.forward).parameters for m in model.modules() if m is not model)


def _patch_grid(config) -> int:
    """Patches along a side of the config's image (image_size over patch_size), 0 where it states none."""
    image, patch = _int(getattr(config, "image_size", None)), _int(getattr(config, "patch_size", None))
    return image // patch if isinstance(image, int) and isinstance(patch, int) and patch else 0


IMAGE_FIELDS = re.compile(r"channel|image|patch|pixel")


def _pixels_fit(config, p: inspect.Parameter) -> bool:
    """Whether a forward's first input may be pixels under another name: not an object of another
    class (SAM 2's video model's inference session), not states of a config that names nothing of
    images (SAM 3's mask decoder's decoder_queries)."""
    if p.annotation is not p.empty and "Tensor" not in str(p.annotation):
        return False
    vision = _sub(config, "vision_config", "backbone_config")
    return not STATES.search(p.name) or any(IMAGE_FIELDS.search(k) for k in vision.to_dict())


STATES = re.compile(r"(^|_)(features|states|encoding|embeds|embeddings|queries)$|^inputs$")  # inputs: Perceiver's


def _states_by_name(config, params, kwargs: dict, g, tokens: int) -> dict:
    """A part's inputs that another part of its composite makes (SAM 3's DETR encoder and decoder,
    its mask decoder): each required tensor named as states, [B, tokens, width], or, annotated a
    list, feature maps [B, width, side, side] of side x side = tokens (one level); where one is
    required, the optional ones too, as the composite passes them (the levels' position
    embeddings, which the forward zips with the levels; the prompt the mask decoder attends to).
    Only for a forward given no tensor otherwise (no ids, pixels or states made by the rules above)."""
    if any(isinstance(v, torch.Tensor) for v in kwargs.values()):
        return {}
    width, side = _width(config), math.isqrt(tokens)

    def tensor_param(p) -> bool:
        return "Tensor" in str(p.annotation) and p.kind in NAMED

    def maps():
        return [torch.randn(B, width, side, side, generator=g, dtype=torch.float64)]

    def listed(p) -> bool:
        return str(p.annotation).startswith(("list", "tuple"))

    out = {}
    required = {n: p for n, p in params.items() if p.default is inspect.Parameter.empty and n not in kwargs}
    for name, p in required.items():
        if tensor_param(p) and STATES.search(name):
            wide = width * _layers_concatenated(config, name)
            out[name] = maps() if listed(p) else torch.randn(B, tokens, wide, generator=g, dtype=torch.float64)
    for name, p in params.items() if out else ():
        if name not in kwargs and name not in out and tensor_param(p) and STATES.search(name):
            out[name] = maps() if listed(p) else torch.randn(B, tokens, width, generator=g, dtype=torch.float64)
    if "pooled_patches_idx" in required and "image_features" in out:  # Molmo 2's adapter: POOL patches a token
        rows = out["image_features"].shape[0] * out["image_features"].shape[1] // POOL * POOL
        out["pooled_patches_idx"] = torch.arange(rows).reshape(-1, POOL)
    if len(out) > 1 and any(n.startswith("context") for n in out) and "attention_mask" in params:
        # a draft model's keys: its context's tokens and its own (DFlash's mask spans both; made without
        # one, it spans its own alone)
        out["attention_mask"] = torch.ones(B, sum(t.shape[1] for t in out.values()), dtype=torch.long)
    return out


def _encoder_states(config, g, tokens: int) -> torch.Tensor:
    """The states of an encoder that a decoder's cross-attention reads: [B, tokens - 3, width]."""
    width = (
        getattr(config, "cross_attention_hidden_size", None)
        or getattr(config, "cross_hidden_size", None)
        or getattr(config, "encoder_hidden_size", None)
        or _width(config)
    )
    return torch.randn(B, tokens - 3, width, generator=g, dtype=torch.float64)


def _stacked_with_prompt(config, g) -> dict:
    """SegGPT's inputs: an image, a prompt image and its mask, each the upper half of the image
    size the model sees (it stacks the prompt over the image by height)."""
    height, width = (
        (config.image_size * 2)[:2] if isinstance(config.image_size, (list, tuple)) else [config.image_size] * 2
    )
    channels = getattr(config, "num_channels", None) or 3
    names = ("pixel_values", "prompt_pixel_values", "prompt_masks")
    return {n: torch.randn(B, channels, height // 2, width, generator=g, dtype=torch.float64) for n in names}


def _ids_tower(model, name: str):
    """The config of the tower whose token ids a forward's <tower>_input_ids are (Evolla's
    protein_input_ids: its protein_encoder_config's vocabulary), where the model has that tower."""
    tower = name.removesuffix("_input_ids")
    if not any(n.startswith(tower) for n, _ in model.named_children()):
        return None
    configs = [v for k, v in vars(model.config).items() if k.startswith(tower) and k.endswith("_config")]
    return next((c for c in configs if _int_field(c, "vocab_size") or _int_field(c, "codebook_size")), None)


def _tower_ids(name: str, config, params, g, tokens: int) -> dict:
    """A tower's token ids, and its attention mask of every token real where the forward takes one;
    a tower of codebooks and no vocabulary (Inkling's audio: a token of each mel bin, quantised) reads
    [B, tokens, codebooks] ids of a codebook's size."""
    books, size = _int_field(config, "num_codebooks"), _int_field(config, "codebook_size")
    vocab = _int_field(config, "vocab_size") or size or VOCAB_FLOOR
    shape = (B, tokens, books) if books and size and not _int_field(config, "vocab_size") else (B, tokens)
    ids = torch.randint(3, max(4, min(vocab, 100)), shape, generator=g)
    mask = name.removesuffix("input_ids") + "attention_mask"
    return {name: ids, **({mask: torch.ones(B, tokens, dtype=torch.long)} if mask in params else {})}


def _image_places(ids: torch.Tensor, n: int) -> dict:
    """Kosmos-2's text with room for its n image embeddings after the first token, and the mask of
    their places."""
    room = ids[:, :1].expand(-1, n)
    mask = torch.zeros(ids.shape[0], ids.shape[1] + n, dtype=torch.long)
    mask[:, 1 : 1 + n] = 1
    return {"input_ids": torch.cat([ids[:, :1], room, ids[:, 1:]], 1), "image_embeds_position_mask": mask}


def _phrases(ids: torch.Tensor, delimiters: torch.Tensor, vocab: int) -> torch.Tensor:
    """ids with a delimiter the model splits its text at (Grounding DINO's [CLS], [SEP], "." and
    "?": each phrase attends within itself) first, in the middle and next to last: two phrases."""
    fit = [int(d) for d in delimiters.flatten() if int(d) < vocab]
    if not fit:
        return ids
    ids = ids.clone()
    n = ids.shape[-1]
    for i, at in enumerate((0, n // 2, n - 2)):
        ids[:, at] = fit[min(i, len(fit) - 1)]
    return ids


def _vocab(config) -> int:
    return getattr(_sub(config, "text_config"), "vocab_size", None) or getattr(config, "vocab_size", None) or 100
