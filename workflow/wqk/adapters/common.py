"""Helpers of the record reader: config lookup and head splitting.

Everything here reshapes, transposes or slices the stored tensors and nothing else: the
blocks keep the checkpoint's dtype (float32, float16 or bfloat16 alike).
"""

from __future__ import annotations

import torch

from ..checkpoints import Checkpoint
from ..checkpoints.config_checks import FIX, head_count_problem
from ..errors import CorruptCheckpoint, HeadsDoNotFit

REQUIRED = object()  # config_get without a default: a missing field is an error


def config_get(ckpt: Checkpoint, *keys: str, default=REQUIRED, layer: int | None = None):
    """The first non-null config field among keys; dotted keys walk sub-dicts
    ("vision_config.num_attention_heads"). Families spell the same thing differently
    (num_attention_heads, n_head, n_heads, num_heads, encoder_attention_heads): config.json
    holds the family's own spelling, not transformers' attribute aliases. With a layer, that
    layer's override in transformers' per_layer_config beside the field wins (layer_overrides)."""
    for key in keys:
        parent, node = None, ckpt.config
        for part in key.split("."):
            parent, node = node, node.get(part) if isinstance(node, dict) else None
        node = layer_overrides(parent, layer).get(key.rpartition(".")[2], node)
        if node is not None:
            problem = head_count_problem(key, node, parent)  # a head count that no weight can have
            if problem is not None:
                raise CorruptCheckpoint(f"{ckpt.model_id} (model_type {ckpt.model_type!r}): {problem}; {FIX}")
            return node
    if default is not REQUIRED:
        return default
    raise CorruptCheckpoint(
        f"{ckpt.model_id}: config.json (model_type {ckpt.model_type!r}) has none of {list(keys)}; "
        "add the field to config.json or check that the model_type is right"
    )


def layer_overrides(config: dict | None, layer: int | None) -> dict:
    """A layer's fields that differ from the config's own: transformers' per_layer_config, by
    layer index (zero-padded in config.json: "05" once a model has ten layers); {} for none."""
    table = config.get("per_layer_config") if isinstance(config, dict) and layer is not None else None
    if not isinstance(table, dict):
        return {}
    return next((v for k, v in table.items() if str(k).isdigit() and int(k) == layer and isinstance(v, dict)), {})


def per_layer_list(ckpt: Checkpoint, key: str) -> list:
    """A per-layer list of the config; where config.json leaves it empty or out, the one that
    transformers' config class fills in from the other fields (Llama 4's no_rope_layers, from
    no_rope_layer_interval), where transformers knows the model_type."""
    value = config_get(ckpt, key, default=None)
    if value:
        return list(value)
    try:
        import transformers

        node = transformers.AutoConfig.for_model(ckpt.model_type, **_without_type(ckpt.config))
    except (ImportError, ValueError, TypeError) as e:
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: config.json (model_type {ckpt.model_type!r}) has no {key} and transformers "
            f"cannot fill it in ({e}); add the per-layer list to config.json"
        ) from None
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
    if not node:
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: config.json (model_type {ckpt.model_type!r}) has no {key}, nor does transformers' "
            "config class fill it in; add the per-layer list to config.json"
        )
    return list(node)


def _without_type(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "model_type"}


def linear_heads(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """nn.Linear weight [n_heads*k, d] (out, in) -> per-head factors [n_heads, d, k].

    A view, not a copy: scoring works on the transposes [n_heads, k, d], which are then
    the weight's own contiguous rows."""
    out, d = weight.shape
    if n_heads <= 0 or out % n_heads:
        raise HeadsDoNotFit(
            f"a q/k projection of shape {tuple(weight.shape)} ({out} outputs) cannot be split into {n_heads} heads"
        )
    return weight.reshape(n_heads, out // n_heads, d).transpose(1, 2)


SHARDS = 4  # CodeGen's model-parallel shards of its fused q/v/k weight (mp_num, fixed in its code)


SCALE_MAPS = {"identity": lambda t: t, "softplus": torch.nn.functional.softplus}  # Attention.scale_map


def kv_producer(layer_types, shared, layer: int) -> int | None:
    """The layer whose keys `layer` reads where the last `shared` layers reuse the keys of the last
    earlier layer of their kind in layer_types (Gemma 3n's and Gemma 4's num_kv_shared_layers);
    None where the layer reads its own."""
    if not isinstance(layer_types, (list, tuple)) or not isinstance(shared, int) or shared <= 0:
        return None
    first = len(layer_types) - shared
    if not 0 < first <= layer < len(layer_types):
        return None
    return next((j for j in range(first - 1, -1, -1) if layer_types[j] == layer_types[layer]), None)


def fused_heads(layout: str, n_heads: int, n_kv: int) -> int:
    """How many heads' rows a fused weight of the layout holds (q, k, v, and a gate's)."""
    return (2 * n_heads if layout == "gate_blocks" else n_heads) + 2 * n_kv


def fused_rows(
    weight: torch.Tensor, n_heads: int, n_kv_heads: int | None = None, layout: str = "blocks"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The q rows [H*k, d] and k rows [H_kv*k, d] of a fused nn.Linear weight [out, d] that
    holds the q, k and v projections.

    layout "blocks": [q | k | v] along the output dim, H*k, H_kv*k and H_kv*k rows (ModernBERT
        Wqkv, SAM qkv, nn.MultiheadAttention in_proj_weight, Phi-3 qkv_proj, GPT-2 c_attn
        once transposed).
    layout "per_head": [q_h k_h v_h] for each head h in turn (DeBERTa v1 in_proj, GPT-NeoX
        query_key_value): view as [H, 3, k, d]. Slicing the first H*k rows as q mixes q, k
        and v rows of different heads.
    layout "grouped": [q_{g,1..r} k_g v_g] for each key head g, r = H / H_kv query heads each
        (Falcon's new decoder architecture): view as [H_kv, r + 2, k, d].
    layout "qvk_shards": [q_s v_s k_s] for each of SHARDS model-parallel shards s, H*k / SHARDS
        rows each (CodeGen's qkv_proj, mp_num = 4; v before k): view as [SHARDS, 3, H*k / SHARDS, d].
    layout "gate_blocks": [g | q | k | v], an output gate's H*k rows before q (HRM's gqkv_proj,
        which transformers' conversion cuts into gate_proj, q_proj, k_proj and v_proj).
    """
    n_kv = n_kv_heads or n_heads
    out, d = weight.shape
    rows = fused_heads(layout, n_heads, n_kv)
    if n_heads <= 0 or n_kv <= 0 or out % rows:
        raise HeadsDoNotFit(
            f"fused weight with {out} rows cannot hold {'g, ' if layout == 'gate_blocks' else ''}q, k, v of "
            f"{rows - 2 * n_kv} + 2 x {n_kv} heads: check the head counts of config.json against it"
        )
    k = out // rows
    if layout == "blocks":
        return weight[: n_heads * k], weight[n_heads * k : (n_heads + n_kv) * k]
    if layout == "gate_blocks":
        return weight[n_heads * k : 2 * n_heads * k], weight[2 * n_heads * k : (2 * n_heads + n_kv) * k]
    if layout == "per_head" and n_kv == n_heads:
        w = weight.reshape(n_heads, 3, k, d)
        return w[:, 0].reshape(n_heads * k, d), w[:, 1].reshape(n_heads * k, d)
    if layout == "grouped" and n_heads % n_kv == 0:
        w = weight.reshape(n_kv, n_heads // n_kv + 2, k, d)
        return w[:, :-2].reshape(n_heads * k, d), w[:, -2].reshape(n_kv * k, d)
    if layout == "qvk_shards" and n_kv == n_heads and out % (3 * SHARDS) == 0:
        w = weight.reshape(SHARDS, 3, out // (3 * SHARDS), d)
        return w[:, 0].reshape(n_heads * k, d), w[:, 2].reshape(n_heads * k, d)
    raise ValueError(f"unknown fused layout {layout!r} for {n_heads} query and {n_kv} key heads")
