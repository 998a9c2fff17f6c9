"""A checkpoint as the adapters see it: a config dict and a store that yields tensors by name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


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
        return str(self.config.get("model_type", ""))

    def provenance(self) -> str:
        """Revision when known, else a hash of the weight files."""
        return self.revision or f"xxh3:{self.store.fingerprint()}"
