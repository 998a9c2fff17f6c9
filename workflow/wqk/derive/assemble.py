"""Sites into Attentions, Attentions into a Record.

Names become templates over the layers of one stack: the numbers that vary between the layers
become fields ({i}, {j}, ...), the constant ones stay (T5's "layer.0" of self-attention); with one
layer only, its first number is the field. Two weights whose names differ in one part give {p}.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

from ..adapters.record import Attention, Record, Rotary, Tiny, template_fields
from ..contracts import stack_rank
from .calls import Underivable
from .infer import SiteFacts, objectives, same_layer

FIELDS = "ijlmnorstuvw"


def template(names: list[str], every: bool = False) -> tuple[str, list[tuple[int, ...]]] | None:
    """(template, each name's field values) for names equal but for numbers, a field for each
    number that varies (every: for each number); None otherwise."""
    split = [n.split(".") for n in names]
    if len({len(p) for p in split}) != 1:
        return None
    first = split[0]
    numeric = [n for n, part in enumerate(first) if part.isdigit()]
    if not numeric and len(set(names)) == 1:  # one block, no number in its name (a VQ-VAE's encoder.mid.attn_1)
        return ".".join(first), [()]
    if any(p[n] != first[n] if n not in numeric else not p[n].isdigit() for p in split for n in range(len(first))):
        return None
    varying = numeric if every else [n for n in numeric if len({p[n] for p in split}) > 1] or numeric[:1]
    parts = list(first)
    for field, n in zip(FIELDS, varying):
        parts[n] = "{" + field + "}"
    return ".".join(parts), [tuple(int(p[n]) for n in varying) for p in split]


def _with_p(tq: str, tk: str) -> tuple[str, tuple[str, str]] | None:
    """(template with {p}, (q part, k part)) for two templates differing in one dotted part."""
    qs, ks = tq.split("."), tk.split(".")
    diff = [n for n, (a, b) in enumerate(zip(qs, ks)) if a != b]
    if len(qs) != len(ks) or len(diff) != 1:
        return None
    n = diff[0]
    return ".".join([*qs[:n], "{p}", *qs[n + 1 :]]), (qs[n], ks[n])


def _weights(group: list[SiteFacts], every: bool = False) -> tuple[str, tuple[str, str], list[tuple[int, ...]]]:
    q = template([f.q_weight for f in group], every)
    k = template([f.k_weight for f in group], every)
    if q is None or k is None or q[1] != k[1]:
        raise Underivable("layout", f"the q/k weights of {group[0].stack} layers are not named alike across layers")
    if group[0].q_weight == group[0].k_weight:
        return q[0], ("q_proj", "k_proj"), q[1]
    split = _with_p(q[0], k[0])
    if split is None:
        raise Underivable(
            "layout", f"q and k weights {group[0].q_weight}, {group[0].k_weight} differ in more than one name part"
        )
    return split[0], split[1], q[1]


def _each_layers(names: list[str], layers: list[tuple[int, ...]], every: bool = False) -> str | None:
    """The template of names that are each layer's own (their varying numbers are the layers'); None
    where they are not."""
    t = template(names, every)
    return t[0] if t is not None and t[1] == layers else None


def _norms(group: list[SiteFacts], layers: list[tuple[int, ...]], every: bool = False) -> dict:
    """norm / first_norm / pre_norm: the norm is kept when it is each layer's own (its varying
    numbers are the layer's), first_norm when only layer 0's is another."""
    names = [f.norm for f in group]
    if all(names) and (t := _each_layers(names, layers, every)) is not None:
        return dict(norm=t)
    if len(group) > 1 and all(names[1:]) and group[0].feeding_norm:
        # layer 0 reads the embeddings' norm (its own is an identity: ModernBERT)
        if (t := _each_layers(names[1:], layers[1:], every)) is not None:
            return dict(norm=t, first_norm=group[0].feeding_norm)
    return dict(norm=None, pre_norm=False, norm_centred=None)


def _k_norm(group: list[SiteFacts], layers: list[tuple[int, ...]], every: bool = False) -> dict:
    """k_norm: each layer's own norm of the keys' input (BLT's cross-attention layers), or one for
    every layer (an encoder's output norm, {last} where it is its last layer's: infer.last_layer);
    none where the layers read several others."""
    names = [f.k_norm for f in group]
    if not all(names):
        return {}
    own = all(same_layer(f.k_norm, f.q_weight) for f in group)
    if own and (t := _each_layers(names, layers, every)) is not None:
        return dict(k_norm=t)
    return dict(k_norm=names[0]) if len(set(names)) == 1 else {}


_NORM_FIELDS = {"gain_offset", "norm_centred"}  # of the sites that have a pre-norm


def _merge(group: list[SiteFacts], others: list[SiteFacts] = ()) -> tuple[Attention, list[tuple[int, ...]]]:
    """The group's Attention and its layers' field values; others: another stack's sites whose
    weights are named alike (Attention.layer_if tells the two apart where their layers differ)."""
    every = _apart(group, others)
    if any(f.attention.kv_heads_from_weight for f in group):  # every layer's from its weight, where some need it
        by_weight = dict(kv_heads=(), multi_query=False, kv_heads_from_weight=True)
        group = [dataclasses.replace(f, attention=dataclasses.replace(f.attention, **by_weight)) for f in group]
    normed = [f.attention for f in group if f.norm is not None]
    first = normed[0] if normed else group[0].attention
    centred = {a.norm_centred for a in normed} - {None}  # None: that layer's input could not tell
    if len(centred) > 1:
        raise Underivable("layout", f"layers of {group[0].q_weight} differ in norm_centred: {sorted(centred)}")
    for facts in group:
        for f in dataclasses.fields(Attention):
            if f.name in _NORM_FIELDS and facts.norm is None and facts.qk_norm is None:
                continue
            if f.name == "norm_centred":  # checked above
                continue
            if f.name == "qk_norm_unit":  # may differ by layer where a per-layer list says so (below)
                continue
            if getattr(facts.attention, f.name) != getattr(first, f.name):
                raise Underivable(
                    "layout",
                    f"layers of {group[0].q_weight} differ in {f.name}: {getattr(first, f.name)!r} vs "
                    f"{getattr(facts.attention, f.name)!r}",
                )
    weight, qk, layers = _weights(group, every)
    changes = dict(weight=weight, qk=qk, single=not any(layers), norm_centred=centred.pop() if centred else None)
    changes.update(_norms(group, layers, every))
    if every:
        changes["layer_if"] = _layer_if(group, others, weight, layers)
    if group[0].heads_list is not None or group[0].kv_list is not None:
        changes["heads_by"] = _heads_by(group, weight, layers)
    if len({f.attention.qk_norm_unit for f in group}) > 1:
        changes.update(qk_norm_unit=True, qk_norm_layers=_qk_norm_layers(group, weight, layers))
    if group[0].q_bias is not None:
        if (t := _each_layers([f.q_bias for f in group], layers, every)) is None:
            raise Underivable("layout", f"the query biases of {group[0].q_weight} are not each layer's own")
        changes["q_bias"] = t
    if any(f.q_scale for f in group):
        if (t := _each_layers([f.q_scale or "" for f in group], layers, every)) is None:
            raise Underivable("layout", f"the query scales of {group[0].q_weight} are not each layer's own")
        changes["q_scale"] = t
    if changes.get("norm") is None and group[0].qk_norm is None:  # the offset of no gain the record reads
        changes["gain_offset"] = 0.0
    changes.update(_k_norm(group, layers, every))
    if group[0].qk_norm is not None:
        qn = tuple(_each_layers([f.qk_norm[i] for f in group], layers, every) for i in (0, 1))
        if None in qn:
            raise Underivable("layout", f"the QK-norm gains of {group[0].q_weight} are not each layer's own")
        changes["qk_norm"] = qn
    return dataclasses.replace(first, **changes), layers


# per-stage lists of sizes (SegFormer's hidden_sizes [32, 64, 160, 256], num_attention_heads [1, 2, 5, 8]) differ
# from stage to stage in every checkpoint, by another value in each: a layer_if on them would read another
# checkpoint's stages wrongly
SIZES = re.compile(r"size|dim|width|hidden|head|depth|channel|embed")


def _apart(group: list[SiteFacts], others) -> bool:
    """Whether another stack's sites are named as the group's are, at other layers (PVT's stages that
    attend to reduced keys, cross, and its last, self-attention): the two templates then number
    every part, and Attention.layer_if says which layers each reads. Where the two read the same
    layers (each run in both ways: DiffusionGemma's), no."""
    if not others:
        return False
    mine, theirs = template([f.q_weight for f in group], True), template([f.q_weight for f in others], True)
    return mine is not None and theirs is not None and not set(mine[1]) & set(theirs[1])


def _layer_if(group: list[SiteFacts], others, weight: str, layers: list[tuple[int, ...]]) -> tuple:
    """Attention.layer_if: a per-stage or per-layer list of the config whose value at one template field
    is one value at the group's layers and never it at the others' (or the reverse)."""
    theirs = template([f.q_weight for f in others], True)[1]
    for key, values in (group[0].layer_lists or {}).items():
        if SIZES.search(key.rpartition(".")[2]):  # widths and head counts tell stages apart by chance
            continue
        for n, name in enumerate(template_fields(weight)):
            if any(v[n] >= len(values) for v in [*layers, *theirs]):
                continue
            here, there = {values[v[n]] for v in layers}, {values[v[n]] for v in theirs}
            if here & there:
                continue
            if len(here) == 1:
                return key, name, "==", here.pop()
            if len(there) == 1:
                return key, name, "!=", there.pop()
    raise Underivable(
        "layout",
        f"{group[0].q_weight}'s template names another stack's tensors too ({others[0].q_weight}), and no "
        "per-stage or per-layer list of the config tells their layers apart",
    )


def _heads_by(group: list[SiteFacts], weight: str, layers: list[tuple[int, ...]]) -> str:
    """The template field whose value indexes the per-stage head counts (Swin: the stage), or the
    per-layer query or key heads (Laguna's, Sapiens2's: the layer)."""
    fields = template_fields(weight)
    lists = [(c, side) for c, side in ((group[0].heads_list, "heads"), (group[0].kv_list, "kv_heads")) if c is not None]
    for n, name in enumerate(fields):
        if all(_indexes(c, v[n], getattr(f, side)) for c, side in lists for f, v in zip(group, layers)):
            return name
    raise Underivable("config", f"no field of {weight} indexes the per-stage head counts {[c for c, _ in lists]}")


def _qk_norm_layers(group: list[SiteFacts], weight: str, layers: list[tuple[int, ...]]) -> tuple[str, str]:
    """(config key, template field) of the per-layer list of flags that is true exactly at the
    layers with a weightless QK-norm (Llama 4's no_rope_layers: its NoPE layers have none)."""
    fields = template_fields(weight)
    for key, flags in (group[0].layer_flags or {}).items():
        for n, name in enumerate(fields):
            if all(v[n] < len(flags) and bool(flags[v[n]]) == f.attention.qk_norm_unit for f, v in zip(group, layers)):
                return key, name
    raise Underivable(
        "layout",
        f"layers of {group[0].q_weight} differ in qk_norm_unit, and no per-layer list of the config says which",
    )


def _indexes(counts: list, index: int, seen: int) -> bool:
    return index < len(counts) and counts[index] == seen


def layer_numbers(sites: list[SiteFacts]) -> dict[tuple[str, str], tuple[str, int]]:
    """(stack, q weight name) -> (stack, layer number as the reader numbers it: the layers of a
    stack's second template after those of its first; those of n templates that alternate
    layer by layer, n * i + k for the k-th's i-th layer)."""
    out = {}
    found: dict[str, int] = {}
    base = 0
    groups = _groups(sites)
    for (stack, shape), group, alike in _ordered(sites):
        _, _, layers = _weights(group, _apart(group, _alike(groups, stack, shape)))
        distinct = sorted(set(layers))
        ranks = {v: n for n, v in enumerate(distinct)}
        k, n_alike = alike or (0, 1)
        base = found.get(stack, 0) if k == 0 else base
        for facts, values in zip(group, layers):
            index = values[0] if len(values) == 1 else ranks[values]
            out[(stack, facts.q_weight)] = (stack, base + n_alike * index + k)
        found[stack] = max(found.get(stack, 0), base + n_alike * len(distinct))
    return out


def _groups(sites: list[SiteFacts]) -> dict[tuple[str, str], list[SiteFacts]]:
    """Sites by stack and weight name shape, in order of appearance, each weight once (a shared
    layer called again counts once)."""
    groups: dict[tuple[str, str], dict[str, SiteFacts]] = {}
    for s in sites:
        groups.setdefault((s.stack, weight_shape(s.q_weight)), {}).setdefault(s.q_weight, s)
    return {k: list(v.values()) for k, v in groups.items()}


def weight_shape(name: str) -> str:
    """A weight's name with its numbers as #: the names of one template's layers share it."""
    return ".".join("#" if p.isdigit() else p for p in name.split("."))


Entry = tuple[tuple[str, str], list[SiteFacts], tuple[int, int] | None]


def _ordered(sites: list[SiteFacts]) -> list[Entry]:
    """The groups in stack order, a stack's templates in forward order, each with its place
    (k, n) among n templates whose layers alternate layer by layer in the forward (SAM's two-way
    transformer), else None; a stack whose templates' layers interleave otherwise is refused (the
    reader numbers one template's layers after the other's)."""
    groups = _groups(sites)
    position = {id(s): n for n, s in enumerate(sites)}
    by_stack: dict[str, list] = {}
    for key, group in groups.items():
        by_stack.setdefault(key[0], []).append((key, group))
    out = []
    for stack in sorted(by_stack, key=stack_rank):
        for run in _overlapping(by_stack[stack], position):
            if len(run) == 1:
                out.append((*run[0], None))
            elif (alike := _alternate(run, position)) is not None:
                out.extend((key, group, (k, len(alike))) for k, (key, group) in enumerate(alike))
            else:
                names = [g[0].q_weight for _, g in by_stack[stack]]
                raise Underivable("layout", f"layers of templates {names} interleave in one stack {stack!r}")
    return out


def _overlapping(entries: list, position: dict) -> list[list]:
    """The entries in runs whose spans in the forward overlap (one entry a run where none does)."""
    runs: list[list] = []
    end = -1
    for entry in entries:
        span = [position[id(s)] for s in entry[1]]
        if runs and min(span) < end:
            runs[-1].append(entry)
        else:
            runs.append([entry])
        end = max(end, max(span))
    return runs


def _alternate(run: list, position: dict) -> list | None:
    """The run's (key, group) entries in the order in which their layers alternate layer by layer
    (the forward runs layer i of every group, in that order, before layer i + 1), else None. A
    group may lack some of the layers the others number: X-CLIP's message attention of layer 0,
    over the frames' class tokens before any layer ran, the same whatever the frames (learned
    queries: no call of the tokens' own)."""
    layers = [template([f.q_weight for f in g]) for _, g in run]
    if any(t is None for t in layers):
        return None
    if any(t[1] != layers[0][1] for t in layers) and any(len(t[1][0]) != 1 for t in layers):
        return None  # the reader numbers a template of several fields by rank: the same layers in each
    for order in itertools.permutations(range(len(run))):
        keyed = [
            (position[id(f)], values, k) for k, n in enumerate(order) for f, values in zip(run[n][1], layers[n][1])
        ]
        in_forward = [(values, k) for _, values, k in sorted(keyed, key=lambda e: e[0])]
        if in_forward == sorted(in_forward):
            return [run[n] for n in order]
    return None


_NAMES = ("weight", "norm", "first_norm", "k_norm", "q_bias", "q_scale")


def _cut(a: Attention, lead: str) -> Attention | None:
    """The Attention with lead taken off the front of every name it holds (k_norm may keep it:
    another tower's); None when some name does not start with it."""
    names = [getattr(a, f) for f in _NAMES if getattr(a, f) and f != "k_norm"] + list(a.qk_norm or ())
    if not all(n.startswith(lead) for n in names):
        return None
    cut = {f: getattr(a, f).removeprefix(lead) for f in _NAMES if getattr(a, f)}
    qk_norm = tuple(n.removeprefix(lead) for n in a.qk_norm) if a.qk_norm else None
    return dataclasses.replace(a, **cut, qk_norm=qk_norm)


def with_prefixes(a: Attention, base: str, alias: tuple[str, str] | None = None) -> Attention:
    """The Attention under the prefixes a checkpoint may hold it under: the base model's
    (`model.`, `bert.`: a task head's checkpoint has it, the base model's not), and, where
    transformers saves a tower under another name than it holds it (alias: saved, held; Gemma 3's
    `language_model.model.` for `model.language_model.`), both."""
    lead = base + "." if base else ""
    if alias is not None and (cut := _cut(a, alias[0])) is not None:
        held = alias[1]
        prefixes = [alias[0], held, *(p.removeprefix(lead) for p in (alias[0], held) if lead and p.startswith(lead))]
        return dataclasses.replace(cut, prefixes=tuple(dict.fromkeys(prefixes)))
    if not base:
        return dataclasses.replace(a, prefixes=("",))
    cut = _cut(a, lead) if a.weight.startswith(lead) else None
    return dataclasses.replace(cut or a, prefixes=(lead, ""))


def _alias(group: list[SiteFacts]) -> tuple[str, str] | None:
    aliases = {f.alias for f in group}
    return aliases.pop() if len(aliases) == 1 else None


def attentions(sites: list[SiteFacts], base: str) -> tuple[Attention, ...]:
    """The Attentions of the sites, in stack order, under the base model's prefix."""
    groups = _groups(sites)
    return tuple(
        dataclasses.replace(
            with_prefixes(_merge(group, _alike(groups, stack, shape))[0], base, _alias(group)), interleave=alike
        )
        for (stack, shape), group, alike in _ordered(sites)
    )


def _alike(groups: dict, stack: str, shape: str) -> list[SiteFacts]:
    """The sites of the other stacks whose weights are named as this group's are."""
    return [s for (other, named), group in groups.items() if named == shape and other != stack for s in group]


def record(model_type: str, sites: list[SiteFacts], base: str, rope: Rotary | None, tiny: Tiny) -> Record:
    return Record(model_type, attentions(sites, base), objectives(sites), rope=rope, tiny=tiny)
