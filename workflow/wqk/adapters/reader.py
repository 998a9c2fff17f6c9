"""The generic reader of records: a checkpoint's attention blocks (q, k) and their extras
(q/k biases, pre-norm gains, rotary embedding), from its model_type's Record alone.

`locate` finds, from the tensor names only, where every block of the checkpoint is (`Site`:
its Attention, stack, layer, name prefix and template fields); `read_blocks` reads one
layer's q/k weights at a time; `with_extras` fills in the extras of any block stream.
Everything here reshapes, transposes or slices the stored tensors, and keeps their dtype,
except a QK-norm's gains, folded into q and k in float32 at least (Attention.qk_norm). A tensor of the extras that is not there gives None.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from ..blocks import AttentionBlock
from ..checkpoints import Checkpoint
from ..errors import CorruptCheckpoint, HeadsDoNotFit, MissingTensor
from .common import (
    REQUIRED,
    SCALE_MAPS,
    config_get,
    fused_heads,
    fused_rows,
    kv_producer,
    linear_heads,
    per_layer_list,
)
from .record import Attention, Record, template_regex


@dataclass(frozen=True)
class Site:
    """Where one block's tensors are."""

    attention: Attention
    stack: str
    layer: int
    prefix: str
    fields: dict
    heads: int
    kv_heads: int
    key_fields: dict | None = None  # the fields of the layer whose keys this one reads (Attention.kv_shared)

    def name(self, template: str, p: str | None = None, fields: dict | None = None) -> str:
        fields = fields or self.fields
        fields = dict(fields, p=p) if p is not None else fields
        if template.startswith("^"):
            return template[1:].format(**fields)
        return self.prefix + template.format(**fields)

    def key_name(self, template: str, p: str | None = None) -> str:
        """A key-side tensor's name: the layer's own, or the one's whose keys it reads."""
        return self.name(template, p, self.key_fields)


def numbers_in(names, pattern: str) -> list[tuple[int, ...]]:
    """The numbers the names that match pattern hold in its groups, sorted, once each."""
    rx = re.compile(pattern)
    return sorted({tuple(int(g) for g in m.groups()) for n in names if (m := rx.fullmatch(n))})


def _heads(ckpt: Checkpoint, a: Attention, layer: int | None) -> tuple[object, object]:
    default = a.heads_default if a.heads_default is not None else REQUIRED
    heads = config_get(ckpt, *a.heads, default=default, layer=layer)
    if a.heads_ratio:  # ConvBERT: num_attention_heads // head_ratio, and one head where that is none
        ratio = a.heads_ratio if isinstance(a.heads_ratio, int) else config_get(ckpt, a.heads_ratio)
        heads = max(int(heads) // int(ratio), 1)
    kv = config_get(ckpt, *a.kv_heads, default=heads, layer=layer) if a.kv_heads else heads
    return heads, 1 if a.multi_query else kv


def _key_fields(ckpt: Checkpoint, a: Attention, fields: dict) -> dict | None:
    """The template fields of the layer whose keys a layer reads (Attention.kv_shared), None for its own."""
    if a.kv_shared is None or not a.fields:
        return None
    config, dot, _ = a.kv_shared.rpartition(".")  # layer_types beside the count, in its (sub-)config
    layer_types = config_get(ckpt, config + dot + "layer_types", default=None)
    producer = kv_producer(layer_types, config_get(ckpt, a.kv_shared, default=0), fields[a.fields[0]])
    return None if producer is None else dict(fields, **{a.fields[0]: producer})


def _layers_kept(ckpt: Checkpoint, a: Attention, numbers: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The template's layers (their field values) that it reads (Attention.layer_if)."""
    key, field, op, value = a.layer_if
    values, at = per_layer_list(ckpt, key), a.fields.index(field)
    if any(v[at] >= len(values) for v in numbers):
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: {key} has {len(values)} entries, none for some layer of {a.weight} ({field})"
        )
    return [v for v in numbers if (values[v[at]] == value) == (op == "==")]


def _count(value, fields: dict, a: Attention) -> int:
    # heads_by indexes whichever of the query and key counts is a list (Sapiens2: its key heads alone)
    return int(value[fields[a.heads_by]] if a.heads_by and isinstance(value, (list, tuple)) else value)


def locate(ckpt: Checkpoint, record: Record) -> list[Site]:
    """Every block's Site, in the record's order of Attentions and in layer order."""
    names = ckpt.store.names()
    attentions = record.attentions(ckpt.config.get("_source_format"))
    sites: list[Site] = []
    found: dict[str, int] = {}  # Attention.stack -> layers found by its Attentions so far
    bases: dict[str, int] = {}  # Attention.stack -> where its latest Attention's layers begin (interleave)
    for n, a in enumerate(attentions):
        if a.alternative and found.get(a.stack):
            continue
        if a.only_if is not None and not a.only_if(ckpt.config):
            continue
        probe = template_regex(a.weight, a.qk)
        prefix, numbers = next(
            ((p, found_here) for p in a.prefixes if (found_here := numbers_in(names, re.escape(p) + probe))), (None, [])
        )
        if prefix is None:
            followed = any(b.alternative and b.stack == a.stack for b in attentions[n + 1 :])
            if a.required and not followed:
                raise MissingTensor(
                    f"{ckpt.model_id}: none of {[p + probe for p in a.prefixes]} found among {len(names)} tensors "
                    f"(model_type {ckpt.model_type!r}); is this the right architecture, or a checkpoint with "
                    "renamed weights?"
                )
            continue
        if a.layer_if is not None:
            numbers = _layers_kept(ckpt, a, numbers)
        stack = "decoder" if a.as_decoder and ckpt.config.get(a.as_decoder) else a.stack
        k, n_alike = a.interleave or (0, 1)
        if k == 0:
            bases[a.stack] = found.get(a.stack, 0)
        first = bases.get(a.stack, found.get(a.stack, 0))
        for rank, values in enumerate(numbers):
            fields = dict(zip(a.fields, values))
            layer = first + n_alike * (values[0] if len(values) == 1 else rank) + k
            heads, kv = _heads(ckpt, a, fields.get("i"))
            keys = _key_fields(ckpt, a, fields)
            sites.append(Site(a, stack, layer, prefix, fields, _count(heads, fields, a), _count(kv, fields, a), keys))
        found[a.stack] = max(found.get(a.stack, 0), first + n_alike * len(numbers))
    if not sites:
        raise MissingTensor(
            f"{ckpt.model_id}: no attention weights of model_type {ckpt.model_type!r} found "
            f"(looked for {[a.weight for a in attentions]})"
        )
    return sites


def read_qk(ckpt: Checkpoint, site: Site) -> AttentionBlock:
    """One layer's per-head Q and K."""
    a, store = site.attention, ckpt.store
    if a.fused in (None, "kv"):
        wq, wk = (
            _as_matrix(store.get(site.name(a.weight, a.qk[0]))),
            _as_matrix(store.get(site.key_name(a.weight, a.qk[1]))),
        )
        wq, wk = (wq.T, wk.T) if a.conv1d else (wq, wk)
        if a.kv_heads_from_weight:
            site = dataclasses.replace(site, kv_heads=_kv_heads_of(ckpt, site, wq, wk))
        if a.groups:
            wq, wk = (_block_diagonal(ckpt, site, w, key, p) for w, key, p in zip((wq, wk), a.groups, a.qk))
        if a.fused == "kv":  # [k | v] along the outputs
            if wk.shape[0] % 2:
                raise CorruptCheckpoint(
                    f"{ckpt.model_id}: {site.name(a.weight, a.qk[1])} has {wk.shape[0]} outputs, not k | v"
                )
            wk = wk[: wk.shape[0] // 2]
        if a.q_gate:  # [q_h g_h] per head: the q rows
            wq = _ungated(wq, site.heads)
    else:
        name = site.name(a.weight)
        w = _as_matrix(store.get(name))
        try:
            wq, wk = fused_rows(w.T if a.conv1d else w, site.heads, site.kv_heads, a.fused)
        except ValueError as e:
            raise CorruptCheckpoint(f"{ckpt.model_id}: {name} {tuple(w.shape)}: {e}") from None
    block = AttentionBlock(
        site.stack,
        site.layer,
        linear_heads(wq, site.heads),
        linear_heads(wk, site.kv_heads),
        storage=_storage(
            store,
            [site.name(a.weight, a.qk[0]), site.key_name(a.weight, a.qk[1])] if a.fused in (None, "kv") else [name],
        ),
    )
    if a.qk_norm_unit and _normed(ckpt, site):
        block = _unit_qk_norm(site, block)
    elif a.qk_norm:
        block = _fold_qk_norm(ckpt, site, block)
    if a.q_scale:  # after the QK-norm (TimesFM 2.5's), where a LayerNorm's centring would not commute with it
        block = dataclasses.replace(block, q=_scaled(block.q, _q_scale(ckpt, site, block.n_heads, block.q.shape[2])))
    return block


def _kv_heads_of(ckpt: Checkpoint, site: Site, wq: torch.Tensor, wk: torch.Tensor) -> int:
    """The key heads a layer's k weight holds (Attention.kv_heads_from_weight): its rows over the
    width of a query head."""
    width, rest = divmod(wq.shape[0], site.heads)
    kv, left = divmod(wk.shape[0], width or 1)
    if rest or left or not kv or site.heads % kv:
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: {site.stack} layer {site.layer}: q has {wq.shape[0]} rows over {site.heads} heads, "
            f"k {wk.shape[0]} rows: no whole number of key heads that the query heads share evenly"
        )
    return kv


def _q_scale(ckpt: Checkpoint, site: Site, n: int, k: int) -> torch.Tensor:
    """The queries' column scale [n heads, k] (Attention.q_scale through scale_map), in float32 at least."""
    a = site.attention
    name = site.name(a.q_scale)
    if name not in ckpt.store:
        raise CorruptCheckpoint(f"{ckpt.model_id}: the query scale {name} is missing; a truncated checkpoint?")
    raw = ckpt.store.get(name)
    if raw.numel() not in (k, n * k):
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: query scale {name} is {tuple(raw.shape)}, expected ({k},) or ({n * k},)"
        )
    raw = raw.to(torch.promote_types(raw.dtype, torch.float32))
    return SCALE_MAPS[a.scale_map](raw).reshape(-1, k).expand(n, k)


def _scaled(factor: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """factor [H, d, k] with each head's columns scaled by scale [H, k]."""
    f = factor.to(torch.promote_types(factor.dtype, scale.dtype))
    return f * scale.to(f.dtype)[:, None, :]


def _normed(ckpt: Checkpoint, site: Site) -> bool:
    """Whether the site's layer has the QK-norm (Attention.qk_norm_layers: its per-layer list)."""
    if site.attention.qk_norm_layers is None:
        return True
    key, field = site.attention.qk_norm_layers
    flags = per_layer_list(ckpt, key)
    index = site.fields[field]
    if index >= len(flags):
        raise CorruptCheckpoint(f"{ckpt.model_id}: {key} has {len(flags)} entries, none for layer {index}")
    return bool(flags[index])


def _unit_qk_norm(site: Site, block: AttentionBlock) -> AttentionBlock:
    """The block of a QK-norm without a gain (Attention.qk_norm_unit): its factors as they are
    (a LayerNorm's centring folded), marked form="qk_norm_gain_folded"."""
    q, k = _centred(block.q, site.attention), _centred(block.k, site.attention)
    return dataclasses.replace(block, q=q, k=k, form="qk_norm_gain_folded")


def _ungated(w: torch.Tensor, heads: int) -> torch.Tensor:
    """The query rows of a [q_h g_h]-per-head weight [H*2k, ...] (or bias [H*2k])."""
    if w.shape[0] % (2 * heads):
        raise HeadsDoNotFit(f"a gated query projection of {w.shape[0]} rows cannot hold q and a gate of {heads} heads")
    k = w.shape[0] // (2 * heads)
    return w.reshape(heads, 2, k, *w.shape[1:])[:, 0].reshape(heads * k, *w.shape[1:])


def _block_diagonal(ckpt: Checkpoint, site: Site, w: torch.Tensor, key: str, part: str) -> torch.Tensor:
    """A grouped 1x1 convolution's weight [out, in / g] as the block-diagonal [out, in] matrix it
    is: the g-th block of outputs reads the g-th block of inputs (SqueezeBERT)."""
    if not key:
        return w
    groups = int(config_get(ckpt, key))
    if groups < 1 or w.shape[0] % groups:
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: {site.name(site.attention.weight, part)} has {w.shape[0]} outputs, "
            f"not a multiple of {key} = {groups}"
        )
    return torch.block_diag(*w.split(w.shape[0] // groups))


def _as_matrix(w: torch.Tensor) -> torch.Tensor:
    """A 1x1 convolution's weight [out, in, 1] as the [out, in] matrix it is (SqueezeBERT); an
    einsum's [in, heads, head_dim] (XLNet's q and k, read with conv1d) as [in, heads * head_dim]."""
    if w.ndim > 2 and all(n == 1 for n in w.shape[2:]):
        return w.reshape(w.shape[0], w.shape[1])
    return w.reshape(w.shape[0], -1) if w.ndim > 2 else w


_FLOAT_STORAGE = ("F32", "F16", "BF16")


def _storage(store, names: list[str]) -> str | None:
    """What the q and k tensors are stored as where a store says so (GGUF) and it is no float type."""
    if not hasattr(store, "storage"):
        return None
    kinds = [store.storage(n) for n in names]
    if all(k in _FLOAT_STORAGE for k in kinds):
        return None
    return kinds[0] if len(set(kinds)) == 1 else ", ".join(f"{p} {k}" for p, k in zip("qk", kinds))


def _fold_qk_norm(ckpt: Checkpoint, site: Site, block: AttentionBlock) -> AttentionBlock:
    """The block with its QK-norm's gains (and a LayerNorm's centring) folded into q and k,
    marked form="qk_norm_gain_folded" (Attention.qk_norm); unchanged where the checkpoint has
    no QK-norm tensors. The product is taken in float32 at least (exact for 16-bit factors)."""
    a, k = site.attention, block.q.shape[2]
    gq = _qk_gain(ckpt, site, a.qk_norm[0], block.n_heads, k)
    gk = _qk_gain(ckpt, site, a.qk_norm[1], block.n_kv_heads, k, keys=True)
    if gq is None and gk is None:
        return block
    if gq is None or gk is None:
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: {site.stack} layer {site.layer} has a QK-norm gain for only one of queries and keys "
            f"({a.qk_norm[0] if gk is None else a.qk_norm[1]} found under {site.prefix!r}); a truncated checkpoint?"
        )

    q_folded, k_folded = _qk_norm_folded(block.q, gq, a), _qk_norm_folded(block.k, gk, a)
    return dataclasses.replace(block, q=q_folded, k=k_folded, form="qk_norm_gain_folded")


def _centred(factor: torch.Tensor, a: Attention) -> torch.Tensor:
    """factor [H, d, k] with a QK LayerNorm's centring folded: each head's mean subtracted,
    x Q_h (I - 11^T / k), or all heads' ("projection")."""
    f = factor.to(torch.promote_types(factor.dtype, torch.float32))
    if a.qk_norm_centred:
        f = f - f.mean(dim=(0, 2) if a.qk_norm_centred == "projection" else 2, keepdim=True)
    return f


def _qk_norm_folded(factor: torch.Tensor, gain: torch.Tensor, a: Attention) -> torch.Tensor:
    """factor [H, d, k] with the QK-norm's centring (a LayerNorm's) and gain [H, k] folded in."""
    f = _centred(factor, a)
    return f * (gain.to(f.dtype) + a.gain_offset)[:, None, :]


def _fold_qk_norm_biases(ckpt: Checkpoint, site: Site, block: AttentionBlock, biases: dict) -> dict:
    """A QK-norm block's q and k biases in the space of its folded q and k: the bias enters the
    norm with x Q_h (GLM-OCR's vision tower: qkv with a bias, then the QK-norm), so it is centred
    and scaled by the gain as q and k are."""
    a, k = site.attention, block.q.shape[2]
    out = dict(biases)
    templates = a.qk_norm or (None, None)  # None: a QK-norm without a gain (qk_norm_unit), centred only
    for side, template, n in (("q_bias", templates[0], block.n_heads), ("k_bias", templates[1], block.n_kv_heads)):
        if out.get(side) is not None:
            b = out[side][:, None, :]
            gain = _qk_gain(ckpt, site, template, n, k, keys=side == "k_bias") if template else None
            b = _qk_norm_folded(b, gain, a) if template else _centred(b, a)
            out[side] = b[:, 0, :]
    return out


def _qk_norm_shifts(ckpt: Checkpoint, site: Site, block: AttentionBlock) -> dict:
    """A QK-norm's biases, beside its gains (a LayerNorm's shift after the norm: Persimmon's)."""
    k = block.q.shape[2]
    shifts = {}
    for side, template, n in zip(
        ("q_norm_bias", "k_norm_bias"), site.attention.qk_norm or (), (block.n_heads, block.n_kv_heads)
    ):
        if template.endswith("weight"):
            shifts[side] = _qk_gain(
                ckpt, site, template.removesuffix("weight") + "bias", n, k, keys=side == "k_norm_bias"
            )
    return shifts


def _qk_gain(ckpt: Checkpoint, site: Site, template: str, n: int, k: int, keys: bool = False) -> torch.Tensor | None:
    """One side's QK-norm gain as [n heads, k] (a gain shared by the heads repeated); None if absent.
    keys: the key side's, of the layer whose keys the site reads."""
    store = ckpt.store
    per_head = "{h}" in template
    name = site.key_name if keys else site.name
    names = [name(template.replace("{h}", str(h))) for h in range(n)] if per_head else [name(template)]
    present = [name in store for name in names]
    if not any(present):
        return None
    if not all(present):
        raise CorruptCheckpoint(f"{ckpt.model_id}: QK-norm gain {names[present.index(False)]} is missing")
    gains = [store.get(name) for name in names]
    g = torch.stack(gains) if per_head else gains[0]
    if g.numel() not in (k, n * k):
        raise CorruptCheckpoint(
            f"{ckpt.model_id}: QK-norm gain {names[0]} is {tuple(g.shape)}, expected ({k},) shared by the heads "
            f"or {n} x {k} (one per head); check num_attention_heads / num_key_value_heads in config.json"
        )
    return g.reshape(-1, k).expand(n, k)


def read_blocks(ckpt: Checkpoint, record: Record) -> Iterator[AttentionBlock]:
    """The blocks (q and k only) of a checkpoint, one layer read at a time."""
    for site in locate(ckpt, record):
        yield read_qk(ckpt, site)


class _Extras:
    """The biases and gains of a block, from its Site."""

    def __init__(self, ckpt: Checkpoint):
        self.ckpt, self.store = ckpt, ckpt.store

    def _get(self, name: str) -> torch.Tensor | None:
        return self.store.get(name) if name in self.store else None

    def __call__(self, block: AttentionBlock, site: Site) -> dict:
        a = site.attention
        out = self._biases(block, site)
        if block.form == "qk_norm_gain_folded":
            out = _fold_qk_norm_biases(self.ckpt, site, block, out) | _qk_norm_shifts(self.ckpt, site, block)
        pre_norm = bool(self.ckpt.config.get(a.pre_norm, False)) if isinstance(a.pre_norm, str) else a.pre_norm
        norm = a.first_norm if a.first_norm and site.layer == 0 else a.norm
        if pre_norm and norm:
            out["q_gain"] = self._gain(site.name(norm), block.q.shape[1], a.gain_offset)
            bias = site.name(norm).removesuffix("weight") + "bias"
            out["norm_centred"] = a.norm_centred if a.norm_centred is not None else bias in self.store
            if block.stack != "cross" and site.key_fields is not None:  # the norm of the layer whose keys it reads
                out["k_gain"] = self._gain(site.key_name(norm), block.k.shape[1], a.gain_offset)
            elif block.stack != "cross":
                out["k_gain"] = out["q_gain"]
            elif a.k_norm and not (a.k_norm_unless and site.name(a.k_norm_unless) in self.store):
                out["k_gain"] = self._gain(self._last(site, a.k_norm), block.k.shape[1], a.gain_offset)
        if out.get("q_gain") is None:
            out.pop("norm_centred", None)
        return {k: v for k, v in out.items() if v is not None}

    def _last(self, site: Site, template: str) -> str:
        """The template's name at the site, its {last} the highest number the checkpoint's names
        have there (the norm of an encoder's last layer, which a decoder's cross-attention reads)."""
        if "{last}" not in template:
            return site.name(template)
        before, _, after = site.name(template, fields=dict(site.fields, last="\0")).partition("\0")
        numbers = numbers_in(self.store.names(), re.escape(before) + r"(\d+)" + re.escape(after))
        return f"{before}{numbers[-1][0]}{after}" if numbers else site.name(template, fields=dict(site.fields, last=0))

    def _gain(self, name: str, d: int, offset: float = 0.0) -> torch.Tensor | None:
        g = self._get(name)
        if g is not None and tuple(g.shape) != (d,):
            raise CorruptCheckpoint(f"{self.ckpt.model_id}: norm gain {name} is {tuple(g.shape)}, expected ({d},)")
        return g + offset if g is not None and offset else g  # Gemma's RMSNorm scales by 1 + w

    def _biases(self, block: AttentionBlock, site: Site) -> dict:
        a = site.attention
        h, h_kv, k = block.n_heads, block.n_kv_heads, block.q.shape[2]
        template = a.bias_template
        if a.fused in ("blocks", "per_head", "grouped", "qvk_shards", "gate_blocks"):
            if template is None:
                bq, bk, where_q, where_k = None, None, None, None
            else:
                where_q = where_k = site.name(template)
                b = self._get(where_q)
                if b is None:
                    return {}
                if b.ndim != 1 or b.numel() != fused_heads(a.fused, h, h_kv) * k:
                    raise CorruptCheckpoint(
                        f"{self.ckpt.model_id}: {where_q} is {tuple(b.shape)}, "
                        f"not the fused {a.fused} rows of {h} + 2 x {h_kv} heads of {k}"
                    )
                bq, bk = (t.flatten() for t in fused_rows(b[:, None], h, h_kv, a.fused))
        else:
            where_q, where_k = (
                (site.name(template, a.qk[0]), site.key_name(template, a.qk[1])) if template else (None, None)
            )
            bq = self._get(where_q) if where_q else None
            bk = self._get(where_k) if where_k else None
            if bq is not None and a.q_gate:
                bq = _ungated(bq, h)
            if bk is not None and a.fused == "kv":  # [k | v]
                bk = bk[: bk.shape[0] // 2]
        if a.q_bias:
            where_q = site.name(a.q_bias)
            bq = self._get(where_q)
        q_bias, k_bias = self._split(bq, h, k, where_q), self._split(bk, h_kv, k, where_k)
        if q_bias is not None and a.q_scale:  # the bias is added before the scale
            q_bias = _scaled(q_bias[:, None, :], _q_scale(self.ckpt, site, h, k))[:, 0, :]
        if q_bias is not None and block.heads is not None:  # q's rows in the block's head order
            q_bias = q_bias[list(block.heads)]
        return {"q_bias": q_bias, "k_bias": k_bias}

    def _split(self, b: torch.Tensor | None, n: int, k: int, name: str | None) -> torch.Tensor | None:
        if b is None:
            return None
        if b.ndim == 2 and tuple(b.shape) == (n, k):  # one row per head (a Transformer-XL content bias)
            b = b.flatten()
        if b.ndim != 1 or b.numel() != n * k:
            raise CorruptCheckpoint(f"{self.ckpt.model_id}: bias {name} is {tuple(b.shape)}, expected ({n * k},)")
        return b.reshape(n, k)


def with_extras(ckpt: Checkpoint, blocks: Iterable[AttentionBlock], record: Record) -> Iterator[AttentionBlock]:
    """The blocks, in order and one at a time, with q_bias, k_bias, q_gain, k_gain and rope
    filled in where the model has them (dataclasses.replace; what the adapter set is kept,
    what the model lacks stays None); record: the checkpoint's."""
    from .rope import ModelRope

    extras = _Extras(ckpt)
    rotates = record.rope is not None and (record.rope.only_if is None or record.rope.only_if(ckpt.config))
    rope = ModelRope(ckpt, record.rope) if rotates else None
    sites: dict[tuple[str, int], Site] | None = None
    for block in blocks:
        if sites is None:
            sites = {(s.stack, s.layer): s for s in locate(ckpt, record)}
        site = sites.get((block.stack, block.layer))
        changes = extras(block, site) if site is not None else {}
        if rope is not None and block.rope is None and (r := rope(block)) is not None:
            changes["rope"] = r
        changes = {k: v for k, v in changes.items() if getattr(block, k) is None}  # what an adapter set stays
        yield dataclasses.replace(block, **changes) if changes else block
