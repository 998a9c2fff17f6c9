"""The rotary embedding of a model's blocks, from its record's `Rotary`: the frequencies
transformers computes (the model's own RotaryEmbedding on the config, or GPT-J's fixed
formula), computed once per model (per layer type for ModernBERT's global/local layers),
importing transformers only for these models. The frequencies are those the rotary module
holds after construction: for "dynamic" and "longrope" scaling, the ones used for sequences
up to original_max_position_embeddings (transformers swaps in others for longer ones), and
cos/sin factors (yarn, longrope attention_factor) are not part of Rope.
"""

from __future__ import annotations

import contextlib
import importlib
import logging

import torch

from ..blocks import AttentionBlock, Rope
from ..checkpoints import Checkpoint
from ..errors import CorruptCheckpoint
from .record import Rotary


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' config validation warns about token ids of tiny vocabularies and the like."""
    log = logging.getLogger("transformers")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _default_inv_freq(base: float, dim: int) -> torch.Tensor:
    """transformers' default rope frequencies (float32): base^(-2p/dim) for the pairs p of dim."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _plain_rope(cfg: dict) -> tuple[torch.Tensor, int] | None:
    """(inv_freq, context) of an unscaled Llama-family rope, as transformers' default rope init
    computes it; None when the config has scaling (transformers then)."""
    params = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type")) if scaling else params.get("rope_type", "default")
    heads = cfg.get("num_attention_heads")
    if kind not in (None, "default") or not heads or not cfg.get("hidden_size"):
        return None
    base = float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    dim = int(head_dim * params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    return _default_inv_freq(base, dim), int(cfg.get("max_position_embeddings", 2048))


class ModelRope:
    """A model's Rope per layer type, computed on first use and shared by its blocks."""

    def __init__(self, ckpt: Checkpoint, site: Rotary):
        self.ckpt, self.site = ckpt, site
        self.config = None
        self.rotary = None
        self.ropes: dict[str | None, Rope] = {}

    def _load(self) -> None:
        if self.config is not None:
            return
        import transformers

        site = self.site
        fields = {k: v for k, v in self.ckpt.config.items() if k != "model_type"}
        try:
            with _quiet_transformers():
                config = transformers.AutoConfig.for_model(site.family, **fields)
                self.config = getattr(config, site.sub) if site.sub else config
                if site.rotary_class is not None:
                    package = site.module or site.family
                    module = importlib.import_module(f"transformers.models.{package}.modeling_{package}")
                    self.rotary = getattr(module, site.rotary_class)(self.config)
        except Exception as e:
            raise CorruptCheckpoint(
                f"{self.ckpt.model_id}: transformers {transformers.__version__} cannot compute the rotary "
                f"frequencies of this {self.ckpt.model_type!r} config.json ({type(e).__name__}: {e}); "
                "check config.json or update transformers"
            ) from e

    def __call__(self, block: AttentionBlock) -> Rope | None:
        if block.stack != self.site.stack and block.stack not in self.site.also:
            return None
        key = self._layer_type(block.layer)
        if key not in self.ropes:
            self.ropes[key] = self._rope(key)
        return self.ropes[key]

    def _layer_type(self, layer: int) -> str | None:
        """The layer's type where the rotary has frequencies per layer type (ModernBERT's
        "full_attention" / "sliding_attention", their own thetas); None elsewhere."""
        if not self.site.per_layer_type:
            return None
        self._load()
        layer_types = getattr(self.config, "layer_types", None)
        return layer_types[layer] if layer_types else None

    def _rope(self, layer_type: str | None) -> Rope:
        # an unscaled Llama-family rope by hand: importing transformers takes longer than scoring a small model
        if self.site.by_hand and (plain := _plain_rope(self.ckpt.config)) is not None:
            inv_freq, context = plain
        else:
            self._load()
            inv_freq, context = self._inv_freq(layer_type), self._context()
        return Rope(tuple(float(f) for f in inv_freq.tolist()), self.site.layout, context)

    def _inv_freq(self, layer_type: str | None) -> torch.Tensor:
        if self.rotary is None:  # GPT-J: GPTJRotaryEmbedding's create_sinusoidal_positions, base 10000
            return _default_inv_freq(10000.0, _fixed_formula_dim(self.config))
        name = f"{layer_type}_inv_freq" if layer_type else "inv_freq"
        if not hasattr(self.rotary, name):
            raise CorruptCheckpoint(
                f"{self.ckpt.model_id}: {type(self.rotary).__name__} of the installed transformers has no {name}; "
                "the rotary frequencies need transformers >= 5"
            )
        return getattr(self.rotary, name)

    def _context(self) -> int:
        return int(self.config.max_position_embeddings)  # GPT-J: n_positions, by its attribute_map


def _fixed_formula_dim(config) -> int:
    """The dims the fixed formula rotates: GPT-J's rotary_dim (None: its hidden size); a config
    without one rotates each head whole (RoFormer's sinusoidal table over the head dim)."""
    if hasattr(config, "rotary_dim"):
        return config.rotary_dim or config.hidden_size
    return config.hidden_size // config.num_attention_heads
