"""What a model's own forward does around each attention product, recorded op by op.

`Tracer` runs a forward under a TorchFunctionMode and module hooks, and keeps:
- every projection: a call of linear (nn.Linear, packed in-projections), addmm (GPT-2's Conv1D)
  or matmul with a weight parameter, with its input and output and the parameter's name;
- every product of two activations (matmul, bmm, einsum of two operands), with its operands as
  A [..., Tq, c] and K [..., Tk, c] (out = A K^T);
- every softmax input (eager attention), and every scaled_dot_product_attention call as the
  product and the scores the eager path would have computed (models that always call SDPA);
- the inputs and output of every module call (norms, attention modules), with the stack of
  module calls each op ran in.
Nothing here knows a model type: derive.infer reads the events.
"""

from __future__ import annotations

import contextlib
import math
import string
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode

F = torch.nn.functional


@dataclass
class Projection:
    seq: int
    calls: tuple[int, ...]  # the module calls open when it ran (indices into Trace.calls)
    weight: str  # parameter name
    bias: str | None
    conv1d: bool  # weight [in, out] (addmm, x @ W), not nn.Linear's [out, in]
    x: torch.Tensor  # input [..., d_in]
    out: torch.Tensor  # output [..., d_out]
    groups: int = 1  # a grouped 1x1 convolution's: a block-diagonal weight stored [out, in / groups, 1]


@dataclass
class Product:
    seq: int
    calls: tuple[int, ...]
    a: torch.Tensor  # [..., Tq, c]
    k: torch.Tensor  # [..., Tk, c]
    out: torch.Tensor  # [..., Tq, Tk]


@dataclass
class Softmax:
    seq: int
    calls: tuple[int, ...]
    scores: torch.Tensor  # the softmax input
    product: Product | None = None  # set for an SDPA call: its own product


@dataclass
class ModuleCall:
    index: int
    name: str
    module: torch.nn.Module
    args: tuple
    kwargs: dict
    parent: int | None
    output: object = None
    seq_start: int = 0
    seq_end: int = 0


@dataclass
class Trace:
    projections: list[Projection] = field(default_factory=list)
    products: list[Product] = field(default_factory=list)
    softmaxes: list[Softmax] = field(default_factory=list)
    calls: list[ModuleCall] = field(default_factory=list)
    parameters: dict = field(default_factory=dict)  # name -> parameter of the traced model
    added: set[int] = field(default_factory=set)  # ids of the tensors some addition read (residual adds)
    _alive: list = field(default_factory=list)  # those tensors, kept so that their ids stay theirs


_MATMULS = {"matmul", "__matmul__", "bmm", "baddbmm"}
_ADDS = {"add", "__add__", "__radd__", "__iadd__", "add_"}
_SOFTMAX = {"softmax"}


def _keep(t: torch.Tensor) -> torch.Tensor:
    """A copy: the model may change a tensor in place after the op (attn_weights += mask)."""
    return t.detach().clone()


def _name(func) -> str:
    return getattr(func, "__name__", "")


def _positions(x: torch.Tensor) -> torch.Tensor:
    """A convolution's [B, C, *positions] as [B, positions, C]."""
    return x.flatten(2).transpose(1, 2)


CONV_ARGS = ("stride", "padding", "dilation", "groups")  # after (input, weight, bias)


def _conv_args(args, kwargs) -> dict:
    return dict(zip(CONV_ARGS, args[3:]), **{k: kwargs[k] for k in CONV_ARGS if k in kwargs})


def _plain_conv(conv: dict) -> bool:
    """Whether a convolution call's arguments (_conv_args) have no stride, padding or dilation (their
    defaults): a 1x1 one is then a projection of each position, block-diagonal where it has groups."""
    unit = {"stride": 1, "padding": 0, "dilation": 1}
    return all(_all_equal(v, unit[k]) for k, v in conv.items() if k in unit)


def _all_equal(v, n: int) -> bool:
    return all(x == n for x in v) if isinstance(v, (list, tuple)) else v == n or v == "valid" and n == 0


class Tracer(TorchFunctionMode):
    """Records a forward's events (see the module docstring) into `trace`."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.trace = Trace(parameters=dict(model.named_parameters(remove_duplicate=False)))
        self.params = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
        self.open: list[int] = []
        self.seq = 0
        self._inside = 0
        self._handles = []
        names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
        for module in model.modules():
            self._handles.append(module.register_forward_pre_hook(self._pre(names[id(module)]), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post, with_kwargs=True, always_call=True))

    def close(self):
        for h in self._handles:
            h.remove()

    def _pre(self, name):
        def hook(module, args, kwargs):
            call = ModuleCall(
                len(self.trace.calls), name, module, args, dict(kwargs), self.open[-1] if self.open else None
            )
            call.seq_start = self.seq
            self.trace.calls.append(call)
            self.open.append(call.index)

        return hook

    def _post(self, module, args, kwargs, output):
        if self.open:
            call = self.trace.calls[self.open.pop()]
            call.output = output
            call.seq_end = self.seq

    def _same_values(self, t: torch.Tensor) -> str | None:
        """The 1-d parameter holding exactly t's values (a slice of a concatenation of parameters)."""
        for name, p in self.trace.parameters.items():
            if p.ndim == 1 and p.shape == t.shape and torch.equal(p, t) and bool(t.abs().max() > 0):
                return name
        return None

    def _param(self, t) -> str | None:
        return self.params.get(id(t)) if isinstance(t, torch.nn.Parameter) else None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._inside:  # an op called from inside another one (F.softmax -> Tensor.softmax)
            return func(*args, **kwargs)
        self._inside += 1
        try:
            out = func(*args, **kwargs)
        finally:
            self._inside -= 1
        with torch._C.DisableTorchFunction():
            self._record(_name(func), args, kwargs, out)
        return out

    def _record(self, name: str, args, kwargs, out):
        calls = tuple(self.open)
        self.seq += 1
        if name in _ADDS:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            self.trace.added.update(id(a) for a in tensors)
            self.trace._alive.extend(tensors)
        elif name == "linear":
            x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            if (wn := self._param(w)) is not None and w.ndim == 2:
                bn = self._param(b)
                if isinstance(b, torch.Tensor) and bn is None:
                    # a bias made in the forward (BEiT's cat(q_bias, zeros, v_bias)): an addition
                    # after the projection, each part then read back to the parameter it holds
                    out = out - b
                self.trace.projections.append(Projection(self.seq, calls, wn, bn, False, _keep(x), _keep(out)))
        elif name in ("conv1d", "conv2d"):
            # a 1x1 convolution over [B, C, T] (SqueezeBERT) or [B, C, H, W] (a VQ-VAE's attention
            # block: Chameleon's): a projection of each position, positions flattened to [B, T, C]
            x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            wn = self._param(w)
            conv = _conv_args(args, kwargs)
            pointwise = w.ndim == x.ndim and all(n == 1 for n in w.shape[2:]) and _plain_conv(conv)
            groups = int(conv.get("groups", 1))  # > 1: a block-diagonal projection (SqueezeBERT's q_groups)
            if wn is not None and pointwise and x.ndim in (3, 4) and w.shape[1] * groups == x.shape[1]:
                self.trace.projections.append(
                    Projection(
                        self.seq, calls, wn, self._param(b), False, _keep(_positions(x)), _keep(_positions(out)), groups
                    )
                )
        elif name == "addmm":
            b, x, w = args[:3]
            if (wn := self._param(w)) is not None:
                self.trace.projections.append(
                    Projection(self.seq, calls, wn, self._param(b), True, _keep(x), _keep(out))
                )
        elif name in _MATMULS:
            if name == "baddbmm":  # input + alpha * batch1 @ batch2 (BLOOM: ALiBi as the input)
                a = args[1] if len(args) > 1 else kwargs.get("batch1")
                b = args[2] if len(args) > 2 else kwargs.get("batch2")
            else:
                a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other")
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                return
            if (wn := self._param(b)) is not None and b.ndim == 2:
                self.trace.projections.append(Projection(self.seq, calls, wn, None, True, _keep(a), _keep(out)))
            elif b.ndim == 2 and (wn := self._param(b._base)) is not None and b._base.shape == b.shape[::-1]:
                # x @ W.T (FalconLinear): nn.Linear's orientation
                self.trace.projections.append(Projection(self.seq, calls, wn, None, False, _keep(a), _keep(out)))
            elif self._param(a) is None and a.ndim >= 3 and b.ndim >= 3:
                self.trace.products.append(Product(self.seq, calls, _keep(a), _keep(b.transpose(-1, -2)), _keep(out)))
        elif name == "einsum":
            self._einsum(calls, args, out)
        elif name in _SOFTMAX:
            x = args[0]
            if isinstance(x, torch.Tensor) and x.ndim >= 3:
                self.trace.softmaxes.append(Softmax(self.seq, calls, x.detach().clone()))
        elif name == "scaled_dot_product_attention":
            self._sdpa(calls, args, kwargs)
        elif name == "multi_head_attention_forward":
            self._mha(calls, args, kwargs)

    def _mha(self, calls, args, kwargs):
        """torch's multi_head_attention_forward runs as one call here: its projections, product and
        scores recomputed as its documented algorithm computes them (WavLM)."""
        names = (
            "query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight", "in_proj_bias", "bias_k",
            "bias_v", "add_zero_attn", "dropout_p", "out_proj_weight", "out_proj_bias", "training",
            "key_padding_mask", "need_weights", "attn_mask", "use_separate_proj_weight", "q_proj_weight",
            "k_proj_weight",
        )  # fmt: skip
        a = dict(zip(names, args), **kwargs)
        query, key = a["query"], a["key"]
        if a.get("bias_k") is not None or a.get("add_zero_attn") or query.ndim != 3 or key.ndim != 3:
            return
        e, h = query.shape[-1], a["num_heads"]
        sides = []
        for n, x, own in ((0, query, a.get("q_proj_weight")), (1, key, a.get("k_proj_weight"))):
            weight = own if a.get("use_separate_proj_weight") else a["in_proj_weight"]
            wname = self._param(weight)
            bias = a.get("in_proj_bias")
            rows = slice(0, e) if a.get("use_separate_proj_weight") else slice(n * e, (n + 1) * e)
            b = bias[n * e : (n + 1) * e] if bias is not None else None
            xb = x.transpose(0, 1)  # [B, T, E]
            if wname is None:
                return
            out = F.linear(xb, weight, None if a.get("use_separate_proj_weight") else bias)
            bname = self._param(bias)
            if a.get("use_separate_proj_weight") and b is not None:
                out = out + b
                bname = self._same_values(b)  # WavLM concatenates q_proj.bias, k_proj.bias, v_proj.bias
            self.trace.projections.append(Projection(self.seq, calls, wname, bname, False, _keep(xb), _keep(out)))
            self.seq += 1
            sides.append(out[..., rows])
        bsz, tq, tk = query.shape[1], query.shape[0], key.shape[0]
        hd = e // h
        q = sides[0].reshape(bsz, tq, h, hd).transpose(1, 2) / math.sqrt(hd)
        k = sides[1].reshape(bsz, tk, h, hd).transpose(1, 2)
        out = q @ k.transpose(-1, -2)
        scores = out.clone()
        mask = a.get("attn_mask")
        if mask is not None:
            mask = mask.reshape(bsz, h, tq, tk) if mask.ndim == 3 else mask
            scores = scores.masked_fill(mask, -math.inf) if mask.dtype == torch.bool else scores + mask
        padding = a.get("key_padding_mask")
        if padding is not None:
            scores = scores.masked_fill(padding[:, None, None, :].bool(), -math.inf)
        product = Product(self.seq, calls, _keep(q), _keep(k), _keep(out))
        self.trace.products.append(product)
        self.trace.softmaxes.append(Softmax(self.seq, calls, _keep(scores), product))

    def _einsum(self, calls, args, out):
        eq, ops = args[0], args[1:]
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = tuple(ops[0])
        if not isinstance(eq, str) or len(ops) != 2 or "->" not in eq or "..." in eq:
            return
        ins, target = eq.replace(" ", "").split("->")
        sa, sb = ins.split(",")
        contracted = [c for c in sa if c in sb and c not in target]
        if len(contracted) == 1 and self._param(ops[0]) is None and (wn := self._param(ops[1])) is not None:
            self._einsum_projection(calls, sa, sb, target, contracted[0], ops[0], wn, out)
            return
        if len(contracted) != 1 or any(self._param(o) is not None for o in ops) or len(target) < 3:
            return
        c = contracted[0]
        i, j = target[-2], target[-1]
        if i not in sa or j not in sb:
            return
        batch = target[:-2]
        if any(ch not in sa or ch not in sb for ch in batch):
            return
        a = torch.einsum(f"{sa}->{batch}{i}{c}", ops[0])
        k = torch.einsum(f"{sb}->{batch}{j}{c}", ops[1])
        self.trace.products.append(Product(self.seq, calls, a, k, _keep(out)))

    def _einsum_projection(self, calls, sa: str, sb: str, target: str, c: str, x, weight: str, out) -> None:
        """An einsum of activations with a parameter whose first dim is the one contracted, its others
        the output's last ones (XLNet's "ibh,hnd->ibnd" over its q, k parameters [d_model, heads, head_dim]):
        x @ W, W the parameter [d_in, ...] flattened to [d_in, d_out] (conv1d's orientation)."""
        kept = sa.replace(c, "")
        if sb[0] != c or target != kept + sb[1:] or not sa.endswith(c):
            return
        rows = out.reshape(*out.shape[: len(kept)], -1)
        self.trace.projections.append(Projection(self.seq, calls, weight, None, True, _keep(x), _keep(rows)))

    def _sdpa(self, calls, args, kwargs):
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        bound = dict(zip(names, args), **kwargs)
        q, k = bound["query"], bound["key"]
        if q.shape[-3] != k.shape[-3]:  # enable_gqa: key heads shared by groups of query heads
            k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        scale = bound.get("scale") or 1 / math.sqrt(q.shape[-1])
        out = q @ k.transpose(-1, -2)
        scores = out * scale
        tq, tk = q.shape[-2], k.shape[-2]
        if bound.get("is_causal"):
            open_ = torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq)
            scores = scores.masked_fill(~open_, -math.inf)
        mask = bound.get("attn_mask")
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
        product = Product(self.seq, calls, _keep(q), _keep(k), out)
        self.trace.products.append(product)
        self.trace.softmaxes.append(Softmax(self.seq, calls, scores, product))


@contextlib.contextmanager
def tracing(model: torch.nn.Module):
    """Trace the forward passes run inside the block: yields the Trace (its banded softmaxes
    unbanded when the block ends)."""
    tracer = Tracer(model)
    try:
        with torch.no_grad(), tracer:
            yield tracer.trace
    finally:
        tracer.close()
    unband(tracer.trace)


def unband(trace: Trace) -> None:
    """Softmaxes over a sliding window's bands, as Longformer's (and LED's encoder) computes them:
    scores [B, T, H, 2w + 1], column j the key t - w + j, from a product of overlapping chunks
    [B * H, C, 2w, c] of the queries and keys (chunk i: tokens i * w to i * w + 2w). Each becomes the
    softmax of scores [B, H, T, T] (keys outside the band closed, -inf) over the product of the
    whole queries and keys, which it is given as its own, as an SDPA call's is."""
    for n, softmax in enumerate(trace.softmaxes):
        x = softmax.scores
        if softmax.product is not None or x.ndim != 4 or x.shape[-1] % 2 == 0 or x.shape[-1] < 3:
            continue
        b, t, h, width = x.shape
        w = width // 2
        chunked = next(
            (
                p
                for p in reversed(trace.products)
                if p.seq < softmax.seq and p.calls == softmax.calls[: len(p.calls)] and p.a.ndim == 4
                and p.a.shape[0] == b * h and p.a.shape[2] == 2 * w and p.k.shape == p.a.shape
                and (p.a.shape[1] + 1) * w == t
            ),
            None,
        )  # fmt: skip
        if chunked is None:
            continue
        q, k = (_unchunked(c, w, t).reshape(b, h, t, -1) for c in (chunked.a, chunked.k))
        scores = torch.full((b, h, t, t), -math.inf, dtype=x.dtype)
        key = torch.arange(t)[:, None] - w + torch.arange(width)[None, :]  # [T, 2w + 1]
        inside = (key >= 0) & (key < t)
        rows = torch.arange(t)[:, None].expand(t, width)[inside]
        scores[:, :, rows, key[inside]] = x.permute(0, 2, 1, 3)[:, :, inside]
        product = Product(chunked.seq, chunked.calls, q, k, q @ k.transpose(-1, -2))
        trace.softmaxes[n] = Softmax(softmax.seq, softmax.calls, scores, product)


def _unchunked(chunks: torch.Tensor, w: int, t: int) -> torch.Tensor:
    """[N, C, 2w, c] chunks overlapping by w -> [N, T, c]."""
    out = chunks.new_zeros(chunks.shape[0], t, chunks.shape[-1])
    for i in range(chunks.shape[1]):
        out[:, i * w : i * w + 2 * w] = chunks[:, i]
    return out


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype | None):
    """torch's default dtype inside the block (None: as it is)."""
    before = torch.get_default_dtype()
    if dtype is not None:
        torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def numbered(name: str) -> tuple[str, tuple[int, ...]]:
    """A dotted name as a template with one field per number, and the numbers:
    "layers.3.attn.q.weight" -> ("layers.{i}.attn.q.weight", (3,))."""
    parts, values, fields = name.split("."), [], iter("ijlmnorstuvw")
    for n, part in enumerate(parts):
        if part.isdigit():
            values.append(int(part))
            parts[n] = "{" + next(fields) + "}"
    return ".".join(parts), tuple(values)


def template_fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]
