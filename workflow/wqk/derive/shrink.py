"""A tiny config of a model type: the structure of a real (or default) config, its sizes shrunk.

Kept: every flag and choice (layout flags, multi-query, QK-norm, rope type and partial rotary,
sliding window, tied layers, layer types), so the tiny model runs the same code paths as the
checkpoint. Shrunk: widths, depths, vocabularies, experts, image sizes. Head counts are set to
distinct values per config field (HEAD_COUNTS), so that the head count seen in the forward names
the one field that sets it. Per-type exceptions are in HINTS (a few keys each, with the reason).
"""

from __future__ import annotations

import copy
import re

WIDTH = 96  # divisible by every head count below and by 32 (GroupNorm groups); over 64 (heads = width // 64)
HEAD_DIM = 16  # 6 heads of 16: the width
HEAD_COUNTS = (6, 4, 3, 2, 12, 8)  # query-head counts handed out to the head fields, in order
KV_HEADS = {6: 2, 4: 2, 3: 1, 2: 1, 12: 3, 8: 2}  # a key-head count that divides each (and differs from it)
LAYERS = 2
QUERIES = 8  # learned object queries (DETR's 100, Grounding DINO's 900): fewer than a tiny image's anchors
VOCAB = 128

WIDTH_KEYS = re.compile(  # cross_: the width a cross-attention reads (Dia's decoder: cross_hidden_size)
    r"^(cross_hidden_size|hidden_size|d_model|n_embd|n_embed|embed_dim|dim|hidden_dim|model_dim|d_embed|width|embedding_size"
    r"|emb_dim|hidden_channels)$"
)
FFN_KEYS = re.compile(r"(intermediate_size|ffn_dim|^d_ff$|mlp_dim|feed_forward_size|^n_inner$|ffn_hidden_size$)")
HEAD_KEYS = re.compile(
    r"^((encoder|decoder|vision|text|audio|cross)_)?(num_attention_heads|n_head|n_heads|num_heads|attention_heads)$"
    r"|^([a-z0-9]+_)?(encoder|decoder)_attention_heads$"  # SeamlessM4T's speech_encoder_, t2u_encoder_
)
KV_KEYS = re.compile(
    r"^((encoder|decoder|cross)_)?(num_key_value_heads|n_kv_heads|num_kv_heads|multi_query_group_num|n_head_kv|num_kv)$"
)
HEAD_DIM_KEYS = re.compile(r"^(cross_)?(head_dim|d_kv|kv_channels|attention_head_dim|d_head|attention_head_size)$")
LAYER_KEYS = re.compile(
    r"^(num_hidden_layers|n_layer|n_layers|num_layers|encoder_layers|decoder_layers|num_decoder_layers"
    r"|num_encoder_layers|depth|num_layers_per_stack|[a-z0-9]+_(encoder|decoder)_layers"
    r"|num_(spatial|temporal)_layers|pred_num_hidden_layers)$"  # VideoPrism's factorised stacks, V-JEPA 2's predictor
)
LAYER_INDEX_KEYS = re.compile(r"^insert_layer_id$")  # a layer's index, where a module sits in the stack
EXPERT_KEYS = re.compile(
    r"^(num_experts|num_local_experts|n_routed_experts|moe_num_experts|num_routed_experts"
    r"|zero_expert_num)$"  # LongCat-Flash's zero (identity) experts
)
TOPK_KEYS = re.compile(r"^(num_experts_per_tok|num_experts_per_token|moe_topk|top_k|num_selected_experts|moe_k)$")
SERIES_HORIZON = 12  # steps a forecaster predicts where its config leaves them to the checkpoint (and its context,
# when unset): over Autoformer's default label_length of 10
TOKEN_KEYS = re.compile(r"(_token_id|_token_index|_token_ids)$")

LLAMA4_VISION = {"intermediate_size": 4 * WIDTH, "projector_input_dim": WIDTH, "projector_output_dim": WIDTH,
                 "vision_output_dim": WIDTH}  # fmt: skip

JANUS_VQ = {"base_channels": 32, "num_embeddings": VOCAB, "projection_dim": WIDTH, "image_token_embed_dim": WIDTH}

# model_type -> config keys to set after the generic shrinking (why: where it is not obvious)
HINTS: dict[str, dict] = {
    # hybrids whose default config has no attention layer, whose checkpoints have some (Bamba-9B:
    # attn_layer_indices [9, 18, 27]; Granite 4.0-H: "full_attention" among its layer types): the
    # second of the two layers attention, as their checkpoints' indices would leave none of two
    "bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    # a default config of no feature level (projector_scale_factors empty), which its forward cannot
    # run; LW-DETR's small and tiny checkpoints project one level (P4: a scale of 1.0)
    "lw_detr": {"projector_scale_factors": [1.0]},
    # its validator ties the adaptor's FFN to a quarter of the text model's width (1024 // 4): the
    # shrunk width's quarter, where the repairs would restore both widths to 1024
    "fun_asr_nano": {"adaptor_config.intermediate_size": WIDTH // 4},
    # the quantizer's input: the acoustic and the semantic encoder's widths concatenated (1024 + 1024)
    "xcodec2": {"quantization_dim": 2 * WIDTH},
    "neucodec": {"quantization_dim": 2 * WIDTH},
    # frames padded to max_img_size pixels, of which visual_prompt_size at each edge are a learned
    # prompt (448 and 96): a tiny image keeps a pad narrower than its half
    "tvp": {"max_img_size": 32, "visual_prompt_size": 4},
    # the VQ-VAE's grid of image tokens a side (32: 512 pixels over its 16-fold downsampling), which
    # its forward's decode requires of the tokens its encode made: 2 for the tiny image of 32 pixels;
    # in Janus its config sets it to the vision tower's patches a side (384 / 16 = 24, as many as the
    # VQ-VAE makes): the vision patch kept at 16, so that both make 2 of a tiny 32-pixel image
    # the VQ-VAE's width, codebook and image-token head, which no size field names (128 x [1, 1, 2, 2, 4]
    # channels, 16384 codes, 2048 wide: 122M parameters in all): 32 channels (its GroupNorms' groups),
    # 128 codes, the tiny width
    "janus_vqgan": {"num_patches": 2, **JANUS_VQ},
    "janus": {"vision_config.patch_size": 16, **{f"vq_config.{k}": v for k, v in JANUS_VQ.items()}},
    # its 2-d rope fills hidden_size / 4 frequencies with head_dim x partial_rotary_factor (4) / 2: 8
    # heads; its validator ties hidden_size to the last of out_features (the CNN's coarse channels);
    # images of 64 pixels (no field states one; the inputs read image_size): its coarse grid (stride
    # 8) pooled by 4 leaves 2 x 2 tokens to attend, where 32 pixels leave one
    "efficientloftr": {
        "out_features": [64, 64, 128, 96],
        "hidden_size": 96,
        "num_attention_heads": 8,
        "image_size": 64,
    },
    # Llama 4's default vision config cannot run (its width 768 pixel-shuffled by 0.5 is 3072 a token,
    # its intermediate_size 5632 the 1408-wide checkpoint's; its output 4096 wide, its projector's
    # input vision_output_dim 7680): the checkpoint's relations (intermediate_size = width / 0.5^2,
    # vision_output_dim = projector_output_dim), at the tiny width
    "llama4_vision_model": LLAMA4_VISION,
    "llama4": {f"vision_config.{k}": v for k, v in LLAMA4_VISION.items()},
    # its rotary is max(projection_dim // (2 x heads), 32) wide, whatever the head (32 of a checkpoint's 64): heads
    # of 48 and 32 (2 and 3 of the width) hold it; the decoder's count moved off 3, so that each field's differs
    "clvp_encoder": {"num_attention_heads": 2},
    "clvp": {
        "text_config.num_attention_heads": 2,
        "speech_config.num_attention_heads": 3,
        "decoder_config.num_attention_heads": 6,
    },
    # its sliding layers have twice the key heads of its full ones (a checkpoint's 4 and 8, of 64 query heads):
    # 8 query heads hold both of the tiny 2 and 4, where 6 hold no 4
    "mimo_v2_flash": {"num_attention_heads": 8},
    # its rotary's 3-d sections default in its code to [22, 22, 20] (a head of 128), which its __init__ splits the
    # frequencies by: the same proportions on the tiny head's 8
    "ernie4_5_vl_moe_text": {"rope_parameters.mrope_section": [3, 3, 2]},
    "ernie4_5_vl_moe": {"text_config.rope_parameters.mrope_section": [3, 3, 2]},
    # its attention's heads are hidden_size / heads wide, its rotary head_dim wide (equal in a checkpoint: 2048 / 16
    # = 128, 1024 / 16 = 64): head_dim kept at the tiny width over the tiny heads (2 and 3)
    "blt": {"global_config.head_dim": WIDTH // 2, "decoder_config.head_dim": WIDTH // 3},
    # its lightning indexer's head count (index_n_heads, 4 by default, kept) would equal the 4 query heads handed to
    # its text model after its vision tower's 6, and name two fields: the indexer's moved off to a count no field has
    "minimax_m3_vl": {"text_config.index_n_heads": 8},
    # its patch embedding is four stride-2 convolutions (16 pixels a patch, whatever patch_size says, which its
    # attention biases' grid reads): 128 pixels, 8 x 8 tokens, then 4 x 4 and 2 x 2 (its three stages: STAGES)
    "levit": {"patch_size": 16, "image_size": 128},
    # its config class leaves each layer's MLP kind to the checkpoint (mlp_layer_types None, which its decoder
    # layers index): DeepSeek-OCR 2's first layer dense, the others sparse, as its docstring's example
    "deepseek_ocr2_text": {"mlp_layer_types": ["dense", "sparse"]},
    # the SAM tower's last downsampling is as wide as the Qwen2 encoder it feeds (the checkpoint's 896 both; the
    # default encoder config's 4096 matches none): the tiny encoder's width; its image of 64 pixels, 2 x 2 tokens
    # after the SAM's patches of 8 and its 4-fold downsampling (the encoder attends over the image tokens openly,
    # causally over its queries: one image token would read as a causal mask)
    "deepseek_ocr2": {
        "text_config.mlp_layer_types": ["dense", "sparse"],
        "vision_config.sam_config.downsample_channels": [512, WIDTH],
        "vision_config.sam_config.image_size": 64,
    },
    "deepseek_ocr2_vision": {"sam_config.downsample_channels": [512, WIDTH], "sam_config.image_size": 64},
    # its projector's fields are the checkpoint's to set (None by default, which its __init__ reads): a Window
    # Q-Former of 2 x 2 query windows over 4 x 4 keys, two vision layers injected into the two tiny LLM layers,
    # and its 4 spatial offset groups (into LLM layers 12, 15, 18 and 21 of 40 by default) spread over both
    "granite4_vision": {
        "downsample_rate": "2/4",
        "deepstack_layer_map": [[-2, 0], [-1, 1]],
        "spatial_target_layers": [0, 0, 1, 1],
    },
    # one attention block shared by its hybrid layers, tied to the first: two of them, so that the
    # tie has a layer to tie
    "zamba": {
        "num_hidden_layers": 5,
        "layers_block_type": ["linear_attention", "linear_attention", "hybrid", "linear_attention", "hybrid"],
    },
}


# its rotary always splits each head's frequencies into multimodal sections, which its config leaves to the
# checkpoint (HunyuanOCR: xdrope_section [16, 16, 16, 16], a head of 128): 4 axes, the tiny head's 8 frequencies
HINTS["hunyuan_vl_text"] = {"rope_parameters.mrope_section": [2, 2, 2, 2]}
HINTS["hunyuan_vl"] = {"text_config.rope_parameters.mrope_section": [2, 2, 2, 2]}
# their models map image tokens through the tokenizer's vocabulary, which the config leaves to the checkpoint
# (Chameleon's and Emu3's config.json: the whole vocabulary, "<image>" among it): the image placeholder only,
# an id inside the tiny vocabulary (the VQ codes' tokens are not needed by a forward of text)
HINTS["chameleon"] = HINTS["emu3"] = {"vocabulary_map": {"<image>": 3}}
# its atom encoders' (the inputs embedder's and the denoiser's) 3-d rotary packs 3 spatial axes of 2 frequency pairs and 10 pairs of the atom's UID into half
# of each head (the checkpoint's 16 of a 32-wide head): the tiny head of 16 holds the axes' 6 and 2 of the UID
HINTS["esmfold2"] = {
    "atom_encoder.num_uid_rope_pairs": 2,
    "structure_head.diffusion_module.atom_encoder.num_uid_rope_pairs": 2,
}
# its adapter pools the outputs of ViT layers 24 and 18 (of the 25 the checkpoint keeps: the last and the
# seventh from it, by index): the tiny ViT's last and the one before it
HINTS["molmo2"] = {"adapter_config.vision_feature_layer": [-1, -2]}
# its latents' width, count and depth, and their self-attention's heads, have names of their own
# (1280 wide, 256 latents, 26 self-attentions of 8 heads): shrunk, heads told apart from the cross-attention's
HINTS["perceiver"] = {
    "d_latents": WIDTH,
    "num_latents": 8,
    "num_self_attends_per_block": 2,
    "num_self_attention_heads": 4,
    "num_cross_attention_heads": 2,
}
# its config sets its box embedding's width to hidden_size / 4, split over the 8 coordinates, each a
# sinusoid of pairs: a width of 128 (4 pairs a coordinate; 8 heads of 16), where 96 leaves each an odd 3
HINTS["bros"] = {"hidden_size": 128, "num_attention_heads": 8}
# Qwen4-Exp's attention layers always build their QSA token indexer, whose sizes its config leaves to the
# checkpoint (None): one key head (its validator's only choice), heads as wide as the attention's, blocks of 2
# tokens and a budget of 64 (a multiple, as its validator asks; past the tiny forwards' lengths, as a
# checkpoint's budget is past a short prompt: every earlier token kept)
QSA = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": HEAD_DIM, "indexer_budget": 64,
       "indexer_compress_ratio": 2}  # fmt: skip
HINTS["qwen4_exp_text"] = QSA
# its default vision tower is timm's ResNet-50 with no model_args, and its projector reads model_args'
# embed_dim: the Perception Encoder ViT its checkpoints (Perception-LM) run, shrunk as any timm ViT
# (_tiny_timm, after the hints)
HINTS["perception_lm"] = {
    "vision_config.architecture": "vit_pe_core_large_patch14_336",
    "vision_config.model_args": {"embed_dim": 1024},
}
HINTS["qwen4_exp"] = {f"text_config.{k}": v for k, v in QSA.items()}
# its projector's two stride-2 convolutions reduce the vision tower's grid fourfold per side: an image of 128
# (16 x 16 patches of 8) leaves its decoder's cross-attention 16 keys, where the default 32 left one (any two
# rows fit a column to any other)
HINTS["pp_formulanet"] = {"vision_config.image_size": 128}
# its ProbSparse attention scores a content-chosen subset of queries (the top u by a sparsity measure over
# randomly sampled keys) against every key, through the same q and k projections as its full attention, and
# gives the others no logits: traced under full attention, whose logits for those queries are the same form
HINTS["informer"] = {"attention_type": "full"}
# four stages of keys reduced 8, 4 and 2 times a side, then not: an image of 128 leaves the first stage's 32 x 32
# tokens 16 keys (the default 32 left one, where any two rows fit a column to any other)
HINTS["pvt_v2"] = HINTS["segformer"] = HINTS["glpn"] = {"image_size": 128}
# a sliding window of 2 tokens a side: a band over the tiny forward's 9 tokens, in five chunks (the default 512
# pads them to 512, and its band holds them all)
HINTS["longformer"] = HINTS["led"] = {"attention_window": 4}
# its default backbone is timm's Swin, read at three levels of 192, 384 and 768 channels through LayerNorms
# over channels-last maps (timm's layout): the ResNet the shrinking swaps in, at three stages of its own widths,
# with no such norm; its text tower narrower than its decoder, as its checkpoint's (transformers builds the task
# projection only where the two widths differ)
HINTS["omdet-turbo"] = {
    "apply_layernorm_after_vision_backbone": False,
    "backbone_config.depths": [1, 1, 1],
    "backbone_config.hidden_sizes": [32, 64, 96],
    "backbone_config.out_features": ["stage1", "stage2", "stage3"],
    "encoder_in_channels": [32, 64, 96],
    "text_config.hidden_size": 48,
    "text_config.intermediate_size": 96,
    "text_projection_in_dim": 48,
    "text_projection_out_dim": 48,
    "class_embed_dim": 48,
    "decoder_num_layers": 2,
}


class _Counts:
    """Hands out distinct head counts across every config of a model."""

    def __init__(self):
        self.next = iter(HEAD_COUNTS)

    def take(self) -> int:
        return next(self.next, 2)


def _is_sub(v, key: str = "") -> bool:
    """A sub-config: a dict with a model_type, or one under a *_config key (SAM's prompt encoder)."""
    return isinstance(v, dict) and ("model_type" in v or key.endswith("config"))


def _widths(d: dict) -> set[int]:
    """Every width of a config and of its sub-configs (a sub-config's field that must equal
    another's width: a vision tower's out_hidden_size, a head's audio_hidden_size)."""
    out = {v for k, v in d.items() if WIDTH_KEYS.match(k) and isinstance(v, int) and not isinstance(v, bool)}
    for k, v in d.items():
        if _is_sub(v, k):
            out |= _widths(v)
    return out


def _shrink_dict(own: dict, counts: _Counts, kv_equal: bool = False, widths: set[int] | None = None) -> dict:
    """One config's fields (its sub-configs shrunk in turn); kv_equal: as many key heads as
    query heads (a config class that allows no other); widths: the whole config's."""
    out = dict(own)
    widths = widths if widths is not None else _widths(own)
    first_heads = None
    for k, v in own.items():
        if isinstance(v, int) and not isinstance(v, bool) and HEAD_KEYS.match(k):
            out[k] = counts.take()
            first_heads = first_heads or out[k]
    for k, v in own.items():
        if v is None and HEAD_DIM_KEYS.match(k) and k in ("head_dim",):  # a head width the forward reads as given
            out[k] = HEAD_DIM
        if v is None and TOPK_KEYS.match(k) and any(EXPERT_KEYS.match(e) for e in own):
            out[k] = 2  # DeepSeek-V2: experts, and no top-k set
        if v is None and KV_KEYS.match(k) and first_heads:  # Nemotron: unset, and its forward divides by it
            out[k] = first_heads  # as many key heads as query heads: what unset means
        if v is None and k == "sliding_window" and _none_slides(own.get("layer_types")):
            out[k] = 4  # Step 3.5: no layer slides, but the forward builds a sliding mask all the same
        if v is None and k == "clip_qkv":  # DBRX: None is no clipping, which its forward's clamp(None, None)
            out[k] = 1e9  # refuses; a bound no value reaches is the same
        if v is None and k == "prediction_length":  # forecasters (Informer): a checkpoint states its horizon
            out[k] = SERIES_HORIZON
        if v is None and k == "vocab_size":  # ESM: no vocabulary (nor padding token) by default
            out[k] = VOCAB
            if "pad_token_id" in own and own["pad_token_id"] is None:
                out["pad_token_id"] = 1
        if _is_sub(v) and v.get("model_type") == "timm_backbone":  # timm is not installed: transformers' ResNet
            out[k] = dict(RESNET)
        elif _is_sub(v) and v.get("model_type") == "timm_wrapper":  # a timm model (Perception Encoder's ViT)
            out[k] = _tiny_timm(v)
        elif _is_sub(v, k):
            out[k] = _shrink_dict(v, counts, kv_equal, widths)
        if _widths_per_level(k, v, widths):  # RT-DETR's decoder_in_channels: the encoder's width, per level
            out[k] = [WIDTH] * len(v)
        elif _feeds_a_width(k, v, widths):  # Unlimited-OCR's SAM downsampled to its CLIP encoder's 1024
            out[k] = [*v[:-1], WIDTH]
        if k in ("width_coefficient", "depth_coefficient") and isinstance(v, float) and v > 0.25:  # EfficientNet's
            out[k] = 0.25  # compound scaling (B7: 2.0 and 3.1): 8-channel stages, one block each
        if not isinstance(v, int) or isinstance(v, bool) or HEAD_KEYS.match(k):
            continue
        if WIDTH_KEYS.match(k) or _is_width(k, v, widths):
            out[k] = WIDTH
        elif FFN_KEYS.search(k):
            out[k] = 2 * WIDTH
        elif KV_KEYS.match(k):
            heads = _query_heads(out, k) or first_heads or 6
            out[k] = heads if kv_equal else KV_HEADS.get(heads, 1)
        elif HEAD_DIM_KEYS.match(k):
            out[k] = HEAD_DIM
        elif LAYER_KEYS.match(k):
            out[k] = min(v, LAYERS) if v > 0 else v
        elif LAYER_INDEX_KEYS.match(k) and v >= LAYERS:  # MiniCPM-V: a merger after layer 6 of 27; after
            out[k] = LAYERS - 1  # the last of the shrunk layers (one that merges into a token: none after)
        elif EXPERT_KEYS.match(k):
            out[k] = min(v, 4)
        elif TOPK_KEYS.match(k):
            out[k] = min(v, 2)
        elif "vocab" in k and v > VOCAB:  # vocab_size_per_layer_input (Gemma 3n, 4), BLT's hash vocabulary
            out[k] = VOCAB
        elif k in ("image_size", "crop_size") and v > 32:
            out[k] = 32
        elif k == "frames_per_clip" and v > 4:  # V-JEPA 2: two tubelets of two frames
            out[k] = 4
        elif k == "patch_size" and v > 8:
            out[k] = 8
        elif k in ("num_queries", "latent_query_num") and v > QUERIES:  # object queries (RT-DETR picks them
            out[k] = QUERIES  # among the image's anchors), Kosmos-2.5's latent queries of the image (2048)
        elif k == "max_length" and "time_stride" in own and v > 64:  # AST's spectrogram frames: 1024, patches
            out[k] = 64  # of 16 every 10 frames, 1214 tokens a clip at full length
        elif k == "num_mel_bins" and "frequency_stride" in own and v > 32:
            out[k] = 32
        elif k == "upsample_initial_channel" and v > 512:  # BigVGAN's 1536 channels, halved at each
            out[k] = 512  # upsampling: no attention, but the forward's cost (fewer make float64 convolutions slower)
        elif k == "linear_num_heads" and v > 2:  # linear attention's (Kimi Delta Attention's 32 of 128): no
            out[k] = 2  # softmax to derive, but the forward's cost
        elif k == "linear_head_dim" and v > HEAD_DIM:
            out[k] = HEAD_DIM
        elif k == "encoder_hidden_size" and "downsampling_ratios" in own and v > 8:  # a codec's (DAC's) first
            out[k] = 8  # channels, doubled at every downsampling (64 to 1024), and the decoder's, halved at
        elif k == "decoder_hidden_size" and "upsampling_ratios" in own and v > 64:  # every upsampling (1536)
            out[k] = 64
        elif k == "num_filters" and "upsampling_ratios" in own and v > 8:  # SEANet's (Mimi's, EnCodec's) first
            out[k] = 8  # channels, doubled at every downsampling (64 to 1024)
        elif k == "sliding_window" and v > 4:
            out[k] = 4
        elif k == "context_size" and v > 4:  # Granite Speech's blocks of frames, padded: tiny inputs fill some
            out[k] = 4
        elif k == "max_source_positions" and v > 16:  # audio frames (Whisper: 1500)
            out[k] = 16
        elif k in POSITIONS and v > MAX_POSITIONS:  # a table or mask buffer of positions (squared, for some)
            out[k] = MAX_POSITIONS
        elif re.search(r"moe_intermediate_size|shared_expert_intermediate_size", k):
            out[k] = WIDTH
        elif k.endswith("layer_period") and v > 2:  # hybrids (Jamba): attention, experts every other layer
            out[k] = 2
        elif k.endswith("layer_offset") and v > 1:
            out[k] = 1
        elif k in ("n_group", "topk_group", "num_expert_group", "topk_groups"):  # expert groups: one, of the 4 left
            out[k] = 1
        elif k in LATENT and v > 0:  # multi-head latent attention's ranks and head parts (DeepSeek-V2/V3);
            out[k] = LATENT[k]  # 0 is a part left out (GLM-5 Next: no rotary part), kept
        elif k == "rotary_dim" and isinstance(own.get("head_dim") or own.get("n_head"), int):
            out[k] = min(v, HEAD_DIM // 2)  # GPT-J, CodeGen: a part of each head rotates
        elif k.endswith("pos_feats") and 2 * v in widths:  # SAM: sine features of both axes, a width
            out[k] = WIDTH // 2
        elif k in WIDTH_SHARES and _int(own.get("hidden_size")) and v < own["hidden_size"]:
            out[k] = max(1, v * WIDTH // own["hidden_size"])
        elif k in PROJECTION_GROUPS and _int(v) and v > 1:
            out[k] = PROJECTION_GROUPS[k]
    for k, v in own.items():  # parts that sum to a width (Reformer's axial_pos_embds_dim), rescaled
        if isinstance(v, (list, tuple)) and len(v) > 1 and all(_int(x) for x in v) and sum(v) in widths:
            out[k] = _split(WIDTH, v)
    _fixed_token_counts(out)
    for k in ("image_size", "input_size", "img_size"):  # [height, width] (YOLOS: [800, 1333])
        v = own.get(k)
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) and x > 32 for x in v):
            out[k] = [32, 32]
    if _int(own.get("num_position_embeddings")) == _grid(own) ** 2 > _grid(out) ** 2 > 0:
        out["num_position_embeddings"] = _grid(out) ** 2  # a position a patch (Molmo 2's 27 x 27): the tiny grid's

    _coarsest_patch(out, own)
    tubelet = own.get("tubelet_size")  # VideoPrism: [frames, height, width] of a tubelet
    if isinstance(tubelet, (list, tuple)) and len(tubelet) == 3 and all(isinstance(x, int) for x in tubelet):
        out["tubelet_size"] = [tubelet[0], *(min(x, 8) for x in tubelet[1:])]
    levels = _levels(own)
    for k in ("out_features", "out_indices", "stage_names") if not levels else ("stage_names",):
        out.pop(k, None)  # backbone stages: recomputed from the depth
    if out.get("use_timm_backbone"):  # DETR and kin: the transformers ResNet, not timm's (not installed)
        out["use_timm_backbone"] = False
        out["use_pretrained_backbone"] = False
    _stages(out, own, max(levels, default=0))
    _patches_at_output_stride(out)
    for k in [k for k in out if "softcap" in k and "attn" in k and out[k] is not None]:
        out[k] = 1e9  # a monotone map of q.k, tanh(s / cap) * cap: the identity to 1e-18 with this cap
    if isinstance(out.get("vocab_size"), int):
        _remap_token_ids(out, out["vocab_size"])
    _shrink_layer_lists(out, own)
    _per_layer_heads(out, own, kv_equal)
    _shrink_overrides(out, own)
    _rope_sections(out)
    _rope_context(out, own)
    _unset_experts(out, own)
    _unset_rope(out)
    _vq_channels(out, own)
    return out


TIMM_HEAD_WIDTH = 8


def _tiny_timm(sub: dict) -> dict:
    """A TimmWrapper's config with the timm ViT it names shrunk through the arguments timm builds it
    with (model_args): two blocks, each head TIMM_HEAD_WIDTH wide at its own head count (timm's
    config.json states none: the architecture fixes it, and the record carries the count seen),
    images of 4 x 4 patches. As it is where timm does not import, or the model is no ViT of patches."""
    try:
        import timm
        import torch
    except Exception:  # timm (or its torchvision) does not import: the forward says so
        return sub
    import math

    arch, args = sub.get("architecture"), dict(sub.get("model_args") or {})
    try:
        with torch.device("meta"):
            model = timm.create_model(arch, pretrained=False, **args)
    except Exception:
        return sub
    heads = sorted({m.num_heads for m in model.modules() if isinstance(getattr(m, "num_heads", None), int)})
    patch = getattr(getattr(model, "patch_embed", None), "patch_size", None)
    if not heads or not isinstance(patch, (tuple, list)):
        return sub
    tiny = {"depth": 2, "embed_dim": math.lcm(*heads) * TIMM_HEAD_WIDTH, "img_size": 4 * int(patch[0])}
    try:
        with torch.device("meta"):
            timm.create_model(arch, pretrained=False, **{**args, **tiny})
    except Exception:
        return sub
    return dict(sub, model_args={**args, **tiny})


def _vq_channels(out: dict, own: dict) -> None:
    """A VQ-VAE whose stages are base_channels x channel_multiplier wide and whose attention is as
    wide as the last stage (Emu3's: 256 x 4 = its hidden_size 1024): every stage the tiny width (a
    multiple of the 32 groups of its GroupNorms), which the shrunk width and base (a quarter, 24) are not."""
    base, mult = own.get("base_channels"), own.get("channel_multiplier")
    if not (_int(base) and isinstance(mult, (list, tuple)) and mult and all(_int(m) for m in mult)):
        return
    if any(_int(v) == base * mult[-1] and WIDTH_KEYS.match(k) for k, v in own.items()):
        out["base_channels"], out["channel_multiplier"] = WIDTH, [1] * len(mult)
    if _int(own.get("latent_channels")) and own.get("embed_dim") == own["latent_channels"]:
        out["embed_dim"] = out["latent_channels"]  # codes as wide as the latents: Emu3's decoder stacks the two


def _unset_rope(out: dict) -> None:
    """A rope per layer kind left to the checkpoint (Cohere Compass: rope_parameters empty, its
    rotary indexed by layer_types): transformers' default rope for each kind of layer."""
    types, params = out.get("layer_types"), out.get("rope_parameters")
    if params == {} and isinstance(types, (list, tuple)) and types:
        out["rope_parameters"] = {t: {"rope_type": "default", "rope_theta": 10000.0} for t in dict.fromkeys(types)}


def _unset_experts(out: dict, own: dict) -> None:
    """Experts a config leaves to its checkpoint (dots.llm1's n_routed_experts, DiffusionGemma's
    num_experts: None) where its model builds them all the same: 4 experts, 2 a token, one shared
    (dots.llm1's checkpoint: 128, 6 and 2), FFNs of the tiny width; a flag that turns the experts
    off (Gemma 4's enable_moe_block) leaves them unset."""
    if not any(v is None and EXPERT_KEYS.match(k) for k, v in own.items()):
        return
    if any(v is False and "moe" in k for k, v in own.items()):
        return
    for k, v in own.items():
        if v is not None:
            continue
        if EXPERT_KEYS.match(k):
            out[k] = 4
        elif TOPK_KEYS.match(k) or k == "top_k_experts":
            out[k] = 2
        elif k == "n_shared_experts":
            out[k] = 1
        elif k == "moe_intermediate_size":
            out[k] = WIDTH


def _coarsest_patch(out: dict, own: dict) -> None:
    """An image large enough that its coarsest feature map (output_stride pixels a point) holds a
    whole patch (MobileViT v2 unfolds patch_size x patch_size patches of every stage's map)."""
    stride, patch, image = (_int(out.get(k)) for k in ("output_stride", "patch_size", "image_size"))
    if stride and patch and image and image < stride * patch:
        out["image_size"] = stride * patch


PER_LAYER_HEADS = re.compile(r"^num_(attention|key_value)_heads_per_layer$")


def _per_layer_heads(out: dict, own: dict, kv_equal: bool) -> None:
    """Head counts per layer (Laguna's query heads, Sapiens2's key heads), over the tiny depth as
    _shrink_layer_lists left it."""
    heads, was = _int(out.get("num_attention_heads")), _int(own.get("num_attention_heads"))
    depth = next((out[k] for k in own if LAYER_KEYS.match(k) and _int(own[k])), 0)
    for k, v in own.items():
        if not (PER_LAYER_HEADS.match(k) and heads and was and isinstance(v, (list, tuple)) and v):
            continue
        if not all(_int(x) for x in v) or len(set(v)) > depth:
            continue
        out[k] = _kv_per_layer(v, heads, was, depth, kv_equal) if "key_value" in k else _query_per_layer(heads, depth)


def _kv_per_layer(v: list, heads: int, was: int, depth: int, kv_equal: bool) -> list[int]:
    """Key heads per layer (Sapiens2's: as many as the query heads in its first and last 8 layers, 8 of
    16 between): each kind of layer once, in the order of its first layer, as many as the query heads or
    the tiny key heads of the tiny query heads."""
    kinds = list(dict.fromkeys(v))
    tiny = {x: heads if x == was or kv_equal else KV_HEADS.get(heads, 1) for x in kinds}
    return [tiny[x] for x in kinds] + [tiny[kinds[-1]]] * (depth - len(kinds))


def _query_per_layer(heads: int, depth: int) -> list[int]:
    """Query heads per layer (Laguna's, num_attention_heads repeated by its default): each layer a count of
    its own, multiples of the tiny query heads (so of their key heads) past every count HEAD_COUNTS hands
    out, so that the count seen names the list, indexed by the layer, not the field its default repeats."""
    first = max(HEAD_COUNTS) // heads + 1
    return [heads * (first + n) for n in range(depth)]


def _none_slides(types) -> bool:
    return isinstance(types, (list, tuple)) and bool(types) and not any("sliding" in str(t) for t in types)


def _split(total: int, parts) -> list[int]:
    """total split in the proportions of parts (each at least 1)."""
    new = [max(1, round(p * total / sum(parts))) for p in parts]
    new[0] += total - sum(new)
    return new


def _is_width(key: str, v: int, widths: set[int]) -> bool:
    """A field that names a size equal to one of the config's widths (a tower's out_hidden_size)."""
    return (
        v in widths
        and v >= 16  # a hand record's tiny config: SAM's output_channels 16, its prompt encoder's width
        # groups = width: depthwise (Mimi); hidden_size_*: another stack's (BLT's hidden_size_global)
        and re.search(r"(size|dim|channels?|_hidden|groups)$|^hidden_size_", key) is not None
        and not re.search(
            r"(vocab|position|image|patch|window|kernel|head_dim|stride|intermediate|ffn|codebook_size)", key
        )
    )


def _widths_per_level(key: str, v, widths: set[int]) -> bool:
    """A list of sizes, each one of the config's widths (a feature level's channels)."""
    return isinstance(v, (list, tuple)) and bool(v) and all(_int(x) and _is_width(key, x, widths) for x in v)


def _feeds_a_width(key: str, v, widths: set[int]) -> bool:
    """A chain of downsampling convolutions' channels whose last is one of the config's widths (the
    tower it feeds)."""
    chain = re.search(r"downsample\w*channels$", key) and isinstance(v, (list, tuple)) and len(v) > 1
    return bool(chain) and all(_int(x) for x in v) and _is_width(key, v[-1], widths)


# grouped q and k projections (SqueezeBERT): counts no other "...groups" field holds, dividing the width
PROJECTION_GROUPS = {"q_groups": 2, "k_groups": 3}
KEYPOINTS = 16  # keypoints a detector keeps of each image (SuperPoint, for LightGlue and SuperGlue)


def _fixed_token_counts(out: dict) -> None:
    """As many tokens in every forward, whatever the pixels (the derivation compares the forwards
    of two inputs): a keypoint detector keeps its KEYPOINTS best pixels, every pixel a candidate
    (a random model's scores are zero at most); LightGlue prunes no keypoint and stops at no layer
    early (-1: off)."""
    if "keypoint_threshold" in out and isinstance(out.get("max_keypoints"), int):
        out["keypoint_threshold"] = -1.0
        out["max_keypoints"] = KEYPOINTS
    for k in ("depth_confidence", "width_confidence"):
        if isinstance(out.get(k), float):
            out[k] = -1.0


def _query_heads(out: dict, kv_key: str) -> int | None:
    """The query-head count beside a key-head field of the same stack (Moonshine's
    encoder_num_key_value_heads: encoder_num_attention_heads)."""
    prefix = re.match(r"^((encoder|decoder|cross)_)?", kv_key).group(0)
    if not prefix:
        return None
    return next((v for k, v in out.items() if k.startswith(prefix) and HEAD_KEYS.match(k) and _int(v)), None)


def _rope_context(out: dict, own: dict) -> None:
    """A rope's original context scaled with the capped positions (YaRN's and LongRoPE's factor
    is their ratio): the same scaling, on a tiny context."""
    old, new = own.get("max_position_embeddings"), out.get("max_position_embeddings")
    if not (isinstance(old, int) and isinstance(new, int) and new < old):
        return
    for key in ("rope_parameters", "rope_scaling"):
        params = out.get(key)
        if isinstance(params, dict) and isinstance(params.get("original_max_position_embeddings"), int):
            params["original_max_position_embeddings"] = max(1, params["original_max_position_embeddings"] * new // old)


POSITIONS = ("max_position_embeddings", "n_positions", "max_seq_len", "max_sequence_length", "n_ctx", "seq_length")
MAX_POSITIONS = 512
# shares of the width that an embedding concatenates (LayoutLMv3's box: 4 coordinates and 2 shapes of
# 128 make its 768), scaled with it
WIDTH_SHARES = ("coordinate_size", "shape_size")
LATENT = {"qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 16, "kv_lora_rank": 32, "q_lora_rank": 48,
          "qk_head_dim": 32}  # fmt: skip
RESNET = {"model_type": "resnet", "depths": [1, 1], "hidden_sizes": [32, 64], "embedding_size": 32,
          "out_features": ["stage2"]}  # fmt: skip
# model_type -> stages kept where the config ties the stages' structure to their full count (why: where it
# is not obvious)
STAGES = {
    # its config class builds the two subsampling attentions between three stages (down_ops) in __post_init__
    "levit": 3,
    # the last stage alone reads a class token, and reduces no keys (sequence_reduction_ratios [8, 4, 2, 1]):
    # two stages cut from the four would reduce a sequence that holds it
    "pvt": 4,
    # PVT v2's, SegFormer's and GLPN's: their last stage alone reduces no keys (sr_ratios [8, 4, 2, 1])
    "pvt_v2": 4,
    "segformer": 4,
    "glpn": 4,
}
STAGE_HEADS = (3, 6, 12, 24)  # per-stage head counts of hierarchical vision models (Swin): width 96, 192, ...


def _patches_at_output_stride(out: dict) -> None:
    """An image two patches a side at the coarsest stage (image_size / output_stride): MobileViT's
    last transformer unfolds that stage's map into patches of patch_size, and attends across them
    (a 32-pixel image leaves one, 128 pixels leave 2 x 2)."""
    stride, patch, image = (out.get(k) for k in ("output_stride", "patch_size", "image_size"))
    if all(isinstance(v, int) and v > 0 for v in (stride, patch, image)):
        out["image_size"] = max(image, 2 * stride * patch)


def _levels(own: dict) -> list[int]:
    """The stages a backbone config hands on where it hands on several (RT-DETR's ResNet: stages 2
    to 4, which its encoder's per-level lists and AIFI's encode_proj_layers index), else none: a
    backbone read at its last stage only (its default) is cut with its depth."""
    names, indices, depths = own.get("stage_names"), own.get("out_indices"), own.get("depths")
    if not (isinstance(names, (list, tuple)) and isinstance(indices, (list, tuple)) and len(indices) > 1):
        return []
    if not (isinstance(depths, (list, tuple)) and len(names) == len(depths) + 1):
        return []  # stages that are layers (DINOv2 as Depth Anything's backbone): cut with the depth
    return [i % len(names) for i in indices if isinstance(i, int)]


def _stages(out: dict, own: dict, kept: int = 0) -> None:
    """Hierarchical vision models (Swin, its kin): two stages of one and two blocks (as many
    stages as kept, the backbone levels a parent reads, with a block each past the second), head
    counts per stage that differ, a window that fits a 32-pixel image of 4-pixel patches (an image
    twice as large a side for each stage past the second: MaskFormer's Swin attends over windows
    of its fourth stage's tokens, none of one token)."""
    depths = own.get("depths")
    if not (isinstance(depths, (list, tuple)) and depths and all(isinstance(d, int) for d in depths)):
        return
    n = min(len(depths), max(2, kept, STAGES.get(own.get("model_type"), 0)))
    out["depths"] = [1, 2, *[1] * (n - 2)][:n]
    if isinstance(own.get("num_heads"), (list, tuple)):
        out["num_heads"] = list(STAGE_HEADS[:n])
    for k in ("num_layers", "num_stages", "num_encoder_blocks"):
        if isinstance(own.get(k), int):
            out[k] = n
    if "window_size" in own and isinstance(own["window_size"], int):
        out["window_size"] = 4
    if "image_size" in own:  # the last of more than two stages as large as the second of 32 pixels
        out["image_size"] = 32 * 2 ** (n - 2)
    if isinstance(own.get("patch_size"), int):  # no larger than 4 (Swin2SR's pixels are its patches: 1)
        out["patch_size"] = min(own["patch_size"], 4)
    for k, v in own.items():  # other per-stage lists (mlp ratios, drop rates)
        if k not in ("depths", "num_heads") and isinstance(v, (list, tuple)) and len(v) == len(depths) and n < len(v):
            out[k] = list(v[:n])
        elif re.search(r"(ratios|strides)$", k) and isinstance(v, (list, tuple)) and len(v) == len(depths) - 1:
            out[k] = list(v[: n - 1])  # the downsampling between stages (VibeVoice's tokenizers: after a stem)
    if isinstance(own.get("num_heads"), (list, tuple)):
        _stage_widths(out, own, depths, n)


def _stage_widths(out: dict, own: dict, depths, n: int) -> None:
    """Per-stage widths that the stages' head counts do not divide (Florence 2's DaViT: embed_dim
    [128, 256, ...] over 4, 8, ... heads, cut to [128, 256] over 3, 6): WIDTH, doubled per stage
    (heads of 32, as its config's)."""
    for k, v in own.items():
        if not (WIDTH_KEYS.match(k) or k in ("hidden_sizes", "embed_dims")):
            continue
        if isinstance(v, (list, tuple)) and len(v) == len(depths):
            if any(w % h for w, h in zip(v[:n], STAGE_HEADS)):
                out[k] = [WIDTH * 2**i for i in range(n)]


def _remap_token_ids(out: dict, vocab: int) -> None:
    """Special token ids past the shrunk vocabulary, moved to distinct ids inside it."""
    spare = iter(range(vocab - 1, 2, -1))
    seen: dict[int, int] = {}

    def inside(i):
        if not isinstance(i, int) or isinstance(i, bool) or i < vocab:
            return i
        if i not in seen:  # no spare id left (Decision Transformer's vocabulary of 1, no tokens read): kept
            seen[i] = next(spare, i)
        return seen[i]

    for k, v in list(out.items()):
        if TOKEN_KEYS.search(k):
            out[k] = [inside(i) for i in v] if isinstance(v, (list, tuple)) else inside(v)
    for k in ("begin_suppress_tokens", "suppress_tokens"):
        if k in out:
            out[k] = None


def _every_kind(types) -> int:
    """The length of the shortest prefix of a list of layer kinds that holds every kind it lists."""
    kinds = set(map(str, types))
    return next(end for end in range(1, len(types) + 1) if set(map(str, types[:end])) == kinds)


def _shrink_layer_lists(out: dict, own: dict) -> None:
    """Per-layer settings cut with the depth. layer_types: the shortest prefix holding every kind
    it lists (the depth raised to it); every other list as long as the old depth (mlp_layer_types,
    per-layer intermediate sizes) cut to the new one; per_layer_config keys past it dropped; a
    count of last layers of another kind (num_blocks) under the new depth."""
    key = next((k for k in own if LAYER_KEYS.match(k) and isinstance(own[k], int)), None)
    if key is None:  # a depth the list itself sets (Nemotron-H's layers_block_type): its shortest prefix
        listed = next((k for k in ("layer_types", "layers_block_type") if isinstance(own.get(k), list)), None)
        if listed is not None and own[listed]:  # that holds every kind, at least LAYERS long
            out[listed] = list(own[listed][: max(_every_kind(own[listed]), LAYERS)])
        return
    n, old = out[key], own[key]
    shared_last = False
    if "layer_types" in own and own["layer_types"] is None and out.get("layer_types") is None:
        # a class that leaves it to the checkpoint (LFM2-MoE): every layer attention, transformers' name
        out["layer_types"] = ["full_attention"] * n
    # Zamba 2's are layers_block_type; RecurrentGemma's block_types, a pattern the depth repeats
    listed = (k for k in ("layer_types", "layers_block_type", "block_types") if isinstance(own.get(k), (list, tuple)))
    types = out.get(next(listed, "layer_types"))
    if isinstance(types, (list, tuple)) and types:
        n = max(_every_kind(types), n)
        if _int(own.get("num_kv_shared_layers")) >= len(types):  # every layer reuses another model's (Gemma 4's
            out["num_kv_shared_layers"] = n  # assistant: its backbone's keys and values)
        elif _int(own.get("num_kv_shared_layers")) > 0 and len(types) > n:
            # Gemma 3n: the last layers reuse the keys and values of the last earlier layer of their kind;
            # every kind among the producers, then one layer that reuses: the checkpoint's last (Gemma 4
            # forces it to full attention), with its per-layer overrides (_last_layer)
            n += 1
            out["num_kv_shared_layers"] = 1
            shared_last = True
        out[key] = n
    blocks = own.get("num_blocks")  # EoMT: its last num_blocks layers also attend from learned queries
    if _int(blocks) and isinstance(old, int) and n <= blocks < old:
        out["num_blocks"] = max(1, n - 1)  # both kinds of layer, as in the checkpoint
    for k, v in own.items():
        if k.endswith("layers_indices") and isinstance(old, int) and _layer_indices(v, old):
            out[k] = [i * n // old for i in v]  # Mllama's intermediate_layers_indices: as many, in the shrunk depth
        elif isinstance(v, (list, tuple)) and isinstance(old, int) and len(v) == old and old > n:
            # a list already shrunk (Swin2SR's depths and num_heads, per stage, as many as its layers) cut as shrunk
            out[k] = list((out[k] if isinstance(out.get(k), (list, tuple)) and len(out[k]) >= n else v)[:n])
        elif isinstance(v, dict) and v and all(isinstance(i, str) and i.isdigit() for i in v):
            out[k] = {i: c for i, c in v.items() if int(i) < n}
        elif isinstance(v, dict) and v and all(isinstance(i, int) for i in v):
            out[k] = {i: c for i, c in v.items() if i < n}
    if shared_last:
        _last_layer(out, own, n)


def _last_layer(out: dict, own: dict, n: int) -> None:
    """Layer n - 1 of the shrunk config as the checkpoint's last layer: its kind in layer_types and
    its per-layer overrides (per_layer_config, keyed as the shrunk config's keys are)."""
    types, own_types = out.get("layer_types"), own.get("layer_types")
    if not (isinstance(types, list) and isinstance(own_types, (list, tuple)) and len(types) >= n and own_types):
        return
    types[n - 1] = own_types[-1]
    layers, own_layers = out.get("per_layer_config"), own.get("per_layer_config")
    if not (isinstance(layers, dict) and isinstance(own_layers, dict)):
        return
    last = {int(k): v for k, v in own_layers.items() if str(k).isdigit()}.get(len(own_types) - 1)
    width = max((len(k) for k in layers if str(k).isdigit()), default=1)
    layers.pop(str(n - 1).zfill(width), None)
    if last is not None:
        layers[str(n - 1).zfill(width)] = dict(last)


def _layer_indices(v, depth: int) -> bool:
    """Whether v lists layer indices (non-negative, under depth), some past the shrunk depth."""
    ints = isinstance(v, (list, tuple)) and v and all(_int(i) or i == 0 for i in v)
    return bool(ints) and all(0 <= i < depth for i in v) and max(v) >= LAYERS


LATENT_PARTS = ("qk_nope_head_dim", "qk_rope_head_dim")


def _shrink_overrides(out: dict, own: dict) -> None:
    """Per-layer overrides (per_layer_config: the fields of a layer that differ from the config's)
    shrunk as the config's own fields were: each size in its ratio to the config's own value (Gemma 4's
    full layers: heads twice as wide; dots.note's sliding layers: half the heads), and a head width that
    is the sum of the latent head parts kept so (dots.note's sliding layers)."""
    layers = out.get("per_layer_config")
    if not isinstance(layers, dict):
        return
    for i, fields in list(layers.items()):
        if not isinstance(fields, dict):
            continue
        new = {}
        for k, v in fields.items():
            old, tiny = own.get(k), out.get(k)
            new[k] = max(1, round(v * tiny / old)) if _int(v) and _int(old) and _int(tiny) and old != tiny else v
        was, now = {**own, **fields}, {**out, **new}
        if all(_int(was.get(p)) for p in LATENT_PARTS) and was.get("head_dim") == sum(was[p] for p in LATENT_PARTS):
            if now.get("head_dim") != sum(now[p] for p in LATENT_PARTS):
                new["head_dim"] = sum(now[p] for p in LATENT_PARTS)
        layers[i] = new


def _rope_sections(out: dict) -> None:
    """Multimodal rope sections (mrope_section: a split of the rotary half of each head) rescaled
    to the shrunk head: same proportions, the sum head_dim / 2."""
    head_dim = out.get("head_dim") or (
        out["hidden_size"] // out["num_attention_heads"]
        if isinstance(out.get("hidden_size"), int) and isinstance(out.get("num_attention_heads"), int)
        else None
    )
    if not isinstance(head_dim, int):
        return
    for key in ("rope_parameters", "rope_scaling"):
        params = out.get(key)
        if not isinstance(params, dict):
            continue
        for name, sections in list(params.items()):
            if "section" in name and isinstance(sections, (list, tuple)) and sections and sum(sections) > 0:
                half = head_dim // 2
                new = [max(1, round(s * half / sum(sections))) for s in sections]
                new[0] += half - sum(new)
                params[name] = new


CHANNEL_KEYS = ("num_channels", "in_chans", "in_channels")
GRID_KEYS = re.compile(r"^(image_embedding_size|\w*feature_sizes|\w*feat_sizes)$")


def _fit_grids(d: dict, own: dict) -> None:
    """Sizes of the image's patch grid that other configs than the one embedding the pixels state
    (SAM's image_embedding_size, SAM 2's backbone_feature_sizes and the patch_size of its prompt
    encoder, which is the stride of the image embeddings), scaled as the shrinking scaled that grid."""
    pixels = next((p for p, c in _configs_of(d) if any(k in c for k in CHANNEL_KEYS) and _grid(c)), None)
    if pixels is None:
        return
    new, old = _grid(_get_dict(d, pixels)), _grid(_get_dict(own, pixels))
    if not (old and new) or old == new:
        return

    def scaled(v):
        return [scaled(x) for x in v] if isinstance(v, (list, tuple)) else max(1, v * new // old)

    for path, c in _configs_of(d):
        was = _get_dict(own, path)
        for k, v in c.items():
            if GRID_KEYS.match(k) and _ints(v) and _ints(was.get(k)):
                c[k] = scaled(was[k])
        if path != pixels and not any(k in c for k in CHANNEL_KEYS) and _grid(c) and _grid(was):
            c["patch_size"] = max(1, _int(_first(c["image_size"])) // max(1, scaled(_grid(was))))


def _grid(c: dict) -> int:
    """Patches along a side of a config's image: image_size over patch_size (or patch_stride)."""
    image = _int(_first(c.get("image_size")))
    patch = _int(_first(c.get("patch_size") or c.get("patch_stride")))
    return image // patch if image and patch else 0


def _first(v):
    return v[0] if isinstance(v, (list, tuple)) and v else v


def _ints(v) -> bool:
    return bool(_int(v)) or (isinstance(v, (list, tuple)) and bool(v) and all(_ints(x) for x in v))


def _configs_of(d: dict, path: str = ""):
    """(dotted path, config dict) of d and of every sub-config in it, outer ones first."""
    yield path, d
    for k, v in d.items():
        if _is_sub(v, k):
            yield from _configs_of(v, f"{path}{k}.")


def _get_dict(d: dict, path: str) -> dict:
    return (_get(d, path.rstrip(".")) if path else d) or {}


def _apply_hints(d: dict, hints: dict) -> None:
    for key, value in hints.items():
        node = d
        *path, last = key.split(".")
        for part in path:
            node = node[part]
        node[last] = value


def shrink(config, kv_equal: bool = False):
    """A shrunk copy of a transformers config (and of its sub-configs). A config class that
    refuses the first try because its key heads must equal its query heads gets them equal
    (kv_equal: from the start); one whose validators refuse other fields gets them repaired
    (`_repaired`)."""
    error = None
    own = config.to_dict()
    for equal in (kv_equal, True):
        d = _shrink_dict(own, _Counts(), equal)
        _fit_grids(d, own)
        hints = HINTS.get(config.model_type, {})
        _apply_hints(d, hints)
        for k in {h.split(".")[0] for h in hints if h.endswith(".architecture")}:  # a timm model a hint named
            d[k] = _tiny_timm(d[k])  # (Perception LM's)
        d.pop("transformers_version", None)
        try:
            return _repaired(type(config), d, own)
        except Exception as e:  # the config class's own validators
            error = e
            # the refusal of the key heads, or the first of the repairs' that ended elsewhere (ESMC's: a
            # restored head count the shrunk width no longer holds)
            said = f"{e} {getattr(e, 'first_refusal', '')}"
            if "key_value_heads" not in said and "kv_heads" not in said:
                break
    raise error


REPAIRS = 12  # rounds of moves per model type, at most, after the first
LADDER = (2, 4, 8, 16, 1)  # values tried for a count the validator names and the shrinking left alone
BIG = 1024  # a width restored to its own value only up to this (a validator tying it to a fixed size)
IMAGE_KEYS = re.compile(r"(image|img|input)_size$|resolution$")
IMAGE_LADDER = (32, 64, 128)  # image sizes tried instead of restoring a large one (LW-DETR: 1024)


def _repaired(cls, d: dict, own: dict):
    """cls.from_dict(d), where the class's validators refuse d, after moves on the fields the
    refusal names (a bare key, a dotted path or `quoted`): each shrunk field restored to its own
    value (a width only up to BIG), or, for an integer the shrinking left alone, a value of
    LADDER (bamba: "mamba_n_heads must divide mamba_expand * hidden_size"); a move is kept when
    the class then takes the config or refuses it otherwise (a step on, from which the next
    round starts), greedily, in at most REPAIRS + 1 rounds. The record derived from it is
    verified as any other."""
    d = _recomputed(cls, d, own)  # sizes the class computes from others, left to it
    try:
        return cls.from_dict(d)
    except Exception as e:
        error = first = e
    for _ in range(REPAIRS + 1):
        message = str(error)
        for path, value in _moves(d, own, message):
            trial = _with(d, path, value)
            try:
                made = cls.from_dict(trial)
            except Exception as e:
                if _shape(str(e)) != _shape(message):
                    d, error = trial, e
                    break
            else:
                return _with_computed(cls, trial, own, made)
        else:
            break
    error.first_refusal = first  # the refusal before the repairs (shrink's retry reads it)
    raise error


def _with_computed(cls, d: dict, own: dict, made):
    """The config of repaired fields, the sizes its class computes left to it where the validators
    refused the first try (LW-DETR's image size, repaired, then its projector's channels), else made."""
    try:
        return cls.from_dict(_recomputed(cls, d, own))
    except Exception:
        return made


def _recomputed(cls, d: dict, own: dict) -> dict:
    """d with the sizes its class computes from others handed back to it: a field declared "auto"
    (Bamba's mamba_d_head: mamba_expand x hidden_size / mamba_n_heads) set to "auto", an integer (or
    a list) that is no declared field but which the class sets itself (D-FINE's head_dim, Zamba 2's
    mamba_headdim, LW-DETR's projector_in_channels, EfficientLoFTR's channels per block: computed in
    __post_init__, where a key passed back would overwrite them) dropped, and a field declared None
    that the shrinking left at a full size over BIG, which the
    class computes when unset (Zamba's attention_hidden_size: 2 x hidden_size), unset. The
    config's own values of these came from its full sizes, which no longer hold."""
    import dataclasses

    if not dataclasses.is_dataclass(cls):
        return d
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    out = {k: "auto" if fields.get(k) == "auto" else v for k, v in d.items()}
    # a field stored under the name its alias maps to (OmDet-Turbo's encoder_hidden_dim as d_model) is declared
    aliases = {*cls.attribute_map, *cls.attribute_map.values()}
    # (an image's size is the shrinking's own choice, not a size left from the full config: Sam3's
    # tracker sets its 1008 in __post_init__ when unset, kept at 32)
    extra = [
        k for k, v in out.items() if k not in fields and _computed(v) and k not in aliases and not IMAGE_KEYS.search(k)
    ]
    # a size left at its full value that the class computes when unset (Zamba's attention_hidden_size)
    unset = [k for k, v in out.items() if fields.get(k, 0) is None and _int(v) > BIG and own.get(k) == v]
    if not extra and not unset:
        return out
    bare = {k: None if k in unset else v for k, v in out.items() if k not in extra}
    try:
        made = cls.from_dict(dict(bare))
    except Exception:  # the validators' say on the bare dict: left to the repairs
        return out
    kept = {}
    for k, v in out.items():
        if k in extra and hasattr(made, k):
            continue  # the class sets it
        kept[k] = None if k in unset and getattr(made, k, None) is not None else v
    return kept


def _computed(v) -> bool:
    """A value a class may compute from its fields: an integer, or a list (LW-DETR's
    projector_in_channels and num_feature_levels, one a feature level, empty with none)."""
    return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, (list, tuple))


def _moves(d: dict, own: dict, message: str):
    """(path, value) moves on the fields `message` names, restorations first."""
    named = [(p, v) for p, v in _leaves(d) if any(_names(message, name) for name in {p, p.rsplit(".", 1)[-1]})]
    for path, value in named:
        old, key = _get(own, path), path.rsplit(".", 1)[-1]
        if old is None or old == value:
            continue
        if IMAGE_KEYS.search(key):  # an image no larger than needed: the validator's multiple, or the old's type
            yield from ((path, [v] * len(old) if isinstance(old, (list, tuple)) else v) for v in IMAGE_LADDER)
        elif not (WIDTH_KEYS.match(key) and _int(old) > BIG):
            yield path, old
    for path, value in named:
        if _int(value) and _get(own, path) == value:
            yield from ((path, v) for v in LADDER if v != value)


def _names(message: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", message) is not None


def _shape(message: str) -> str:
    """A refusal without its numbers: a move that only changes a number in it is no step on."""
    return re.sub(r"\d+", "#", message)


def _int(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _leaves(d: dict, prefix: str = ""):
    for k, v in d.items():
        if _is_sub(v, k):
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def _get(d: dict, path: str):
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def _with(d: dict, path: str, value) -> dict:
    """A copy of d with the field at path set."""
    out = copy.deepcopy(d)
    _apply_hints(out, {path: value})
    return out


def tiny_config(model_type: str, fields: dict | None = None, kv_equal: bool = False):
    """The tiny config of model_type: from config.json fields when given (a checkpoint's
    structure), else from the config class's defaults; kv_equal: as many key heads as query heads
    (a model whose forward needs them so: DeepSeek-V3's latent attention)."""
    import transformers

    fields = {k: _special_floats(v) for k, v in (fields or DEFAULTS.get(model_type, {})).items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(model_type, **fields)
    return shrink(config, kv_equal)


# config.json fields of a type whose config class's defaults its own validators refuse: the Gemma 4
# assistant's text config has per-layer inputs, a MoE block and layers of their own keys by default, its
# checkpoints none (so built, its forward asks for its main model's keys: a type with dot-product attention
# that cannot run alone, not one without attention)
DEFAULTS = {
    "gemma4_assistant": {
        "text_config": {
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0,
            "enable_moe_block": False,
            "num_kv_shared_layers": 30,
            "num_hidden_layers": 30,
        }
    }
}
SPECIAL_FLOATS = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}


def _special_floats(v):
    """v with the floats config.json cannot hold as numbers read back: transformers writes them
    {"__float__": "Infinity"} (Bamba's and the other Mamba-2 hybrids' time_step_limit [0.0, inf])."""
    if isinstance(v, dict):
        if set(v) == {"__float__"} and v["__float__"] in SPECIAL_FLOATS:
            return SPECIAL_FLOATS[v["__float__"]]
        return {k: _special_floats(x) for k, x in v.items()}
    return [_special_floats(x) for x in v] if isinstance(v, list) else v


MISSING = re.compile(r"'(\w+Config)' object has no attribute '(\w+)'")


def filled(config, error: Exception) -> bool:
    """Give the config object an AttributeError names the field it lacks, where the field's
    meaning fixes a value (a dropout or layerdrop 0, initializer_range 0.02, rope_theta 10000, key heads as
    many as query heads, a shared expert's FFN as wide as the others'): transformers reads some
    fields a config class does not define (DBRX's attention config, T5Gemma 2's text config).
    Whether one was given."""
    m = MISSING.search(str(error)) if isinstance(error, AttributeError) else None
    if m is None:
        return False
    owner, field = m.groups()
    for c in _configs(config):
        if type(c).__name__ != owner or hasattr(c, field):
            continue
        if "drop" in field:  # dropout, layerdrop, drop_path_rate: probabilities, off
            value = 0.0
        elif field == "initializer_range":
            value = 0.02
        elif field == "rope_theta":
            value = 10000.0
        elif KV_KEYS.fullmatch(field) and isinstance(heads := _heads_of(c), int):
            value = heads
        elif field.endswith("intermediate_size") and isinstance(getattr(c, "intermediate_size", None), int):
            value = c.intermediate_size
        elif (value := _sibling_field(config, field)) is None:
            return False
        setattr(c, field, value)
        return True
    return False


def _sibling_field(config, field: str):
    """The value another config of the model gives an int field, where one does (Qwen3-Omni's
    talker reads spatial_merge_size, which only its vision config states, 2 in the checkpoint's
    talker config too); else None."""
    values = {getattr(c, field) for c in _configs(config) if isinstance(getattr(c, field, None), int)}
    return values.pop() if len(values) == 1 else None


def _heads_of(config):
    return next(
        (getattr(config, k) for k in ("num_attention_heads", "n_head", "num_heads") if hasattr(config, k)), None
    )


def _configs(config) -> list:
    """config and every config nested in it."""
    from transformers import PretrainedConfig

    out, todo = [], [config]
    while todo:
        c = todo.pop()
        out.append(c)
        todo += [v for v in vars(c).values() if isinstance(v, PretrainedConfig)]
    return out
