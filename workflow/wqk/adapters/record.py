"""The declarative record of an architecture: every fact wqk knows about one model_type.

A `Record` says where each attention layer's q/k weights are (`Attention`: template, layout,
name prefixes, head counts, biases, the norm that feeds the attention), which stacks it
yields and their objectives (none where every Attention is cross-attention: CvT), its
rotary embedding (`Rotary`), where the paper authors' published code read it differently
(`Authors`) and the tiny random model that `wqk tiny` and the tests build (`Tiny`). Generic
code reads all of it: reader.py (q/k and extras, torch), rope.py (frequencies), authors.py,
tiny.py and the catalogue loader (objectives, at Snakemake parse time: this module imports
neither torch nor transformers).

Templates name one layer's tensor. `{p}` is the projection, filled with `qk[0]` (query)
and `qk[1]` (key); every other field (`{i}`, or ALBERT's `{g}` and `{j}`) is a number read
from the tensor names found. One field: the layer number is that number; several: layers
are the sorted tuples of numbers, numbered by rank (ALBERT's (group, layer), Swin's
(stage, block)). None: the template names one attention module outside any numbered layers
(MiniCPM-V's merger, Kosmos-2's image-to-text projection), one layer, numbered after the
layers of the stack's Attentions before it. A template starting with "^" is a name from the root, not under the
prefix (CTranslate2 names, MusicGen's text encoder seen from its decoder).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from ..contracts import OBJECTIVES, STACKS

BI, AR = OBJECTIVES  # "bidirectional", "autoregressive"
FUSED = ("blocks", "per_head", "grouped", "qvk_shards", "kv", "gate_blocks")
ROPE_LAYOUTS = ("half", "interleaved")
DERIVED = "derived"  # Attention.bias: the weight template with its last "weight" replaced by "bias"


def template_fields(template: str) -> tuple[str, ...]:
    """The numbered fields of a weight template, in order ({p} excluded)."""
    return tuple(f for _, f, _, _ in string.Formatter().parse(template) if f and f != "p")


@dataclass(frozen=True)
class Attention:
    """One set of attention layers of a stack (one template).

    weight: the q/k weight template. fused: None (separate q and k weights, `{p}` in the
      template), "blocks" (one q/k/v weight, rows [q | k | v]), "per_head" (rows
      [q_h k_h v_h] head after head: GPT-NeoX, DeBERTa v1), "grouped" (rows
      [q_{g,1..r} k_g v_g] per key head g, r = H / H_kv query heads each: Falcon's new decoder
      architecture), "qvk_shards" (rows [q_s v_s k_s] for each of 4 model-parallel shards s,
      H*k/4 rows each: CodeGen's mp_num = 4), "gate_blocks" (rows [g | q | k | v], an output gate's
      first: HRM's gqkv_proj), "kv" (q separate, qk[1] holds [k | v]: GPT-2 cross-attention). conv1d: GPT-2 Conv1D weights [in, out], not
      nn.Linear [out, in]. groups: the config keys of the query's and the key's group counts where
      q and k are grouped 1x1 convolutions (SqueezeBERT's q_groups, k_groups: block-diagonal
      weights stored [out, in / groups, 1]), "" for a side that is not grouped.
    prefixes: tried in order; the first under which the weight exists is used.
    heads, kv_heads: config keys (dotted for sub-configs) tried in order; kv_heads empty:
      as many key heads as query heads; heads_default where the config may lack them; a layer's
      override in the config's per_layer_config (transformers' heterogeneous configs: EmbeddingGemma
      2's full-attention layers' key heads) wins for the layer the template's {i} numbers;
      heads_by: the template field indexing a per-stage list of head counts (Swin: "s") or a
      per-layer one ("i": Laguna's query heads, Sapiens2's key heads), whichever of the two keys names a list;
      heads_ratio: a config key the heads key's count is divided by (ConvBERT: num_attention_heads //
      head_ratio heads, at least 1), or a constant the code divides it by (BridgeTower's vision
      tower: hidden_size // 64; Grounding DINO's text enhancer: encoder_attention_heads // 2);
      multi_query: one key head shared by every query head, whatever the config's counts say
      (multi-query attention: GPT-BigCode, Falcon-7B). kv_heads_from_weight: a layer's key heads are
      as many as its k weight holds (its rows over the query heads' width), where the code computes
      them from no field alone (MiMo-V2-Flash's sliding layers: twice num_key_value_heads);
      separate q and k weights only.
    bias: the bias template (DERIVED: from the weight's; None: no bias); q_bias: a query
      bias of its own next to a fused weight without bias (DeBERTa v1).
    q_gate: each head's query rows are followed by as many rows of an output gate, [q_h g_h]
      head after head (Qwen3-Next's and Qwen3.5's gated attention): the q rows are read.
    norm: the gain of the norm whose output feeds the queries (and, in self-attention, the
      keys), read only when pre_norm (a bool, or the config flag that says it); first_norm:
      layer 0's when its own norm is an identity (ModernBERT). k_norm: cross-attention, the
      gain of the norm whose output the keys read, unless k_norm_unless exists (a
      projection between); its field {last} is the highest number the checkpoint has there
      (an encoder's output, its last layer's norm: Canary's norm_out).
    gain_offset: the norms' gain is gain_offset + the stored weight (Gemma's RMSNorm scales by
      1 + w: 1.0), for norm, first_norm, k_norm and qk_norm alike.
    norm_centred: whether that norm is a LayerNorm (its output centred) rather than an RMSNorm;
      None: a LayerNorm where its weight has a bias beside it (a LayerNorm without bias, as
      Cohere's and ModernBERT's, says True).
    qk_norm: the (query, key) gain templates of a QK-norm, a norm of each token's projected
      queries and keys before the scores (Qwen3, OLMo-2, Gemma 3): the logits are then not a
      bilinear form of the token vectors. The reader folds the gains into the factors
      (Q_h' = Q_h diag(g_q,h), K_h' = K_h diag(g_k,h)) and marks the blocks
      form="qk_norm_gain_folded": the norm's per-token scaling (a positive scalar per query
      and per key token) is left out. A gain of head_dim values is shared by the heads, one of
      heads * head_dim is per head (OLMo-2's norm over the whole projection, Cohere's
      [heads, head_dim]); a template with {h} names one tensor per head (StableLM). Absent
      tensors (a config without the norm: Cohere's use_qk_norm false): plain bilinear blocks.
      qk_norm_centred: the norm is a LayerNorm over each head (Cohere, StableLM): its mean
      subtraction, linear, is folded too (Q_h' = Q_h (I - 11^T / head_dim) diag(g));
      "projection": a LayerNorm over the whole projection, all heads together (ESMC): the mean
      over every head's columns is subtracted.
    qk_norm_unit: a QK-norm without a gain (NanoChat's and Llama 4's weightless RMSNorm, an L2
      norm): the blocks are marked "qk_norm_gain_folded" with a unit gain (qk_norm None).
    qk_norm_layers: (config key, template field) where only some layers have it: the per-layer list
      the field's value indexes is true at those (Llama 4's no_rope_layers: its NoPE layers have no
      QK-norm); config.json may leave the list to transformers' config class (Llama 4's empty one).
    as_decoder: config flag that files the stack as "decoder" (a BERT trained causally).
    required: False where the stack may be absent (an encoder-only export yields no decoder).
    alternative: read only when the previous Attention of the same stack found nothing (ViT's
      two name layouts); otherwise the layers of several Attentions of one stack are numbered
      one after the other (Mllama's local, then global vision layers).
    interleave: (k, n): this is the k-th of n Attentions (listed one after the other) whose
      layers alternate in the forward, layer by layer (SAM's two-way transformer: token to
      image, then image to token, in each layer): its i-th layer is numbered base + n * i + k,
      base where the stack's layers so far end; the n together end at base + n * layers.
      A template without a numbered field names one layer (SAM's final token-to-image attention).
    only_if: code, where the config decides whether the stack is read (Mask2Former's backbone).
    q_scale: a parameter that scales the queries' columns after their projection (TimesFM's
      softplus of its `scaling`, head_dim values shared by the heads, or one per head's column),
      folded into q (and its bias) as a QK-norm's gain is, through scale_map ("identity",
      "softplus"); the form stays bilinear (no per-token normalisation).
    kv_shared: config key of the count of last layers that reuse the keys of the last earlier
      layer of their kind in the config's layer_types (Gemma 3n's and Gemma 4's num_kv_shared_layers;
      such a layer holds no k_proj that runs, or none at all): their keys' tensors (weight, bias,
      QK-norm gain) are read from that layer (common.kv_producer).
    layer_if: (config key, template field, "==" or "!=", value): the template's layers read are
      those where the config's per-stage or per-layer list, at the field's value, equals the value
      (or differs from it), where two stacks' templates name the same tensors: PVT's and SegFormer's
      stages that reduce no keys (sr_ratios 1) hold self-attention, the others attend to reduced
      keys (cross); SuperGlue's layers alternate self- and cross-attention (gnn_layers_types).
      The config may leave the list to transformers' config class.
    single: one block whose names number no layer (a VQ-VAE's lone middle attention,
      encoder.mid.attn_1): the template has no field, and reads one layer.
    """

    stack: str
    weight: str
    qk: tuple[str, str] = ("q_proj", "k_proj")
    fused: str | None = None
    conv1d: bool = False
    prefixes: tuple[str, ...] = ("",)
    heads: tuple[str, ...] = ("num_attention_heads",)
    kv_heads: tuple[str, ...] = ()
    heads_default: int | None = None
    heads_by: str | None = None
    heads_ratio: str | int | None = None
    multi_query: bool = False
    kv_heads_from_weight: bool = False
    layer_if: tuple | None = None
    bias: str | None = DERIVED
    q_bias: str | None = None
    q_gate: bool = False
    norm: str | None = None
    first_norm: str | None = None
    pre_norm: bool | str = True
    k_norm: str | None = None
    k_norm_unless: str | None = None
    gain_offset: float = 0.0
    norm_centred: bool | None = None
    qk_norm: tuple[str, str] | None = None
    qk_norm_centred: bool | str = False
    qk_norm_unit: bool = False
    qk_norm_layers: tuple[str, str] | None = None
    as_decoder: str | None = None
    required: bool = True
    alternative: bool = False
    only_if: Callable[[dict], bool] | None = None
    single: bool = False
    interleave: tuple[int, int] | None = None
    groups: tuple[str, str] = ()
    kv_shared: str | None = None
    q_scale: str | None = None
    scale_map: str = "identity"

    def __post_init__(self):
        if self.stack not in STACKS:
            raise ValueError(f"Attention {self.weight!r}: stack {self.stack!r} is not one of {STACKS}")
        if self.fused not in (None, *FUSED):
            raise ValueError(f"Attention {self.weight!r}: fused {self.fused!r} is not None or one of {FUSED}")
        has_p = "{p}" in self.weight
        if has_p != (self.fused in (None, "kv")):
            raise ValueError(
                f"Attention {self.weight!r}: separate q/k weights (fused None or 'kv') need {{p}} in the "
                "template, a fused q/k/v weight none"
            )
        if not self.fields and not self.single:
            raise ValueError(f"Attention {self.weight!r}: the template numbers no layer (add {{i}})")
        if self.interleave is not None and not 0 <= self.interleave[0] < self.interleave[1]:
            raise ValueError(f"Attention {self.weight!r}: interleave {self.interleave} is not (k, n), 0 <= k < n")

    @property
    def fields(self) -> tuple[str, ...]:
        """The numbered fields of the weight template, in order ({p} excluded)."""
        return template_fields(self.weight)

    @property
    def stacks(self) -> set[str]:
        return {self.stack, "decoder"} if self.as_decoder else {self.stack}

    @property
    def bias_template(self) -> str | None:
        if self.bias != DERIVED:
            return self.bias
        head, sep, tail = self.weight.rpartition("weight")
        return head + "bias" + tail if sep else None


@dataclass(frozen=True)
class Rotary:
    """The rotary embedding: layout "half" (rotate_half) or "interleaved" (rotate_every_two),
    the transformers model_type whose config class reads config.json (family), its
    RotaryEmbedding class (None: GPT-J's fixed formula), the stack it acts in and the
    sub-config of that stack (Mllama: text_config). per_layer_type: the rotary holds
    frequencies per config.layer_types entry (ModernBERT's global and local layers).
    by_hand: an unscaled rope is transformers' default formula on head_dim (times
    partial_rotary_factor), computed here without importing transformers (Llama's family).
    only_if: code, where the config decides whether the model rotates at all (Falcon: rotary
    unless config.alibi). module: the transformers.models package holding rotary_class where it
    is not the family (Gemma 3's text model: family "gemma3_text", module "gemma3"). also: the
    other stacks it acts in (an encoder-decoder that rotates both)."""

    family: str
    rotary_class: str | None
    layout: str = "half"
    stack: str = "decoder"
    sub: str | None = None
    per_layer_type: bool = False
    by_hand: bool = False
    only_if: Callable[[dict], bool] | None = None
    module: str | None = None
    also: tuple[str, ...] = ()

    def __post_init__(self):
        if self.layout not in ROPE_LAYOUTS:
            raise ValueError(f"Rotary {self.family}: layout {self.layout!r} is not one of {ROPE_LAYOUTS}")


@dataclass(frozen=True)
class Authors:
    """Where the paper authors' code (`--method authors`) read the model differently.

    untransposed: the fused q/k/v weight read as W[:d] @ W[d:2d].T (no transpose; wrong
      slices for a "per_head" layout). stacks: exact stack -> the stack their code filed it
      under (None: not read), e.g. MusicGen {"decoder": None, "cross": "decoder"}.
    layers: stack -> (config key, default): layers at or past that count were not read.
    """

    untransposed: bool = False
    stacks: dict[str, str | None] = field(default_factory=dict)
    layers: dict[str, tuple[str, int | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Tiny:
    """The tiny random model: transformers class saved (a task head, so that names carry
    the prefixes of hub checkpoints) and config kwargs. family: the transformers model_type
    whose config class builds it, where the record's model_type is not one (remote code such
    as MobileLLM): the saved config.json is then relabelled with the record's model_type."""

    architecture: str
    config: dict
    family: str | None = None


@dataclass(frozen=True, eq=False)
class Record:
    """Everything about one model_type; see the module docstring and README, "Adding a model".

    formats: source format (a config's "_source_format") -> the Attentions of that format,
    where the names differ from the Hugging Face ones (CTranslate2 Whisper)."""

    model_type: str
    attention: tuple[Attention, ...]
    objectives: dict[str, str]
    rope: Rotary | None = None
    authors: Authors = Authors()
    tiny: Tiny | None = None
    formats: dict[str, tuple[Attention, ...]] = field(default_factory=dict)

    def __post_init__(self):
        where = f"record {self.model_type!r}"
        if not self.attention:
            raise ValueError(f"{where}: no Attention")
        bad = {s: o for s, o in self.objectives.items() if s not in STACKS or s == "cross" or o not in OBJECTIVES}
        if bad:  # none where every Attention is cross-attention (CvT, a perceiver's resampler)
            raise ValueError(
                f"{where}: objectives {bad} are not stack=objective for the self-attention "
                f"stacks (encoder, decoder), objective in {OBJECTIVES}"
            )
        for attention in (self.attention, *self.formats.values()):
            yielded = set().union(*(a.stacks for a in attention)) - {"cross"}
            if yielded != set(self.objectives):
                raise ValueError(
                    f"{where}: objectives are declared for {sorted(self.objectives)}, the Attentions yield "
                    f"self-attention stacks {sorted(yielded)}; declare one objective per self-attention stack"
                )

    def attentions(self, source_format: str | None = None) -> tuple[Attention, ...]:
        return self.formats.get(source_format or "", self.attention)


def template_regex(template: str, qk: tuple[str, str]) -> str:
    """A template as a regex: one (\\d+) group per numbered field, {p} matching either projection name."""
    out = []
    for literal, fld, _, _ in string.Formatter().parse(template):
        out.append(re.escape(literal))
        if fld == "p":
            out.append("(?:" + "|".join(re.escape(p) for p in qk) + ")")
        elif fld:
            out.append(r"(\d+)")
    return "".join(out)
