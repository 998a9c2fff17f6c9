"""A Record from the attention calls of a traced forward: templates, layout, heads, norms, stacks.

Each attention call gives one site (a layer of one stack); sites with the same weight template and
stack become one `Attention`. What each field means is record.Attention's; here is only how it is
read off the forward:
- template: the q (and k) weight's name, its numbers as fields; {p} where the q and k names differ;
- fused: None for two weights, else the rows the product read (FUSED), "kv" for [k | v];
- heads: the config field (of the attention's own model config) equal to the head count seen;
- norm: the 1-d-weight module whose output the q projection read, when that module is in the same
  layer (pre-norm); gain_offset and norm_centred from its output against its input;
- qk_norm: the norm module between projection and product;
- stack: "cross" when keys read another input, else "decoder" under a causal mask, "encoder"
  under none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from ..adapters.common import SHARDS
from ..adapters.reader import numbers_in
from ..adapters.record import AR, BI, Attention
from .calls import AttentionCall, Side, Underivable
from .trace import ModuleCall, Trace

HEAD_FIELDS = re.compile(r"head")
STACK_OF_MASK = {"causal": "decoder", "prefix": "decoder", "full": "encoder", "band": "encoder"}


@dataclass
class SiteFacts:
    """One attention call, read into the fields of an Attention: `attention` holds every field
    but the names, which are kept whole here (assemble makes them templates over the layers)."""

    stack: str
    attention: Attention
    module: str  # the attention module's name
    heads_list: list | None  # the config's head counts per stage or layer, where its heads key names a list
    q_bias: str | None  # a query bias added after a projection without one (DeBERTa v1)
    q_weight: str
    k_weight: str
    norm: str | None  # the pre-norm's gain (None: no norm feeds the q projection)
    feeding_norm: str | None  # the gain of any norm whose output the q projection reads (post-norm too)
    k_norm: str | None  # cross-attention: the gain of the norm the keys read
    qk_norm: tuple[str, str] | None
    heads: int
    kv_heads: int
    head_dim: int
    scale: float
    factor: float
    position_terms: bool
    extra_logits: int
    mask: str
    alias: tuple[str, str] | None = None  # (saved prefix, held prefix) where they differ: assemble
    kv_list: list | None = None  # the config's key heads per layer, where its kv key names a list
    layer_flags: dict | None = None  # the config's per-layer lists of flags, by key (heads.HeadKeys)
    layer_lists: dict | None = None  # the config's per-stage or per-layer lists of values, by key (heads.HeadKeys)
    kv_from: bool = False  # k_weight and qk_norm[1] are another layer's (Attention.kv_shared), until _as_saved
    q_scale: str | None = None  # the parameter scaling the queries' columns (Attention.q_scale)


def _layout(q: Side, k: Side, heads: int, kv_of: list[int], c: int, fused: bool) -> str | None:
    """The FUSED layout name of the rows the product read; raises when none fits."""
    kv = max(kv_of) + 1
    rows_q = [r for head in q.rows for r in head]
    per_query = len(k.rows) == heads
    rows_k = {g: k.rows[h if per_query else h * len(k.rows) // heads] for h, g in enumerate(kv_of)}
    want_q = [h * c + j for h in range(heads) for j in range(c)]
    if not fused:
        # [q_h g_h] per head (Qwen3-Next): twice the query rows (one head's q rows are a plain projection's too)
        gated = q.projection.out.shape[-1] == 2 * heads * c and rows_q == [
            h * 2 * c + j for h in range(heads) for j in range(c)
        ]
        alike = _one_order_a_head(q.rows, rows_k, kv_of, c)
        if rows_q != want_q and not gated and not alike:
            return _no_layout("query", q)
        if any(rows_k[g] != [g * c + j for j in range(c)] for g in rows_k) and not alike:
            return _no_layout("key", k)
        out_k = k.projection.out.shape[-1]
        if gated:
            return "gated"
        return "kv" if out_k == 2 * kv * c else None
    layouts = {
        "blocks": (want_q, lambda g: [heads * c + g * c + j for j in range(c)]),
        "per_head": ([h * 3 * c + j for h in range(heads) for j in range(c)], lambda g: [g * 3 * c + c + j for j in range(c)]),
        "grouped": (
            [(h // (heads // kv)) * (heads // kv + 2) * c + (h % (heads // kv)) * c + j for h in range(heads) for j in range(c)],
            lambda g: [g * (heads // kv + 2) * c + (heads // kv) * c + j for j in range(c)],
        ),
    }  # fmt: skip
    if kv == heads and heads * c % SHARDS == 0:
        layouts["qvk_shards"] = _shards(heads * c // SHARDS, heads, c)
    for name, (qs, ks) in layouts.items():
        if name == "per_head" and kv != heads:
            continue
        if rows_q == qs and all(rows_k[g] == ks(g) for g in rows_k):
            return name
    raise Underivable("layout", f"a fused q/k/v weight {q.projection.weight} read in an order no FUSED layout names")


def _shards(rows: int, heads: int, c: int):
    """The q rows and each key head's rows of [q_s v_s k_s] per shard of `rows` rows (CodeGen)."""

    def row(t: int, part: int) -> int:  # the t-th q (part 0) or k (part 2) row
        return (t // rows) * 3 * rows + part * rows + t % rows

    return [row(t, 0) for t in range(heads * c)], lambda g: [row(g * c + j, 2) for j in range(c)]


def _one_order_a_head(q_rows: list[list[int]], k_rows: dict, kv_of: list[int], c: int) -> bool:
    """Whether each query head reads its own head's rows, and its key head its own, in one order the
    two share (Qwen2.5-Omni's DiT de-interleaves its first head's q and k alike before a rotary of
    that head alone): q_h . k_g sums the same products in any order, so the blocks read in order
    have the form the product has."""
    for h, rows in enumerate(q_rows):
        order = [r - h * c for r in rows]
        if sorted(order) != list(range(c)) or [r - kv_of[h] * c for r in k_rows[kv_of[h]]] != order:
            return False
    return True


def _no_layout(what: str, side: Side):
    first = side.rows[0][:4]
    raise Underivable("layout", f"the {what} rows of {side.projection.weight} are read in another order ({first}...)")


def _kv_of(q: Side, k: Side, c: int, heads: int) -> list[int]:
    """The key head each query head reads, checked to be h // (H / H_kv) (transformers' repeat_kv)."""
    starts = [min(rows) for rows in k.rows]
    if len(starts) < heads:  # fewer key heads than query heads in the product: broadcast (Falcon-7B)
        if heads % len(starts):
            raise Underivable("layout", f"{len(starts)} key heads broadcast over {heads} query heads")
        starts = [starts[h * len(starts) // heads] for h in range(heads)]
    distinct = sorted(set(starts))
    kv_of = [distinct.index(s) for s in starts]
    kv = len(distinct)
    if heads % kv or kv_of != [h // (heads // kv) for h in range(heads)]:
        raise Underivable("layout", f"query heads read key heads {kv_of}, not in groups of consecutive heads")
    return kv_of


def _is_norm_output(call: ModuleCall, x: torch.Tensor) -> bool:
    """Whether x is the call's output, or its tokens reordered (Swin's windows, shifted)."""
    out = call.output
    if not isinstance(out, torch.Tensor) or out.numel() != x.numel() or out.shape[-1] != x.shape[-1]:
        return False
    if torch.equal(out.reshape(x.shape), x):
        return True
    return torch.equal(out.flatten().sort().values, x.flatten().sort().values)


def _gain(call: ModuleCall) -> torch.nn.Parameter | None:
    params = [p for n, p in call.module.named_parameters(recurse=False) if p.ndim == 1 and n == "weight"]
    return params[0] if params else None


def last_layer(name: str, parameters, q_weight: str) -> str:
    """name with its last number as {last} where that is the highest of two or more that the model's
    names have there and the name is not in the query's own layer: the norm of an encoder's last
    layer, whose output a decoder's cross-attention reads in every layer (Canary's norm_out, BART's
    final_layer_norm); a checkpoint's encoder has its own number of layers. As it is otherwise."""
    parts = name.split(".")
    numbered = [n for n, part in enumerate(parts) if part.isdigit()]
    if not numbered or same_layer(name, q_weight):
        return name
    n = numbered[-1]
    numbers = numbers_in(
        parameters, re.escape(".".join(parts[:n]) + ".") + r"(\d+)" + re.escape("." + ".".join(parts[n + 1 :]))
    )
    if len(numbers) > 1 and (int(parts[n]),) == numbers[-1]:
        parts[n] = "{last}"
    return ".".join(parts)


def same_layer(name: str, q_weight: str) -> bool:
    """Whether name is in the query projection's layer: their names agree up to name's last number."""
    parts, q = name.split("."), q_weight.split(".")
    numbered = [n for n, part in enumerate(parts) if part.isdigit()]
    return bool(numbered) and parts[: numbered[-1] + 1] == q[: numbered[-1] + 1]


def _norm_source(trace: Trace, x: torch.Tensor, before: int) -> ModuleCall | None:
    """The last module call with a gain whose output is x (the norm feeding a projection)."""
    for call in reversed(trace.calls):
        if call.seq_end <= before and _gain(call) is not None and _is_norm_output(call, x):
            return call
    return None


_EPS = ("eps", "variance_epsilon", "epsilon", "layer_norm_eps", "norm_eps")


def norm_kind(call: ModuleCall) -> tuple[float, bool | None]:
    """(gain offset, centred) of a norm call: its output = normalise(input) * (gain + offset) + bias,
    normalise an RMSNorm's or (centred) a LayerNorm's, centred None where both fit (an input of
    mean zero: another norm's output); raises when neither fits."""
    x = (call.args[0] if call.args else next(iter(call.kwargs.values()))).double()
    y = call.output.double()
    names = dict(call.module.named_parameters(recurse=False))
    w = names["weight"].double()
    bias = names.get("bias")
    if bias is not None:
        y = y - bias.double()
    module = call.module
    eps = next((getattr(module, a) for a in _EPS if isinstance(getattr(module, a, None), float)), 0.0)
    fits = []
    for centred in (False, True):
        z = x - x.mean(-1, keepdim=True) if centred else x
        n = z / (z.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        tokens = tuple(range(y.ndim - w.ndim))  # a gain per column, or per head's column (Chameleon's [H, c])
        g = (y * n).sum(dim=tokens) / (n * n).sum(dim=tokens)
        fits.append((float((y - n * g).norm() / y.norm()), centred, g))
    err, centred, g = min(fits, key=lambda f: f[0])
    if err <= 1e-4:
        if max(f[0] for f in fits) <= 1e-4:  # an input already centred (a norm's output) tells neither
            centred = None
        for offset in (0.0, 1.0):
            if (g - (w + offset)).abs().max() <= 1e-4 * g.abs().max():
                return offset, centred
    raise Underivable("layout", f"{call.name} ({type(call.module).__name__}) is no RMSNorm or LayerNorm of its gain")


def _width(call: ModuleCall) -> int:
    return (call.args[0] if call.args else next(iter(call.kwargs.values()))).shape[-1]


def site_facts(trace: Trace, call: AttentionCall, config_keys) -> SiteFacts:
    """The Attention fields of one attention call (config_keys: its head count -> config key)."""
    q, k = call.q, call.k
    c, heads = call.head_dim, call.heads
    kv_of = _kv_of(q, k, c, heads)
    kv = max(kv_of) + 1
    fused = q.projection.weight == k.projection.weight
    if q.projection.conv1d != k.projection.conv1d:
        raise Underivable("layout", f"{q.projection.weight} and {k.projection.weight} are stored differently")
    layout = _layout(q, k, heads, kv_of, c, fused)
    q_gate = layout == "gated"
    if q_gate:
        layout = None
    stack = "cross" if call.cross else STACK_OF_MASK.get(call.mask)
    if stack is None:
        raise Underivable("layout", f"{call.call.name}: a mask neither causal nor open (a prefix-LM mask?)")
    groups = (q.projection.groups, k.projection.groups)
    if k.shared:  # another layer's keys (Gemma 3n): the layer they were projected in
        if fused:
            raise Underivable("layout", f"{call.call.name}: a fused q/k/v weight whose keys are another layer's")
        found = config_keys(call.call, heads, kv, groups, producer=_layer_of(trace, k.projection))
    else:
        found = config_keys(call.call, heads, kv, groups)
    if found.kv_from_weight and fused:
        raise Underivable(
            "config", f"{call.call.name}: no field states its {kv} key heads, and its fused weight cannot tell them"
        )
    if found.groups and fused:
        raise Underivable("layout", f"{q.projection.weight}: a fused q/k/v weight of grouped convolutions")
    feeding = _norm_source(trace, q.projection.x, q.projection.seq)
    # a norm whose output is also the residual stream (post-norm) is no pre-norm of this layer
    norm = feeding if feeding is not None and id(feeding.output) not in trace.added else None
    gain_offset, centred = 0.0, None
    if norm is not None:
        try:
            gain_offset, centred = norm_kind(norm)
        except Underivable:  # no normalisation, an affine map (MobileBERT's NoNorm): no pre-norm gain
            norm = None
    k_norm = None
    if call.cross and (source := _norm_source(trace, k.projection.x, k.projection.seq)) is not None:
        k_norm = source.name + ".weight"
    qk_norm, qk_centred = None, False
    if (q.norm is None) != (k.norm is None) or q.unit_norm != k.unit_norm:
        raise Underivable("layout", f"{call.call.name}: a QK-norm on only one of queries and keys, or two kinds")
    if q.unit_norm is not None:
        qk_centred = q.unit_norm == "centred"
    if q.norm is not None:
        qk_norm = (q.norm.name + ".weight", k.norm.name + ".weight")
        offset, qk_centred = norm_kind(q.norm)
        qk_centred = bool(qk_centred)
        if qk_centred and heads > 1 and _width(q.norm) == heads * c:
            qk_centred = "projection"  # one LayerNorm over all heads' columns (ESMC)
        if norm is not None and offset != gain_offset:
            raise Underivable("layout", f"{call.call.name}: the QK-norm's gain offset differs from the pre-norm's")
        gain_offset = offset
    if k.column_scale is not None:
        raise Underivable(
            "layout", f"{call.call.name}: keys scaled per column by {k.column_scale[0]} (no record field)"
        )
    if k.offset is not None:
        raise Underivable(
            "layout", f"{call.call.name}: a key bias added after the projection (no record field holds one)"
        )
    q_bias = _added_bias(trace, q) if q.offset is not None else None
    attention = Attention(
        stack,
        "{i}" if fused else "{i}.{p}",  # the names are made templates in assemble
        fused=layout,
        q_gate=q_gate,
        conv1d=q.projection.conv1d,
        groups=found.groups,
        heads=(found.heads,) if found.heads else (),
        heads_default=None if found.heads else heads,  # no config field states it (timm): the count seen
        heads_ratio=found.heads_ratio,
        kv_heads=(found.kv,) if found.kv else (),
        multi_query=found.multi_query,
        kv_heads_from_weight=found.kv_from_weight,
        bias=_bias(q, k),
        gain_offset=gain_offset,
        norm_centred=centred,
        qk_norm_centred=qk_centred,
        qk_norm_unit=q.unit_norm is not None,
        kv_shared=found.kv_shared,
        scale_map=q.column_scale[1] if q.column_scale else "identity",
    )
    return SiteFacts(
        stack, attention, call.call.name, found.heads_list, q_bias, q.projection.weight, k.projection.weight, norm.name + ".weight" if norm else None,
        feeding.name + ".weight" if feeding else None, k_norm, qk_norm, heads, kv, c, call.scale, q.factor * k.factor,
        call.position_terms, call.extra_logits, call.mask, kv_list=found.kv_list,
        layer_flags=found.layer_flags, layer_lists=found.layer_lists, kv_from=k.shared, q_scale=q.column_scale[0] if q.column_scale else None,
    )  # fmt: skip


def _layer_of(trace: Trace, projection) -> int | None:
    """The layer_idx of the innermost module around a projection's call that has one."""
    for index in reversed(projection.calls):
        layer = getattr(trace.calls[index].module, "layer_idx", None)
        if isinstance(layer, int):
            return layer
    return None


def _added_bias(trace: Trace, side: Side) -> str:
    """The 1-d parameter holding the bias added to the queries after their projection."""
    want = side.offset.flatten()
    for name, p in trace.parameters.items():  # [H*k] (DeBERTa's q_bias) or [H, k] (Transformer-XL's pos_bias_u)
        if (
            p.ndim <= 2
            and p.numel() == want.numel()
            and torch.allclose(p.double().flatten(), want, rtol=1e-6, atol=1e-9)
        ):
            return name
    raise Underivable("layout", f"a query bias added after {side.projection.weight} that no parameter holds")


def _bias(q: Side, k: Side) -> str | None:
    """The bias template: DERIVED where the bias sits beside the weight, else its own template."""
    from ..adapters.record import DERIVED

    names = {s.projection.bias for s in (q, k)} - {None}
    if not names:
        return None
    expected = {s.projection.weight.rpartition("weight")[0] + "bias" for s in (q, k)}
    if names <= expected:
        return DERIVED
    raise Underivable("layout", f"q/k biases {sorted(names)} are not named after their weights")


def objectives(sites: list[SiteFacts]) -> dict[str, str]:
    """stack -> objective, by the masks of its layers (causal or prefix: autoregressive)."""
    out: dict[str, set[str]] = {}
    for s in sites:
        if s.stack != "cross":
            out.setdefault(s.stack, set()).add(AR if s.mask in ("causal", "prefix") else BI)
    mixed = {k: v for k, v in out.items() if len(v) > 1}
    if mixed:
        raise Underivable("layout", f"layers of one stack under causal and open masks: {sorted(mixed)}")
    return {k: v.pop() for k, v in out.items()}
