"""A checkpoint as the adapters see it: a config dict and a store that yields tensors by name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

TIMM = "timm:"  # the model_type of a timm checkpoint: "timm:" + its architecture (wqk.derive.timm)


def model_type_of(config: dict) -> str:
    """config.json's model_type; for a timm checkpoint (no model_type, an "architecture" timm
    builds it from) "timm:" + that architecture ("timm:vit_base_patch16_224")."""
    model_type = config.get("model_type")
    if not model_type and isinstance(arch := config.get("architecture"), str) and arch:
        return TIMM + arch.split(".")[0]  # "vit_base_patch16_224.augreg_in21k": the tag is the weights'
    return str(model_type or "")


class TensorStore(Protocol):
    """Read-only access to named weight tensors, one at a time (never the whole model)."""

    def names(self) -> list[str]: ...

    def get(self, name: str) -> torch.Tensor:
        """The tensor on CPU; raises errors.MissingTensor naming tensor and file."""
        ...

    def __contains__(self, name: str) -> bool: ...

    def fingerprint(self) -> str:
        """A short content hash of the weight files (for provenance when there is no revision)."""
        ...


@dataclass
class Checkpoint:
    model_id: str  # the source string the user gave (hub id, folder, pypi:package)
    config: dict  # config.json as a dict (synthesised for formats without one)
    store: TensorStore
    path: Path | None = None  # local folder holding the files, when there is one
    revision: str | None = None  # hub commit sha, or None
    extra: dict = field(default_factory=dict)

    @property
    def model_type(self) -> str:
        return model_type_of(self.config)

    def provenance(self) -> str:
        """Revision when known, else a hash of the weight files."""
        return self.revision or f"xxh3:{self.store.fingerprint()}"
