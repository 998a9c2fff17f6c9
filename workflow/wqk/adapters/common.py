"""Helpers shared by the adapters: config lookup, tensor-name templates, head splitting.

A template names one layer's weight with `{i}` for the layer number and, where q and k are
separate tensors, `{p}` for the projection, e.g. "model.layers.{i}.self_attn.{p}.weight"
with qk=("q_proj", "k_proj"). Layers are counted from the weights found, never from config
fields that may alias or miss layers.

Everything here reshapes, transposes or slices the stored tensors and nothing else: the
blocks keep the checkpoint's dtype (float32, float16 or bfloat16 alike).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import torch

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from ..errors import CorruptCheckpoint, MissingTensor

_NO_DEFAULT = object()


def config_get(ckpt: Checkpoint, *keys: str, default=_NO_DEFAULT):
    """The first non-null config field among keys; dotted keys walk sub-dicts
    ("vision_config.num_attention_heads"). Families spell the same thing differently
    (num_attention_heads, n_head, n_heads, num_heads, encoder_attention_heads): config.json
    holds the family's own spelling, not transformers' attribute aliases."""
    for key in keys:
        node = ckpt.config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return node
    if default is not _NO_DEFAULT:
        return default
    raise CorruptCheckpoint(
        f"{ckpt.model_id}: config.json (model_type {ckpt.model_type!r}) has none of {list(keys)}; "
        "add the field to config.json or check that the model_type is right"
    )


def linear_heads(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """nn.Linear weight [n_heads*k, d] (out, in) -> per-head factors [n_heads, d, k].

    A view, not a copy: scoring works on the transposes [n_heads, k, d], which are then
    the weight's own contiguous rows."""
    out, d = weight.shape
    if out % n_heads:
        raise ValueError(f"projection with {out} outputs cannot be split into {n_heads} heads")
    return weight.reshape(n_heads, out // n_heads, d).transpose(1, 2)


def conv1d_heads(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """GPT-2 style Conv1D weight [d, n_heads*k] (in, out) -> [n_heads, d, k]."""
    return linear_heads(weight.T, n_heads)


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
    """
    n_kv = n_kv_heads or n_heads
    out, d = weight.shape
    if out % (n_heads + 2 * n_kv):
        raise ValueError(f"fused weight with {out} rows cannot hold q, k, v of {n_heads} + 2 x {n_kv} heads")
    k = out // (n_heads + 2 * n_kv)
    if layout == "blocks":
        return weight[: n_heads * k], weight[n_heads * k : (n_heads + n_kv) * k]
    if layout == "per_head" and n_kv == n_heads:
        w = weight.reshape(n_heads, 3, k, d)
        return w[:, 0].reshape(n_heads * k, d), w[:, 1].reshape(n_heads * k, d)
    raise ValueError(f"unknown fused layout {layout!r} for {n_heads} query and {n_kv} key heads")


def layer_indices(ckpt: Checkpoint, pattern: str) -> list:
    """Layer numbers present in the weights for a regex with one group, e.g.
    r"encoder\\.layer\\.(\\d+)\\.attention\\.self\\.query\\.weight"; with several groups,
    the sorted tuples of numbers (ALBERT's (group, layer), Swin's (stage, block))."""
    rx = re.compile(pattern)
    found = {tuple(int(g) for g in m.groups()) for n in ckpt.store.names() if (m := rx.fullmatch(n))}
    if not found:
        raise MissingTensor(
            f"{ckpt.model_id}: no tensor matches {pattern!r} (model_type {ckpt.model_type!r}); "
            "is this the right architecture, or a checkpoint with renamed weights?"
        )
    return sorted(t[0] if rx.groups == 1 else t for t in found)


def find_prefix(ckpt: Checkpoint, prefixes, probe: str, required: bool = True) -> str | None:
    """The first prefix p in prefixes (plain strings) such that p + probe (a regex) matches a
    tensor name: checkpoints saved from a task head carry e.g. 'bert.' before the base
    model's names. None if there is none and not required."""
    names = ckpt.store.names()
    for p in prefixes:
        rx = re.compile(re.escape(p) + probe)
        if any(rx.fullmatch(n) for n in names):
            return p
    if not required:
        return None
    raise MissingTensor(f"{ckpt.model_id}: none of {[p + probe for p in prefixes]} found among {len(names)} tensors")


def template_regex(template: str, qk: tuple[str, str] = ("q_proj", "k_proj")) -> str:
    """'x.{i}.{p}.weight' -> regex with the layer as group 1 and {p} matching q or k."""
    rx = re.escape(template).replace(re.escape("{i}"), r"(\d+)")
    return rx.replace(re.escape("{p}"), "(?:" + "|".join(re.escape(p) for p in qk) + ")")


def qk_stack(
    ckpt: Checkpoint,
    stack: str,
    template: str,
    n_heads: int,
    n_kv_heads: int | None = None,
    *,
    qk: tuple[str, str] = ("q_proj", "k_proj"),
    fused: str | None = None,
    conv1d: bool = False,
    prefixes=("",),
    first_layer: int = 0,
    required: bool = True,
) -> Iterator[AttentionBlock]:
    """The blocks of one stack, one per layer found under the first of prefixes that has it.

    Separate q and k weights: template holds {p}, filled with qk[0] and qk[1]; layers are
    those where q or k is found, so a layer missing one of them raises MissingTensor naming
    it. One fused q/k/v weight per layer: template has no {p} and fused is its fused_rows
    layout. conv1d: the weights are GPT-2 Conv1D [in, out] instead of nn.Linear [out, in].
    Layer numbers are first_layer + the number in the name. required=False: a stack absent
    from the weights (e.g. the decoder of an encoder-only export) yields nothing.
    Returns (as the value of `yield from`) the number of layers read.
    """
    probe = template_regex(template, qk)
    prefix = find_prefix(ckpt, prefixes, probe, required)
    if prefix is None:
        return 0
    layers = layer_indices(ckpt, re.escape(prefix) + probe)
    for i in layers:
        name = prefix + template.format(i=i, p="{p}")
        if fused is None:
            wq, wk = (ckpt.store.get(name.format(p=p)) for p in qk)
            wq, wk = (wq.T, wk.T) if conv1d else (wq, wk)
        else:
            w = ckpt.store.get(name)
            try:
                wq, wk = fused_rows(w.T if conv1d else w, n_heads, n_kv_heads, fused)
            except ValueError as e:
                raise CorruptCheckpoint(f"{ckpt.model_id}: {name} {tuple(w.shape)}: {e}") from None
        yield AttentionBlock(stack, first_layer + i, linear_heads(wq, n_heads), linear_heads(wk, n_kv_heads or n_heads))
    return len(layers)
