"""A checkpoint held in memory: a loaded transformers model as a config and a tensor store.

`open_model(model)` reads the model's `config.to_dict()` and `state_dict()`; the adapters
then see the same Checkpoint as for files. A model's state_dict names its tensors as the
saved checkpoint does, except that a bare base model (BertModel, LlamaModel) carries no
task-head prefix ("bert.", "model."): the adapters try both. Nothing is copied: get()
hands out detached views (moved to CPU if the model is elsewhere, one tensor at a time).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import xxhash

from ..errors import MissingTensor, WqkError
from .checkpoint import Checkpoint

if TYPE_CHECKING:
    import torch


class MemoryStore:
    """The TensorStore of a dict of tensors (a module's state_dict)."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], label: str = "the model's state_dict"):
        self._tensors = dict(tensors)
        self._label = label
        self._fingerprint: str | None = None

    def names(self) -> list[str]:
        return sorted(self._tensors)

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def get(self, name: str) -> torch.Tensor:
        t = self._tensors.get(name)
        if t is None:
            raise MissingTensor(
                f"tensor {name!r} not found in {self._label} ({len(self._tensors)} tensors); "
                "is this the architecture the adapter expects?"
            )
        if t.is_meta:
            raise WqkError(f"tensor {name!r} of {self._label} is on the meta device (no data): load the weights first")
        return t.detach().to("cpu")

    def fingerprint(self) -> str:
        """xxh3-128 over every tensor's name, dtype, shape and bytes, in name order."""
        if self._fingerprint is None:
            import torch

            h = xxhash.xxh3_128()
            for name in self.names():
                t = self.get(name).contiguous()
                h.update(f"{name}\0{str(t.dtype).removeprefix('torch.')}\0{list(t.shape)}\0".encode())
                h.update(t.reshape(-1).view(torch.uint8).numpy())
            self._fingerprint = h.hexdigest()
        return self._fingerprint


def open_model(model: Any, name: str | None = None) -> Checkpoint:
    """The Checkpoint of a loaded transformers model (a PreTrainedModel, or any torch module
    with a transformers config): config.to_dict() and the tensors of state_dict().
    model_id: name, else the config's name_or_path (the folder or hub id it was loaded
    from), else the class name."""
    config = getattr(model, "config", None)
    if not hasattr(config, "to_dict") or not hasattr(model, "state_dict"):
        raise TypeError(f"{type(model).__name__} is not a transformers model (no config.to_dict() and state_dict())")
    import torch

    tensors = {k: v for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    cls = type(model).__name__
    model_id = name or str(getattr(config, "name_or_path", "") or "") or cls
    label = f"the state_dict of {model_id}" + ("" if model_id == cls else f" ({cls})")
    ckpt = Checkpoint(model_id=model_id, config=config.to_dict(), store=MemoryStore(tensors, label))
    ckpt.extra.update(format="memory", architecture=cls)
    return ckpt
