"""`--method authors`: what the paper authors' published code computed, mistakes included.

It exists to prove the paper's errata: where the published numbers differ from ours, the
authors' method on the same weights must reproduce them. It is a transformation of the
exact block stream (plus, for the four fused-qkv types, a re-read of the fused weight) and
one metrics option (directionality 0 where ours is NaN). The authors' code
(matteosaponati/attention-geometry, utils/funs.py get_M_fullmodel/get_M_shard, utils/scores.py)
forms one d x d M per layer, for layers in range(config.num_hidden_layers):

a. Grouped-query attention: Wk.view(d, dh, n_kv).repeat_interleave(H // n_kv, 0).view(d, d)
   tiles the key heads: query head h meets key head h mod n_kv (not h // group). Here the
   query heads are regrouped instead (block.heads keeps their labels): key head j gets
   query heads j, j + n_kv, j + 2 n_kv, ..., so per head M_h = Q_h K_(h mod n_kv)^T and per
   layer their sum, at the cost of the exact method (tiling K would score n_heads key heads).
b, c. GPT-NeoX, DeBERTa v1, ModernBERT and Phi-3 go through one branch: Wq = W[:d, :],
   Wk = W[d:2d, :] of the fused [3d, d] nn.Linear weight (out, in), NOT transposed, and
   M = Wq @ Wk.T. For GPT-NeoX and DeBERTa v1 the slices are wrong (rows interleaved per
   head: [q_h k_h v_h]); for all four the transpose is missing: the right form is
   W_q^T W_k, on the input (embedding) space, and M = W_q W_k^T is a d x d form on the
   OUTPUT space (rows and columns index the q and k output features). It is well defined
   because each slice has d rows. As blocks, the factors are Q = Wq and K = Wk themselves
   ([d_out, d_in]), with "heads" the column blocks of dh input features (as the authors'
   code slices its Wq elsewhere): q[h] = Wq[:, h*dh:(h+1)*dh], so sum_h M_h = Wq Wk^T.
   Per-head rows of these four types mean no more than that.
d. Layer counts from num_hidden_layers: GIT's is the text stack's, so image-encoder layers
   >= num_hidden_layers are dropped. SpeechT5's config.json has no num_hidden_layers; the
   authors' scored 5 decoder layers of 6 on all three checkpoints, the value of
   speech_decoder_postnet_layers (models.csv: num_hidden_layers aliased to it in their
   transformers; today's alias, encoder_layers = 12, would have run past the 6 layers), so
   decoder layers >= speech_decoder_postnet_layers are dropped. Dropped, never aliased:
   the kept layers keep their numbers.
e. MusicGen: the "decoder" read encoder_attn: the cross-attention blocks become stack
   "decoder" and the decoder self-attention is dropped.
f. Mllama: only vision_model.transformer.layers (the local layers, numbered first by the
   adapter) are read: encoder layers >= vision_config.num_hidden_layers (the global ones)
   are dropped.
g. Directionality: `if denom_excess == 0: score = 0.0`, so 0 also where ours is NaN
   (M = 0, or non-finite weights, whose NaN threshold nothing exceeds): metrics'
   zero_directionality, applied by score_table for method "authors".
Everything else (separate q/k projections transposed, per-layer sum over heads) is what
the exact method computes. Matrices files carry neither the config nor the fused weights:
the authors' method needs the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .blocks import AttentionBlock
from .checkpoints import Checkpoint

if TYPE_CHECKING:
    from .adapters.record import Authors


def open_authors(ckpt: Checkpoint, name: str | None = None, synthetic: bool = False):
    """(ModelInfo, block stream of the authors' method) of an opened checkpoint."""
    from .adapters import model_blocks

    info, blocks = model_blocks(ckpt, name, synthetic)
    return info, authors_blocks(ckpt, blocks)


def _authors(ckpt: Checkpoint) -> Authors:
    from .adapters import get_record

    return get_record(ckpt.model_type, ckpt.model_id, ckpt.config).authors


def authors_blocks(ckpt: Checkpoint, blocks: Iterable[AttentionBlock]) -> Iterator[AttentionBlock]:
    """The blocks the authors' code would have scored, from a checkpoint and its exact blocks."""
    if _authors(ckpt).untransposed:
        yield from _fused_blocks(ckpt)
        return
    place = _placement(ckpt)
    for b in blocks:
        stack = place(b.stack, b.layer)
        if stack is not None:
            yield _tiled(b if stack == b.stack else AttentionBlock(stack, b.layer, b.q, b.k, form=b.form))


def _placement(ckpt: Checkpoint):
    """(stack, layer) of an exact block -> the stack the authors' code filed it under, or None
    where their code did not read it: the record's Authors.stacks (MusicGen's cross-attention
    as its "decoder", the self-attention dropped), layers past the authors' counts dropped."""
    authors, limits = _authors(ckpt), _layer_limits(ckpt)

    def place(stack: str, layer: int) -> str | None:
        if layer >= limits.get(stack, layer + 1):
            return None
        return authors.stacks.get(stack, stack)

    return place


def _tiling(b: AttentionBlock) -> tuple[int, ...] | None:
    """Key head h mod n_kv for query head h: the query heads regrouped by h mod n_kv (None:
    h mod n_kv = h // group, when n_kv is 1 or n_heads)."""
    if 1 < b.n_kv_heads < b.n_heads:
        return tuple(h for j in range(b.n_kv_heads) for h in range(j, b.n_heads, b.n_kv_heads))
    return None


def _tiled(b: AttentionBlock) -> AttentionBlock:
    order = _tiling(b)
    return b if order is None else AttentionBlock(b.stack, b.layer, b.q[list(order)], b.k, heads=order, form=b.form)


@dataclass(frozen=True)
class Placed:
    """Where the authors' code filed an exact block: its stack, and the order of its query
    heads (None: as they are), from which the same pass over the weights scores both methods."""

    stack: str
    order: tuple[int, ...] | None


def placements(ckpt: Checkpoint) -> Callable[[AttentionBlock], Placed | None] | None:
    """Per exact block of the checkpoint, where the authors' code filed it (None: a layer their
    code did not read); None for the types whose authors' blocks are not the exact ones (a fused
    qkv read untransposed: `authors_blocks` reads them again)."""
    if _authors(ckpt).untransposed:
        return None
    place = _placement(ckpt)

    def placed(b: AttentionBlock) -> Placed | None:
        stack = place(b.stack, b.layer)
        return None if stack is None else Placed(stack, _tiling(b))

    return placed


def _layer_limits(ckpt: Checkpoint) -> dict[str, int]:
    """stack -> the number of layers the authors' range(num_hidden_layers) covered."""
    from .adapters.common import config_get

    limits = _authors(ckpt).layers.items()
    return {stack: int(config_get(ckpt, key, default=default)) for stack, (key, default) in limits}


def _fused_blocks(ckpt: Checkpoint) -> Iterator[AttentionBlock]:
    """The authors' gpt-neox branch: M = W[:d] @ W[d:2d].T of each layer's fused weight."""
    from .adapters import get_record
    from .adapters.common import linear_heads
    from .adapters.reader import locate

    for site in locate(ckpt, get_record(ckpt.model_type, ckpt.model_id, ckpt.config)):
        if site.attention.fused not in ("blocks", "per_head"):
            continue
        w = ckpt.store.get(site.name(site.attention.weight))
        d = w.shape[1]
        # linear_heads(x, H) splits the ROWS of x into heads: given Wq^T, the columns of Wq
        yield AttentionBlock(
            site.stack, site.layer, linear_heads(w[:d].T, site.heads), linear_heads(w[d : 2 * d].T, site.heads)
        )
