"""PyTorch pickles (pytorch_model.bin, zip format): memory-mapped, weights_only=True."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch

from ...errors import CorruptCheckpoint
from . import FileStore, missing_tensor


class TorchBinStore(FileStore):
    """pytorch_model.bin files (zip format), loaded memory-mapped with weights_only=True:
    the pickle is read at open time, tensor bytes only when a tensor is converted."""

    def __init__(self, files: list[Path], weight_map: dict[str, Path] | None = None):
        self.files = [Path(f) for f in files]
        self._sd: dict[Path, dict[str, torch.Tensor]] = {f: _torch_load(f) for f in self.files}
        self._where: dict[str, Path] = {}
        if weight_map is not None:
            for name, f in weight_map.items():
                f = Path(f)
                if name not in self._sd.get(f, {}):
                    raise CorruptCheckpoint(
                        f"index places tensor {name!r} in {f}, but that file does not hold it; re-download"
                    )
                self._where[name] = f
        else:
            for f, sd in self._sd.items():
                for name in sd:
                    self._where.setdefault(name, f)

    def get(self, name: str) -> torch.Tensor:
        f = self._where.get(name)
        if f is None:
            raise missing_tensor(name, self.files, len(self._where))
        t = self._sd[f][name].detach()
        # the stored precision (scoring converts where it computes); other dtypes as float32
        return t if t.dtype in (torch.float32, torch.float16, torch.bfloat16) else t.to(torch.float32)


def _torch_load(path: Path) -> dict[str, torch.Tensor]:
    fix = "re-download it, or convert it to safetensors"
    try:
        try:
            sd = torch.load(path, weights_only=True, mmap=True, map_location="cpu")
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            # Files from before torch 1.6 (legacy, non-zip format) cannot be memory-mapped.
            sd = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:  # torch raises RuntimeError, UnpicklingError, EOFError, ... for bad files
        refused = _refused_objects(e)
        if refused is not None:
            raise CorruptCheckpoint(
                f"{path} holds Python objects besides tensors ({refused}), which wqk does not unpickle: "
                "unpickling runs code from the file. Convert it to safetensors in an environment you trust "
                "(load it there with the model's own library, save it with safetensors' save_file), "
                "or get a safetensors version of the model (model.safetensors in its repo or in a conversion PR)"
            ) from None
        raise CorruptCheckpoint(
            f"{path}: cannot load PyTorch weights ({type(e).__name__}: {str(e)[:200]}); {fix}"
        ) from None
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise CorruptCheckpoint(f"{path} holds a {type(sd).__name__}, not a state dict of tensors; {fix}")
    return {k: v for k, v in sd.items() if isinstance(v, torch.Tensor)}


def _refused_objects(e: Exception) -> str | None:
    """What torch's weights-only unpickler refused (e.g. "argparse.Namespace"), None when `e`
    is not that refusal. Its own message is not passed on: the way out it offers first
    (weights_only=False) runs whatever the file holds."""
    text = str(e)
    if not isinstance(e, pickle.UnpicklingError) or "Weights only load failed" not in text:
        return None
    found = re.search(r"GLOBAL ([\w.]+)", text)
    if found:
        return found[1]
    detail = re.search(r"WeightsUnpickler error: ([^\n]*?)(?:\. |\n|$)", text)
    return detail[1].strip() if detail else "objects torch does not load as weights"
