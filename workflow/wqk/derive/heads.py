"""Which config field sets the head counts an attention call shows.

The tiny config gives every head-count field a value of its own (shrink.HEAD_COUNTS), so the count
seen in the forward names one field of the attention's own config (the config of the innermost
model or module around it that has one), reached from the root config by a dotted path
("text_config.num_attention_heads").
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from ..adapters.common import kv_producer, layer_overrides
from .calls import Underivable
from .trace import ModuleCall, Trace

HEADS = re.compile(r"head")
KV = re.compile(r"(key_value|kv|query_group|multi_query|n_head_kv)")
STACK = re.compile(r"^(encoder|decoder|vision|text|audio)_")


def config_path(root, target, prefix: str = "") -> str | None:
    """The dotted path from config root to the config object target ("" for root itself)."""
    from transformers import PretrainedConfig

    if target is root:
        return prefix
    for key, value in vars(root).items():
        if isinstance(value, PretrainedConfig):
            found = config_path(value, target, f"{prefix}{key}.")
            if found is not None:
                return found
    return None


def _owner_config(trace: Trace, call: ModuleCall, root):
    """The config of the innermost module at or around the call that holds one."""
    from transformers import PretrainedConfig

    index = call.index
    while index is not None:
        c = trace.calls[index]
        config = getattr(c.module, "config", None)
        if isinstance(config, PretrainedConfig) and config_path(root, config) is not None:
            return config
        index = c.parent
    return root


def _int_field(v) -> bool:
    """An integer field, not a flag (bool is an int)."""
    return isinstance(v, int) and not isinstance(v, bool)


def _keys_equal(own: dict, value: int, pattern: re.Pattern, exclude: re.Pattern | None = None) -> list[str]:
    return [
        k
        for k, v in own.items()
        if _int_field(v) and v == value and pattern.search(k) and not (exclude and exclude.search(k))
    ]


def _in_dicts(own: dict) -> dict:
    """The fields of plain dicts among own's, by dotted key (FastSpeech 2's encoder_config and
    decoder_config, which its modules read their head counts from, config.json beside the flat
    fields they were made from)."""
    return {f"{k}.{sk}": sv for k, v in own.items() if isinstance(v, dict) for sk, sv in v.items()}


def _lists_holding(own: dict, value: int, exclude: re.Pattern | None = None) -> list[tuple[str, list]]:
    return [
        (k, list(v))
        for k, v in own.items()
        if isinstance(v, (list, tuple)) and value in v and HEADS.search(k) and not (exclude and exclude.search(k))
    ]


def _of_stack(found: list[str], call_name: str) -> list[str]:
    """Of several equal fields, the one of the stack the call sits in (Moonshine's decoder_ field for
    decoder.layers.0.self_attn; a cross_ field for a cross-attention), where exactly one names it: Moonshine's encoder layers write their
    counts into the shared config, and its decoder is built with them (so the tiny model, as a real
    one, has as many heads in both)."""
    if len(found) < 2:
        return found
    parts = set(call_name.split("."))
    own = [k for k in found if STACK.match(k) and STACK.match(k).group(1) in parts]
    if len(own) != 1:  # Dia's decoder: cross_num_key_value_heads for its cross-attention, the others elsewhere
        own = [k for k in found if k.startswith("cross_") == ("cross" in call_name)]
    return own if len(own) == 1 else found


UNTOLD = (
    "which no record field names and one tiny model cannot tell from a constant, or reads a field whose name "
    "says no head count"
)
RATIO = re.compile(r"head.*ratio|ratio.*head")


def _by_ratio(own: dict, heads: int) -> tuple[str, str] | None:
    """(heads key, ratio key) where one head-count field divided by one head-ratio field is the count
    seen, and no other pair is (ConvBERT: num_attention_heads // head_ratio)."""
    ratios = [k for k, v in own.items() if RATIO.search(k) and _int_field(v) and v > 1]
    counts = [
        k for k, v in own.items() if HEADS.search(k) and not RATIO.search(k) and not KV.search(k) and _int_field(v)
    ]
    pairs = [(h, r) for h in counts for r in ratios if own[h] // own[r] == heads]
    return pairs[0] if len(pairs) == 1 else None


DIVIDED = re.compile(r"config\.(\w+)\s*//\s*(\d+)\b")


def _init_sources(trace: Trace, call: ModuleCall) -> list[str]:
    """The __init__ code of the attention module's class and of the two modules around it, where a
    count the code computes is written (BridgeTower's residual block builds its
    nn.MultiheadAttention of config.hidden_size // 64 heads)."""
    import inspect

    codes, index = [], call.index
    while index is not None and len(codes) < 3:
        c = trace.calls[index]
        try:
            codes.append(inspect.getsource(type(c.module).__init__))
        except (OSError, TypeError):
            pass
        index = c.parent
    return codes


def _divided_in_code(own: dict, heads: int, sources: list[str]) -> tuple[str, int] | None:
    """(key, divisor) where the code builds the attention with config.key // divisor heads, the
    count seen, and with no other such count (BridgeTower: hidden_size // 64; Grounding DINO's
    text enhancer and fusion: encoder_attention_heads // 2)."""
    found = {
        (k, int(d))
        for code in sources
        for k, d in DIVIDED.findall(code)
        if int(d) > 1 and _int_field(own.get(k)) and own[k] // int(d) == heads
    }
    return found.pop() if len(found) == 1 else None


def names_no_heads(cls) -> bool:
    """Whether an attention module's code (its __init__ and forward) names no head count: a single
    head fixed by the architecture (GroupViT's assignment, WavTokenizer's 1x1-convolution attention),
    not one that a width gives (BridgeTower's nn.MultiheadAttention of hidden_size // 64 heads)."""
    import inspect

    try:
        code = inspect.getsource(cls.__init__) + inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False
    return HEADS.search(code.lower()) is None


def _names_heads(own: dict) -> bool:
    return any(HEADS.search(k) for k in own)


def _fields(config, module) -> dict:
    """The config's fields as the attention module reads them: transformers' per-layer overrides
    for its layer (per_layer_config[layer_idx]: EmbeddingGemma 2's and Gemma 4's full-attention
    layers, with key heads of their own) over the config's own."""
    own = config.to_dict()
    return {**own, **layer_overrides(own, getattr(module, "layer_idx", None))}


class HeadKeys(NamedTuple):
    """The config keys of one attention's head counts."""

    heads: str | None = None  # None: no field states it (the record's heads_default)
    kv: str | None = None  # None: as many key heads as query heads, or multi_query
    multi_query: bool = False
    heads_list: list | None = None  # counts per stage or layer where heads names a list (Swin's, Laguna's)
    heads_ratio: str | None = None  # the key heads' count is divided by (ConvBERT's head_ratio)
    kv_list: list | None = None  # key heads per layer where kv names a list (Sapiens2's)
    groups: tuple[str, str] = ()  # the query's and key's group counts of grouped 1x1 convolutions (SqueezeBERT's)
    layer_flags: dict | None = None  # the config's per-layer lists of flags, by key (Llama 4's no_rope_layers)
    kv_shared: str | None = None  # the count of last layers that reuse an earlier layer's keys (Gemma 3n's)
    kv_from_weight: bool = False  # no field states the key heads: the k weight's rows do (MiMo-V2-Flash's)
    layer_lists: dict | None = None  # the config's per-stage or per-layer lists of values, by key (PVT's sr_ratios)


def head_keys(trace: Trace, root):
    """A function (attention call, heads, kv heads) -> HeadKeys."""

    def keys(call: ModuleCall, heads: int, kv: int, groups: tuple[int, int] = (1, 1), producer: int | None = None):
        if type(call.module).__module__.startswith("timm.") and kv == heads and groups == (1, 1):
            return HeadKeys()  # a timm model inside (TimmWrapper): its architecture fixes the count (heads_default)
        config = _owner_config(trace, call, root)
        path = config_path(root, config) or ""
        own = _fields(config, call.module)
        groups = tuple(_group_key(own, path, call.name, g) for g in groups) if groups != (1, 1) else ()
        sources = functools.partial(_init_sources, trace, call)
        return _head_counts(call, heads, kv, own, type(config).__name__, path, sources)._replace(
            groups=groups,
            layer_flags=_layer_flags(own, path),
            kv_shared=_kv_shared(own, path, call, producer),
            layer_lists=_layer_lists(own, path),
        )

    return keys


def _head_counts(
    call: ModuleCall, heads: int, kv: int, own: dict, name: str, path: str, sources=lambda: []
) -> HeadKeys:
    """The head counts' keys of one attention call in its owner config's fields own (the config
    class name, at path in the root's; sources: the code that builds the attention)."""
    found = _of_stack(_keys_equal(own, heads, HEADS, KV), call.name)
    if not found and heads == kv == 1 and names_no_heads(type(call.module)):
        # one head, fixed by the code (a VQ-VAE's attention block over all its channels,
        # Chameleon's): no field states it; the record carries it as heads_default
        return HeadKeys()
    if not found and kv == heads and (ratio := _by_ratio(own, heads)) is not None:
        return HeadKeys(path + ratio[0], heads_ratio=path + ratio[1])
    heads_list = None
    if not found and len(lists := _lists_holding(own, heads, KV)) == 1:
        found, heads_list = [lists[0][0]], lists[0][1]
    if not found and kv == heads and (divided := _divided_in_code(own, heads, sources())) is not None:
        return HeadKeys(path + divided[0], heads_ratio=divided[1])
    if not found:
        found = _of_stack(_keys_equal(_in_dicts(own), heads, HEADS, KV), call.name)
    _one_field(own, name, call.name, heads, found)
    kv_key, multi_query, kv_list, from_weight = _kv_key(own, name, call.name, heads, kv)
    return HeadKeys(
        path + found[0], path + kv_key if kv_key else None, multi_query, heads_list, None, kv_list,
        kv_from_weight=from_weight,
    )  # fmt: skip


KV_SHARED = re.compile(r"kv_shared|shared_kv")


def _kv_shared(own: dict, path: str, call: ModuleCall, producer: int | None) -> str | None:
    """The key of the count of last layers that reuse the keys of the last earlier layer of their
    kind (layer_types), where the config has one above 0 and it says of this call's layer what
    the forward did (producer: the layer whose keys it read, None: its own); raises where the
    call read another layer's keys and no such count says so."""
    layer = getattr(call.module, "layer_idx", None)
    keys = [k for k, v in own.items() if _int_field(v) and v > 0 and KV_SHARED.search(k)]
    fits = [
        k for k in keys if isinstance(layer, int) and kv_producer(own.get("layer_types"), own[k], layer) == producer
    ]
    if producer is not None and len(fits) != 1:
        raise Underivable(
            "layout",
            f"{call.name} reads the keys of layer {producer}, and no count of shared layers in the config "
            f"({keys or 'none'}) with its layer_types says so",
        )
    return path + fits[0] if fits and (producer is not None or len(fits) == len(keys) == 1) else None


GROUPS = re.compile(r"groups$")


def _layer_flags(own: dict, path: str) -> dict[str, list]:
    """The config's per-layer lists of flags (booleans or 0 and 1: Llama 4's no_rope_layers), by key."""
    return {k: v for k, v in _layer_lists(own, path).items() if all(isinstance(x, int) and x in (0, 1) for x in v)}


def _layer_lists(own: dict, path: str) -> dict[str, list]:
    """The config's lists of one integer or name per stage or layer (PVT's sr_ratios, SuperGlue's
    gnn_layers_types), by key."""
    return {
        path + k: list(v)
        for k, v in own.items()
        if isinstance(v, (list, tuple)) and len(v) > 1 and all(isinstance(x, (int, str)) for x in v)
    }


def _group_key(own: dict, path: str, call_name: str, groups: int) -> str:
    """The config key of a grouped projection's group count ("" where it has none): the one field
    ending in "groups" that holds it (the tiny config gives q_groups and k_groups counts of their own)."""
    if groups == 1:
        return ""
    found = _keys_equal(own, groups, GROUPS)
    if len(found) != 1:
        raise Underivable(
            "config", f"{call_name}: {groups} groups of a 1x1 convolution, held by {found or 'no field'} of its config"
        )
    return path + found[0]


def _one_field(own: dict, name: str, call_name: str, heads: int, found: list[str]) -> None:
    """Raises unless exactly one field of config class name's fields own holds the heads seen."""
    if not found and not _names_heads(own):
        raise Underivable(
            "config",
            f"{call_name}: its code sets its {heads} heads, and no field of {name} names a "
            "head count: a constant, or a count computed from a width in a way the code that builds the "
            "attention does not spell as config.field // n, which one tiny model cannot tell apart",
        )
    if not found:
        raise Underivable(
            "config",
            f"{call_name}: no head-count field of {name} equals the {heads} heads seen: its code computes them "
            f"other than as config.field // n in the code that builds the attention, {UNTOLD}",
        )
    if len(found) > 1:
        raise Underivable(
            "config", f"{call_name}: {len(found)} head-count fields of {name} equal the {heads} heads seen ({found})"
        )


def _kv_key(own: dict, name: str, call_name: str, heads: int, kv: int) -> tuple[str | None, bool, list | None, bool]:
    """(kv key or None, multi_query, the key heads per layer where the key names a list, whether the
    k weight's rows tell them): a list is read even where a layer has as many key heads as query heads
    (Sapiens2's first and last layers), so that every layer reads the same key; where no field holds
    the count (MiMo-V2-Flash's sliding layers: num_key_value_heads * 2 in its code), the weight."""
    lists = [(k, v) for k, v in _lists_holding(own, kv) if KV.search(k)]
    if len(lists) == 1:
        return lists[0][0], False, lists[0][1], False
    if kv == heads:
        return None, False, None, False
    kv_found = _of_stack(_keys_equal(own, kv, KV), call_name)
    if len(kv_found) == 1:
        return kv_found[0], False, None, False
    if kv == 1:
        return None, True, None, False
    if heads % kv == 0:
        return None, False, None, True
    raise Underivable(
        "config",
        f"{call_name}: no key-head field of {name} equals the {kv} key heads seen, and the {heads} query heads "
        f"do not share them evenly: its code computes them, {UNTOLD}",
    )
