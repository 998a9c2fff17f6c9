"""Weight formats: which files of a folder hold the weights, and what every store shares.

One module per format (safetensors, torch_bin, ctranslate2), each with its one header
parser. Nothing here reads a tensor or imports torch or numpy, so the command line can
find the weight files (to hash them in the background) before it loads torch.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from ...errors import CorruptCheckpoint, MissingTensor, SourceUnavailable
from ..provenance import hash_files

# CTranslate2 binary format versions the reader understands
CT2_VERSIONS = range(2, 7)


@dataclass(frozen=True)
class WeightLayout:
    format: str  # "safetensors", "pytorch", "ctranslate2" or "gguf"
    files: list[Path]
    weight_map: dict[str, Path] | None = None  # tensor -> shard, from an index file


def weight_layout(folder: Path) -> WeightLayout | None:
    """The first weight layout found in a folder, safetensors before PyTorch before
    CTranslate2 before GGUF; None when the folder holds no weights. A folder of several GGUF
    files (one repo, several quants) is an error that lists them: the source names one."""
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
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) > 1:
        raise SourceUnavailable(
            f"{folder} holds {len(ggufs)} GGUF files ({', '.join(f.name for f in ggufs)}); "
            f"name the one to score: {folder / ggufs[0].name}"
        )
    if ggufs:
        return WeightLayout("gguf", ggufs)
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


def read_json(path: Path) -> dict:
    """A JSON file that holds an object of fields (config.json, an index)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(type(data))
            raise CorruptCheckpoint(f"{path} holds {kind or 'a number'}, not an object of fields; re-download it")
        return data
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptCheckpoint(f"{path} is not valid JSON ({e}); re-download it") from None
    except RecursionError:  # nested past Python's recursion limit
        raise CorruptCheckpoint(f"{path} is JSON nested too deeply to read; re-download it") from None


def looks_like_model(folder: Path, files: set[str]) -> bool:
    if "model.bin" in files and is_ct2_file(folder / "model.bin"):
        return True
    if any(f.endswith(".gguf") for f in files):
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


def missing_tensor(name: str, files: list[Path], n: int) -> MissingTensor:
    where = ", ".join(str(f) for f in files[:3]) + (f" (+{len(files) - 3} more)" if len(files) > 3 else "")
    return MissingTensor(
        f"tensor {name!r} not found in {where} ({n} tensors); "
        "is this the architecture the adapter expects, or a checkpoint with renamed weights?"
    )


class FileStore:
    """What every store over weight files shares: the name -> file map and the files' hash."""

    files: list[Path]
    _where: dict[str, Path]
    _fingerprint: str | None = None

    def names(self) -> list[str]:
        return sorted(self._where)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = hash_files(self.files)
        return self._fingerprint
