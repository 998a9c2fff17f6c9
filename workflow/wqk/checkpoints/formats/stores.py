"""The tensor store of a weight layout: the one module that picks a format's store
(wqk.checkpoints.formats parses the layouts; each format's module holds its store)."""

from __future__ import annotations

from . import WeightLayout


def open_store(layout: WeightLayout, package_config: dict | None = None):
    """The tensor store of a weight layout (torch is imported here, not before)."""
    if layout.format == "safetensors":
        from .safetensors import SafetensorsStore

        return SafetensorsStore(layout.files, weight_map=layout.weight_map)
    if layout.format == "pytorch":
        from .torch_bin import TorchBinStore

        return TorchBinStore(layout.files, weight_map=layout.weight_map)
    if layout.format == "gguf":
        from .gguf import GgufStore

        return GgufStore(layout.files[0])
    from .ctranslate2 import Ct2WhisperStore

    return Ct2WhisperStore(layout.files[0], package_config=package_config)
