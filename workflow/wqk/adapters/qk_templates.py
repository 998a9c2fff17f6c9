"""Shared machinery for adapters that read q/k weights from per-layer name templates.

A template names one layer's tensor with `{i}` for the layer number, e.g.
"model.layers.{i}.self_attn.q_proj.weight". Layers are counted from the weights found.

`STACK_OBJECTIVES[model_type][stack]` records what each reported stack is, so that the
catalogue never has to guess from the word "decoder": several vision "decoders" (DETR,
Mask2Former, SAM) run bidirectional self-attention over object queries or tokens.
"""

from __future__ import annotations

import re
from typing import Iterator

import torch

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from ..errors import MissingTensor
from . import find_prefix, layer_indices, linear_heads

BI, AR = "bidirectional", "autoregressive"

# model_type -> stack -> objective of that stack's self-attention ("cross" is neither).
STACK_OBJECTIVES: dict[str, dict[str, str]] = {}


def objectives(model_type: str, **stacks: str) -> None:
    STACK_OBJECTIVES.setdefault(model_type, {}).update(stacks)


def template_regex(template: str) -> str:
    return re.escape(template).replace(r"\{i\}", r"(\d+)")


def cfg(config: dict, *keys: str, default=None):
    """The first of keys present (and not None) in a config dict; dotted keys walk sub-dicts."""
    for key in keys:
        node = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return node
    if default is not None:
        return default
    raise MissingTensor(f"config has none of {list(keys)}; is this checkpoint's config.json complete?")


def prefix_for(ckpt: Checkpoint, prefixes: list[str], template: str) -> str:
    return find_prefix(ckpt, [re.escape(p) for p in prefixes], template_regex(template)).replace("\\", "")


def linear_stack(
    ckpt: Checkpoint,
    stack: str,
    q_template: str,
    k_template: str,
    n_heads: int,
    n_kv_heads: int | None = None,
    prefixes: tuple[str, ...] = ("",),
    first_layer: int = 0,
) -> Iterator[AttentionBlock]:
    """Separate nn.Linear q and k projections ([out, in] weights), one pair per layer."""
    prefix = prefix_for(ckpt, list(prefixes), q_template)
    for i in layer_indices(ckpt, re.escape(prefix) + template_regex(q_template)):
        q = linear_heads(ckpt.store.get(prefix + q_template.format(i=i)), n_heads)
        k = linear_heads(ckpt.store.get(prefix + k_template.format(i=i)), n_kv_heads or n_heads)
        yield AttentionBlock(stack, first_layer + i, q, k)


def fused_rows(weight: torch.Tensor, n_heads: int, head_dim: int, parts: int, layout: str):
    """Split a fused nn.Linear weight [parts*H*k, d] into its parts, each [H*k, d].

    layout "blocks": [q | k | v] along the output dim, each part H*k rows (ModernBERT Wqkv,
        SAM qkv, nn.MultiheadAttention in_proj_weight).
    layout "per_head": [q_h k_h v_h] for each head h in turn (DeBERTa v1 in_proj,
        GPT-NeoX query_key_value): view as [H, parts, k, d].
    """
    out, d = weight.shape
    if out != parts * n_heads * head_dim:
        raise ValueError(f"fused weight with {out} rows is not {parts} x {n_heads} heads x {head_dim}")
    if layout == "blocks":
        return list(weight.reshape(parts, n_heads * head_dim, d).unbind(0))
    if layout == "per_head":
        w = weight.reshape(n_heads, parts, head_dim, d)
        return [w[:, p].reshape(n_heads * head_dim, d) for p in range(parts)]
    raise ValueError(f"unknown fused layout {layout!r}")
