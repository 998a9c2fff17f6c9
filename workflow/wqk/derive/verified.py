"""A traced forward into a verified record, whatever library built the model (transformers'
tiny models: wqk.derive; timm's: wqk.derive.timm).

`record_of` reads each attention call's q and k back to the projections they came from (calls),
turns the calls into a `Record` (infer, assemble), saves the model and reads it back through the
generic reader, runs the logits test that hand records get (verify) and finds the rotary
embedding's layout. A record is only returned verified; otherwise the steps raise Underivable
with the category and reason (calls.CATEGORIES).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from ..adapters.record import DERIVED, Record, Rotary, Tiny
from .calls import AttentionCall, Underivable, _heads_view, _product_of, attention_calls, fit_scale, open_positions
from .infer import STACK_OF_MASK, last_layer
from .run import attention_modules


@dataclass
class Derivation:
    """A derived record, or why there is none."""

    model_type: str
    record: Record | None = None
    category: str | None = None
    reason: str | None = None
    facts: dict = field(default_factory=dict)  # what the forward showed besides the record (scale, sinks, ...)

    @property
    def ok(self) -> bool:
        return self.record is not None


def _rotary_modules(model) -> list[tuple[str, torch.nn.Module]]:
    return [
        (n, m)
        for n, m in model.named_modules()
        if any(b.endswith("inv_freq") for b, _ in m.named_buffers(recurse=False))
    ]


@contextlib.contextmanager
def no_rotation(model):
    """Every rotary frequency buffer zeroed (cos 1, sin 0: no rotation), every rotary module's
    positions made 0 (Phi-MoE's recomputes its frequencies from the config in each forward),
    every table of [sin | cos] per position (GPT-J's, CodeGen's embed_positions buffer, RoFormer's
    frozen embedding) made sin 0, cos 1, every table of unit complex numbers (Llama 4's vision
    freqs_ci) made 1, and sines and cosines taken in an attention module's own forward (V-JEPA 2's
    3-d rotary) or beside a rotary module's call (MLCD's class token) made 0 and 1 (_NoAngles);
    restored afterwards."""
    saved, hooks = [], []
    for _, buf in model.named_buffers():
        if buf.is_complex() and buf.numel() and bool(((buf.abs() - 1).abs() < 1e-5).all()):
            saved.append((buf, buf.clone()))
            buf.fill_(1)
    for _, module in _rotary_modules(model):
        hooks.append(module.register_forward_pre_hook(_at_position_zero, with_kwargs=True))
        for name, buf in module.named_buffers(recurse=False):
            if name.endswith("inv_freq"):
                saved.append((buf, buf.clone()))
                buf.zero_()
    for _, module, _ in attention_modules(model):
        hooks.append(module.register_forward_pre_hook(_unrotated_pair, with_kwargs=True))
    for name, buf in _timm_rotary_tables(model):  # timm's 2-d rotary (EVA's, the Perception Encoder's)
        saved.append((buf, buf.clone()))
        with torch.no_grad():
            if name == "pos_embed":  # [sin | cos] per position
                buf[..., : buf.shape[-1] // 2] = 0.0
                buf[..., buf.shape[-1] // 2 :] = 1.0
            else:  # its bands (angles rebuilt from them), or a table of sines alone
                buf.fill_(1.0 if name == "pos_embed_cos" else 0.0)
    for buf in _sinusoid_tables(model):
        saved.append((buf, buf.clone()))
        half = buf.shape[-1] // 2
        with torch.no_grad():
            buf[:, :half] = 0.0
            buf[:, half:] = 1.0
    angles = _NoAngles(model)
    try:
        with angles:
            yield
    finally:
        angles.close()
        for hook in hooks:
            hook.remove()
        with torch.no_grad():
            for buf, value in saved:
                buf.copy_(value)


class _NoAngles(TorchFunctionMode):
    """sin 0 and cos 1 for every sine and cosine taken in the own forward of an attention module (a
    rotary computed there from positions of its own: V-JEPA 2's) or of a module that calls a rotary
    module (learned angles beside it: MLCD's class token's)."""

    def __init__(self, model):
        from .run import attention_modules

        super().__init__()
        rotary = {id(m) for _, m in _rotary_modules(model)}
        self.angled = {id(m) for _, m, _ in attention_modules(model)}
        self.angled |= {id(m) for m in model.modules() if any(id(c) in rotary for c in m.children())}
        self.open: list[int] = []
        self.handles = []
        for module in model.modules():
            self.handles.append(module.register_forward_pre_hook(self._enter))
            self.handles.append(module.register_forward_hook(self._leave, always_call=True))

    def _enter(self, module, _):
        self.open.append(id(module))

    def _leave(self, *_):
        if self.open:
            self.open.pop()

    def close(self):
        for h in self.handles:
            h.remove()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if self.open and self.open[-1] in self.angled and name in ("sin", "cos") and isinstance(out, torch.Tensor):
            return torch.zeros_like(out) if name == "sin" else torch.ones_like(out)
        return out


def _timm_rotary_tables(model) -> list[tuple[str, torch.Tensor]]:
    """The buffers of timm's rotary modules (those holding "bands": RotaryEmbeddingCat,
    RotaryEmbedding): the bands, and the tables cached from them."""
    found = []
    for module in model.modules():
        buffers = dict(module.named_buffers(recurse=False))
        if "bands" in buffers and type(module).__module__.startswith("timm."):
            names = ("bands", "pos_embed", "pos_embed_sin", "pos_embed_cos")
            found += [(n, buffers[n]) for n in names if buffers.get(n) is not None and buffers[n].is_floating_point()]
    return found


def _sinusoid_tables(model) -> list[torch.Tensor]:
    """The [sin | cos] tables per position: embed_positions buffers, and frozen embed_positions
    weights whose position 0 reads sin 0, cos 1 (a learned table never does)."""
    found = [
        t
        for name, t in model.named_buffers()
        if name.endswith("embed_positions") and t.is_floating_point() and t.ndim == 2 and t.shape[-1] % 2 == 0
    ]
    for name, p in model.named_parameters():
        if name.endswith("embed_positions.weight") and not p.requires_grad and p.ndim == 2 and p.shape[-1] % 2 == 0:
            half = p.shape[-1] // 2
            if bool((p[0, :half] == 0).all()) and bool((p[0, half:] == 1).all()):
                found.append(p)
    return found


def _at_position_zero(module, args, kwargs):
    """A rotary module's integer position tensor (its position_ids) as zeros."""
    args = tuple(torch.zeros_like(a) if _positions(a) else a for a in args)
    kwargs = {k: torch.zeros_like(v) if k == "position_ids" and _positions(v) else v for k, v in kwargs.items()}
    return args, kwargs


def _unrotated_pair(module, args, kwargs):
    """An attention module's position_embeddings, a (cos, sin) pair whatever computed it (LightGlue's
    angles, a learned map of each keypoint's coordinates), as cos 1 and sin 0; left as it is where
    it already rotates by nothing (the other undoings reached it: CodeGen's pair is (sin, cos))."""
    pair = kwargs.get("position_embeddings")
    if isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, torch.Tensor) for t in pair):
        cos, sin = pair
        unit = cos.shape == sin.shape and cos.is_floating_point() and bool(((cos**2 + sin**2 - 1).abs() < 1e-3).all())
        still = any(bool((a == 1).all()) and bool((b == 0).all()) for a, b in ((cos, sin), (sin, cos)))
        if unit and not still:
            kwargs = {**kwargs, "position_embeddings": (torch.ones_like(cos), torch.zeros_like(sin))}
    return args, kwargs


def _positions(t) -> bool:
    return isinstance(t, torch.Tensor) and not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


def _read_blocks(folder: Path, record: Record):
    from ..adapters.reader import read_blocks, with_extras
    from ..checkpoints import open_checkpoint

    ckpt = open_checkpoint(str(folder))
    return {(b.stack, b.layer): b for b in with_extras(ckpt, read_blocks(ckpt, record), record)}


def record_of(model_type, model, steps, traces, keys, save, base: str, tiny: Tiny, modality=None) -> Derivation:
    """The verified record of a traced model, whatever library built it: its attention calls read
    into sites (keys(trace): a function of a call's head counts -> the config keys that set them, as
    heads.head_keys), the model saved by
    save(model, folder) and read back by the generic reader under the assembled record, the logits
    test on every call, then the rotary layout."""
    from .assemble import layer_numbers
    from .assemble import record as assemble
    from .infer import site_facts
    from .run import nested_towers, runs
    from .verify import check, seen

    trace, again = traces
    remedies, channels = {}, []
    if not_run := _every_attention_ran(model, trace):
        remedies["cross-attention not run (left out)"] = not_run
    try:
        calls, real = _bilinear_calls(model, steps, trace, again, channels)
    except Underivable as first:
        if first.category != "not bilinear":
            raise
        calls, last = None, first
        # relative-position terms that read the content (DeBERTa's c2p/p2c, SAM's and WavLM's tables,
        # Transformer-XL's and the conformers' projected sinusoids with their u/v biases): zeroed, as
        # the hand records' logits tests do; the form scored is the content-content part
        for biases in (False, True):
            if calls is None and (tables := _zero_position_tables(model, biases)):
                remedies["position tables zeroed"] = tables + (["every bias"] if biases else [])
                with no_rotation(model):
                    trace, again = runs(model, steps)
                try:
                    calls, real = _bilinear_calls(model, steps, trace, again, channels)
                except Underivable as e:
                    last = e
        if calls is None and last is first:
            raise
        if calls is None:  # what is left with the position terms zeroed
            raise Underivable(last.category, f"{last.reason} (with the position terms zeroed)") from None
    if channels:  # no logits between tokens: no form of two tokens' vectors to score
        remedies["attention over channels (left out)"] = sorted(set(channels))
    facts = _by_mask(_by_tower(_by_cross([site_facts(trace, c, keys(trace)) for c in calls]), nested_towers(model)))
    with tempfile.TemporaryDirectory(prefix="wqk-derive-") as tmp:
        folder = Path(tmp)
        save(model, folder)
        saved = saved_names(model, folder)
        facts = [_as_saved(f, saved) for f in facts]
        record = assemble(model_type, facts, base, None, tiny)
        layers = layer_numbers(facts)
        pairs = _blocks_of(calls, facts, _read_blocks(folder, record), layers)
        scales = [check(b, seen(c, trace, trace), seen(c, trace, again), per_head=c.per_head_scale) for c, b in pairs]
        record, rope_facts = _with_rope(model, real, record, folder, trace, calls, facts, layers)
    return Derivation(
        model_type,
        record=record,
        facts=dict(
            scale=sorted({round(s, 9) for s in scales if s == s}),
            prescale=sorted({round(f.factor, 9) for f in facts}),
            position_terms=any(f.position_terms for f in facts),
            extra_logits=max(f.extra_logits for f in facts),
            per_head_scale=any(c.per_head_scale for c in calls),  # a positive scale a head, left out of its form
            **({"query_temperature": TEMPERATURE} if any(c.q.temperature is not None for c in calls) else {}),
            modality=modality or _modality(model, nested_towers(model), facts, steps),
            **rope_facts,
            **remedies,
        ),
    )


TEMPERATURE = "a positive factor of each query's position after its QK-norm, left out of the form"


def _modality(model, towers, facts, steps=()) -> str:
    """The paper's modality: a composite with a vision (audio) tower that has attention is
    vision (audio), as the paper files GIT and Mllama; else its main input's."""
    from .run import MODALITY_BY_INPUT, declared_modality, input_modality, main_input

    with_sites = [t for t in towers if any(f.module.startswith(t.name + ".") for f in facts)]
    for kind in ("vision", "audio"):
        if any(t.modality == kind for t in with_sites):
            return kind
    main = main_input(model)
    if steps and not steps[0].module and main not in steps[0].inputs:  # its encoder's input (a VQ-VAE's pixels)
        first = next(iter(steps[0].inputs), main)
        if first in MODALITY_BY_INPUT:
            return input_modality(first)
    return declared_modality(model)


def _block(module: str) -> str:
    """The layer a module is in: its name up to its first number ("decoder.layers.0")."""
    parts = module.split(".")
    n = next((i for i, p in enumerate(parts) if p.isdigit()), len(parts) - 1)
    return ".".join(parts[: n + 1])


def _by_cross(facts):
    """Self-attention in the layers that hold cross-attention, or in a module named decoder, is
    the decoder's, whatever its mask (DETR's object queries, ViTMAE's decoder attend to each other
    bidirectionally; the objective stays the mask's)."""
    with_cross = {_block(f.module) for f in facts if f.stack == "cross"}

    def decoder(f) -> bool:
        parts = f.module.split(".")
        return (
            _block(f.module) in with_cross
            or any("decoder" in p for p in parts)
            and not any("encoder" in p for p in parts)
        )

    from .assemble import weight_shape

    # a template's layers all go one way (BLIP-2's Q-Former holds cross-attention in every other layer: its
    # self-attention layers, one template, are the decoder's, not some of them the encoder's too)
    decoders = {weight_shape(f.q_weight) for f in facts if f.stack == "encoder" and decoder(f)}
    return [
        dataclasses.replace(f, stack="decoder", attention=dataclasses.replace(f.attention, stack="decoder"))
        if f.stack == "encoder" and weight_shape(f.q_weight) in decoders
        else f
        for f in facts
    ]


def _every_attention_ran(model, trace) -> list[str]:
    """Refuse a record that would leave an attention module out unsaid: every module named an
    attention with projections of its own must have run in the forwards (SAM's mask decoder runs
    only with prompts; a tower that could not run is refused in run.plan). Cross-attention that
    reads another tower's states the forwards did not give (Mllama's text layers over images) is
    returned instead, to be said in the facts."""
    ran = {c.name for c in trace.calls}
    missing = []
    for name, module, cross in attention_modules(model):
        if name not in ran:
            if not cross:
                raise Underivable(
                    "forward", f"{name} ({type(module).__name__}) never ran in the forwards its inputs allow"
                )
            missing.append(name)
    return missing


def _by_tower(facts, towers):
    """A composite's self-attention stacks by tower: its text model's is "decoder", the vision or
    audio tower's "encoder" (the hand records' convention: CLIP, SigLIP, GIT, Mllama, Whisper),
    each with the objective its mask gives it."""
    owners = {}
    for f in facts:
        # the innermost: Qwen3-Omni's thinker holds its audio and vision encoders
        owner = next((t for t in reversed(towers) if f.module.startswith(t.name + ".")), None)
        if owner is not None:
            owners[id(f)] = owner
    with_sites = {owners[id(f)].name for f in facts if id(f) in owners}
    if len(with_sites) < 2:
        return facts
    out = []
    for f in facts:
        owner = owners.get(id(f))
        if owner is None or f.stack == "cross":
            out.append(f)
            continue
        stack = _tower_stack(owner)
        out.append(dataclasses.replace(f, stack=stack, attention=dataclasses.replace(f.attention, stack=stack)))
    return out


def _by_mask(facts):
    """Where a self-attention stack filed by tower or by cross-attention holds layers under causal
    and under open masks (BLIP-2's Q-Former, MusicGen's text encoder or RAG's question encoder beside
    a causal language model, all "decoder"), each of its layers goes to its own mask's stack: open
    to the encoder, causal to the decoder. A stack of one objective keeps its convention (SigLIP's
    open text tower stays the decoder)."""
    objectives = {}
    for f in facts:
        if f.stack != "cross":
            objectives.setdefault(f.stack, set()).add(STACK_OF_MASK.get(f.mask))
    mixed = {stack for stack, kinds in objectives.items() if len(kinds) > 1}
    return [_filed(f, STACK_OF_MASK[f.mask]) if f.stack in mixed and f.mask in STACK_OF_MASK else f for f in facts]


def _filed(f, stack: str):
    return dataclasses.replace(f, stack=stack, attention=dataclasses.replace(f.attention, stack=stack))


def _tower_stack(tower) -> str:
    """The stack a tower's self-attention is: the one its config names (an encoder-decoder's
    encoder_config and decoder_config: Dia's encoder reads text too), else its modality's."""
    named = tower.config.rpartition(".")[2].removesuffix("_config")
    if named in ("encoder", "decoder"):
        return named
    return "decoder" if tower.modality == "text" else "encoder"


# learned relative-position tables added to (or read against) the logits
POSITION_TABLES = re.compile(
    r"relative_attention_bias|relative_position_bias_table|rel_embeddings\.weight|rel_attn_embed\.weight"
    r"|rel_pos_[hw]$|pe_k\.weight"
    # Transformer-XL's relative attention (conformers, Parakeet): the sinusoids' projection, u and v
    r"|linear_pos\.weight|relative_k_proj\.weight|(^|\.)(pos_)?bias_[uv]$"
    # Funnel's and XLNet's: the position kernel (XLNet's an einsum's r), the u, v and segment biases,
    # the segment embeddings
    r"|(^|\.)r_kernel$|rel_attn\.r$|(^|\.)r_[wrs]_bias$|(^|\.)seg_embed$"
    # Shaw's relative keys, read against the queries (VITS, Granite Speech, wav2vec2-bert)
    r"|emb_rel_k$|rel_pos_emb\.weight|distance_embedding\.weight"
    # BROS's: each pair's relative box, embedded and projected, read against the queries
    r"|bbox_projection\.weight"
)


def _zero_position_tables(model, biases: bool) -> list[str]:
    """The relative-position tables zeroed, with biases every bias too (what the hand records'
    logits tests do: a table's terms reach the logits through projections with biases, DeBERTa's);
    the tables' names."""
    names = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if POSITION_TABLES.search(name):
                names.append(name)
            if POSITION_TABLES.search(name) or (biases and name.endswith(".bias")):
                p.zero_()
    return names


@dataclass
class Saved:
    """Where save_pretrained stored each parameter: under a name of its own (transformers 5 saves
    some models under older names: BEiT's encoder.layer.{i}.attention.attention.query), or as a
    block of rows of another tensor (q, k and v saved fused: GTE's qkv_proj, NomicBERT's Wqkv)."""

    names: dict[str, str]
    inside: dict[str, tuple[str, int]]  # parameter -> (saved tensor, first row)


def saved_names(model, folder: Path) -> Saved:
    """Matched by content: the tiny model's random tensors are all different."""
    from safetensors import safe_open

    tensors = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), "pt") as f:
            tensors.update({name: f.get_tensor(name).double() for name in f.keys()})
    stored = {}
    for name, t in tensors.items():
        stored.setdefault((tuple(t.shape), t.numpy().tobytes()), name)
    names, inside = {}, {}
    row_index: dict[str, dict[bytes, int]] = {}  # saved tensor -> its rows' places, made where needed
    for name, p in model.named_parameters(remove_duplicate=False):
        value = p.detach().double()
        key = (tuple(value.shape), value.numpy().tobytes())
        if key in stored:
            names[name] = stored[key]
            continue
        for saved, t in tensors.items():
            if t.ndim == value.ndim and t.shape[1:] == value.shape[1:] and t.shape[0] > value.shape[0]:
                rows = (t == value[0]).reshape(len(t), -1).all(1).nonzero().flatten().tolist()
                hit = next((r for r in rows if torch.equal(t[r : r + value.shape[0]], value)), None)
                if hit is None:
                    if saved not in row_index:
                        row_index[saved] = {r.numpy().tobytes(): i for i, r in enumerate(t.reshape(len(t), -1))}
                    hit = _rows_reordered(row_index[saved], value)
                if hit is not None:
                    inside[name] = (saved, hit)
                    break
    return Saved(names, inside)


def _rows_reordered(where: dict[bytes, int], value: torch.Tensor) -> int | None:
    """The first row of a block of a saved tensor (where: its rows' places, by their bytes) that
    holds value's rows in another order (q and k saved fused, each head's rows permuted from
    rotate-half pairs back to interleaved ones: Step 3.5's vision tower); None where there is none.
    The reader takes the rows as stored: the form of each head is the same under one order of its
    rows for q and k, and the logits test (and the rotary's layout, found at real positions) says
    whether the stored order is read right."""
    found = [where.get(row.numpy().tobytes()) for row in value.reshape(len(value), -1)]
    if any(i is None for i in found) or max(found) - min(found) + 1 != len(found):
        return None
    return min(found)


def _as_saved(facts, saved: Saved):
    def name_of(name):
        if name is None:
            return None
        if name not in saved.names:
            raise Underivable(
                "layout", f"{name} is not stored as the model holds it (transformers converts it on load or save)"
            )
        return saved.names[name]

    held = facts.q_weight
    facts = _fused_on_save(_bias_saved_apart(facts, saved), saved)
    q_weight = name_of(facts.q_weight)
    k_weight = name_of(facts.k_weight)
    qk_norm = tuple(name_of(n) for n in facts.qk_norm) if facts.qk_norm else None
    if facts.kv_from:  # another layer's keys: named at the queries' layer, as the record's template reads them
        k_weight = at_layer_of(k_weight, q_weight)
        qk_norm = (qk_norm[0], at_layer_of(qk_norm[1], qk_norm[0])) if qk_norm else None
    return dataclasses.replace(
        facts,
        alias=_prefix_alias(q_weight, held),
        q_weight=q_weight,
        k_weight=k_weight,
        norm=name_of(facts.norm),
        q_bias=name_of(facts.q_bias),
        feeding_norm=name_of(facts.feeding_norm),
        k_norm=last_layer(name_of(facts.k_norm), saved.names.values(), q_weight) if facts.k_norm else None,
        qk_norm=qk_norm,
        kv_from=False,
        q_scale=name_of(facts.q_scale),
    )


def at_layer_of(name: str, like: str) -> str:
    """name with the numbers in which it differs from like (of as many parts) taken from like:
    layers.3.self_attn.k_proj.weight like layers.4.self_attn.q_proj.weight: layers.4.self_attn.k_proj.weight."""
    parts, other = name.split("."), like.split(".")
    if len(parts) != len(other):
        raise Underivable("layout", f"{name} and {like} are not named alike: no layer of the one names the other's")
    return ".".join(o if p.isdigit() and o.isdigit() else p for p, o in zip(parts, other))


def _bias_saved_apart(facts, saved: Saved):
    """A query bias that transformers saves under a name of its own (VideoMAE's query.bias as
    q_bias) beside a key projection without one: the record's q_bias, no bias derived from the
    weights' names."""
    if facts.attention.bias != DERIVED or facts.q_weight == facts.k_weight:
        return facts
    held_q, held_k = (w.rpartition("weight")[0] + "bias" for w in (facts.q_weight, facts.k_weight))
    saved_q = saved.names.get(held_q)
    beside = saved.names.get(facts.q_weight, "").rpartition("weight")[0] + "bias"
    if saved_q is None or saved_q == beside or held_k in saved.names:
        return facts
    return dataclasses.replace(facts, q_bias=held_q, attention=dataclasses.replace(facts.attention, bias=None))


def _prefix_alias(saved: str, held: str) -> tuple[str, str] | None:
    """(saved prefix, held prefix) of two names with one layer part and end: Gemma 3's
    language_model.model.layers.0... saved for model.language_model.layers.0..."""
    s, h = saved.split("."), held.split(".")
    n = 0
    while n < min(len(s), len(h)) and s[-1 - n] == h[-1 - n]:
        n += 1
    sp, hp = s[: len(s) - n], h[: len(h) - n]
    if sp == hp or not any(p.isdigit() for p in s[len(s) - n :]):
        return None
    return ("".join(p + "." for p in sp), "".join(p + "." for p in hp))


def _fused_on_save(facts, saved: Saved):
    """Separate q and k projections that save_pretrained stores as the first two blocks of one
    [q | k | v] tensor, or after a gate's block of q's size ([g | q | k | v]): the record reads
    that tensor, fused "blocks" or "gate_blocks" (the logits test says whether the gate is one)."""
    q, k = facts.q_weight, facts.k_weight
    if q == k or q in saved.names or q not in saved.inside or k not in saved.inside:
        return facts
    (tensor, q_row), (k_tensor, k_row) = saved.inside[q], saved.inside[k]
    q_rows = facts.heads * _head_dim(facts)
    layout = {0: "blocks", q_rows: "gate_blocks"}.get(q_row)  # gate_blocks: HRM's [g | q | k | v]
    if (
        tensor != k_tensor
        or layout is None
        or k_row != q_row + q_rows
        or facts.attention.fused
        or facts.attention.q_gate
    ):
        raise Underivable("layout", f"{q} and {k} are saved inside {tensor}, {k_tensor} in an order no layout names")
    bias = facts.attention.bias
    if bias is not None:
        bias_name = tensor.rpartition("weight")[0] + "bias"
        if not any(n == bias_name for n, _ in saved.inside.values()):
            raise Underivable("layout", f"{tensor}'s biases are not saved beside it")
    saved.names[tensor] = tensor
    attention = dataclasses.replace(facts.attention, fused=layout, weight="{i}")
    return dataclasses.replace(facts, q_weight=tensor, k_weight=tensor, attention=attention)


def _head_dim(facts) -> int:
    return facts.head_dim


def _bilinear_calls(model, steps, trace, again, channels: list[str]):
    """The attention calls of the traces (run without rotation) and the forwards at the real
    positions, refused where the softmax input is no linear map of q.k in either; the modules of
    attention over channels, left out, listed in channels."""
    from .run import runs

    channels.clear()
    calls = attention_calls(trace, again, channels)
    real = runs(model, steps)
    _linear_at_real_positions(trace, calls, real)
    return calls, real


def _blocks_of(calls: list[AttentionCall], facts, blocks, layers):
    """(call, the block the reader read for it) for each call; raises where the reader found none
    for a call, or read a block no call ran as whose tensors another stack reads too (templates of
    two stacks that name the same tensors, which the record does not tell apart)."""
    pairs = []
    for c, f in zip(calls, facts):
        key = layers[(f.stack, f.q_weight)]
        block = blocks.get(key)
        if block is None:
            raise Underivable("verify", f"the reader found no {key[0]} layer {key[1]} ({c.call.name})")
        pairs.append((c, block))
    ran = {layers[(f.stack, f.q_weight)] for f in facts}
    # a block no call ran as, whose tensors another stack's block reads too (a layer its forward ran over
    # copies of one token is no call and reads its own: X-CLIP's first message attention, over one class
    # embedding a frame)
    extra = sorted(
        k
        for k, b in blocks.items()
        if k not in ran and any(o.stack != k[0] and torch.equal(o.q, b.q) for o in blocks.values())
    )
    if extra:
        listed = ", ".join(f"{stack} layer {layer}" for stack, layer in extra[:4])
        raise Underivable(
            "layout",
            f"the record reads {listed} from the tiny model, as no attention call ran them (a template of one stack "
            "that names another's tensors too): no record field tells its layers apart",
        )
    return pairs


def _linear_at_real_positions(trace, calls: list[AttentionCall], real) -> None:
    """Refuse a call whose softmax input, at the real positions, is no linear map of its q.k
    product: a term of content and position that the forwards without rotation hid, each query
    read against a table of sinusoids of relative positions (Transformer-XL's, the conformers'
    pos_bias_u/v attention: with no rotation the table is the same at every position)."""
    one, other = real
    if len(one.softmaxes) != len(trace.softmaxes) or len(other.softmaxes) != len(trace.softmaxes):
        return
    for call in calls:
        index = trace.softmaxes.index(call.softmax)
        first, second = one.softmaxes[index], other.softmaxes[index]
        products = _product_of(one, first), _product_of(other, second)
        if any(p is None or p.out.shape != call.product.out.shape for p in products):
            continue
        batch = call.product.out[..., 0, 0].numel() // call.heads
        cut = slice(call.key_offset, call.key_offset + call.product.out.shape[-1])
        scores, others = (_heads_view(s.scores, batch)[..., cut] for s in (first, second))
        outs = (_heads_view(p.out, batch) for p in products)
        try:
            fit_scale(scores, others, *outs, open_positions(scores, others), per_head=call.per_head_scale)
        except Underivable as e:
            raise Underivable(
                "not bilinear",
                f"{call.call.name}: at the real positions, {e.reason}: a term of content and "
                "position (relative positions read by the queries), hidden without rotation",
            ) from None


def _with_rope(model, real, record: Record, folder: Path, trace, calls, facts, layers) -> tuple[Record, dict]:
    """The record with the Rotary under which the forward's own scores (default positions, the
    forwards real) are the rotated form of its blocks; unchanged when the scores need no rotation."""

    from .verify import seen

    one, other = real
    blocks = _blocks_of(calls, facts, _read_blocks(folder, record), layers)
    pairs = [((seen(c, trace, one), seen(c, trace, other)), b) for c, (_, b) in zip(calls, blocks)]
    needs = [(s, b) for s, b in pairs if not _passes(s, b, False)]
    if not needs:
        return record, {}
    stacks = sorted({b.stack for _, b in needs}, key=lambda st: st != "decoder")  # the text decoder first
    candidates = [(module, layout) for _, module in _rotary_modules(model) for layout in LAYOUTS]
    # no rotary module: transformers' fixed formula on the config (GPT-J's rotary_dim, base 10000)
    if hasattr(model, "config"):  # a transformers model
        candidates += [(None, layout) for layout in LAYOUTS]
    for module, layout in candidates:
        rope = (
            _rotary(model, module, layout, stacks[0])
            if module is not None
            else Rotary(model.config.model_type, None, layout, stacks[0])
        )
        fits = [st for st in stacks if _rope_fits(record, rope, st, needs, folder)]
        if stacks[0] in fits:
            rope = dataclasses.replace(rope, also=tuple(st for st in fits if st != stacks[0]))
            left = [st for st in stacks if st not in fits]
            note = f"{rope.rotary_class or 'fixed formula'} ({rope.layout})" + (
                f"; the {', '.join(left)} stack's rotation is over no 1-d positions: left out" if left else ""
            )
            return dataclasses.replace(record, rope=rope), {"rope": note}
    return record, {
        "rope": "rotary, but no 1-d rotation of either layout turns the blocks into the scores at real positions "
        "(a 2-d rotary, or a QK-norm's gains applied after the rotation: Hunyuan's): left out of the record"
    }


def _rope_fits(record: Record, rope: Rotary, stack: str, needs, folder: Path) -> bool:
    """Whether the stack's scores at real positions are its blocks' form rotated by rope."""
    candidate = dataclasses.replace(record, rope=dataclasses.replace(rope, stack=stack, also=()))
    try:
        blocks = _read_blocks(folder, candidate)
    except Exception:
        return False
    return all(_passes(s, blocks[(b.stack, b.layer)], True) for s, b in needs if b.stack == stack)


LAYOUTS = ("half", "interleaved")


def _passes(s, block, with_rope: bool) -> bool:
    from .verify import check

    try:
        check(block, *s, with_rope)
        return True
    except Underivable:
        return False


def _rotary(model, module, layout: str, stack: str) -> Rotary:
    from .heads import config_path

    config = getattr(module, "config", None)
    sub = config_path(model.config, config) if config is not None else ""
    package = type(module).__module__.split(".")[-2]
    types = getattr(config, "layer_types", None) if config is not None else None
    per_type = bool(types) and any(hasattr(module, f"{t}_inv_freq") for t in set(types))
    return Rotary(
        model.config.model_type,
        type(module).__name__,
        layout=layout,
        stack=stack,
        sub=(sub or "").rstrip(".") or None,
        per_layer_type=per_type,
        module=package if package != model.config.model_type else None,
    )
