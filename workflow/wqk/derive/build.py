"""The tiny model of a config.

`model_class` picks transformers' base model class of a config (AutoModel's, else the one class
of the type's modeling module built on that config class); `build` instantiates it with eager
attention, random weights in float64 (a fixed seed), every 1-d parameter (biases, gains) drawn
too. The inputs of its forward: wqk.derive.inputs.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import re

import torch

# code that computes attention: a call of softmax or an nn.Softmax built (BROS, Perceiver), not a
# docstring's "scores before SoftMax"; an attention function; torch's multi-head attention
ATTENDS = re.compile(
    r"\b(?:softmax|Softmax)\(|scaled_dot_product_attention|attention_interface|eager_attention_forward"
    r"|MultiheadAttention"
)
CROSS = re.compile(r"crossattention|encoder_attn|cross_attn|encoder_decoder_attention")  # Pix2Struct's last
MAX_BYTES = 2**29  # a tiny model past 512 MiB (float32, before float64) is refused, not run
SEED = 0


def modeling_module(model_type: str):
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


class NoModelClass(LookupError):
    """transformers builds no model from the config alone (a part of a composite's config)."""


def model_class(config):
    """The base model class of config (AutoModel's mapping, else the one PreTrainedModel of the
    type's modeling module whose config_class is the config's class)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(config.model_type)
    if isinstance(name, (list, tuple)):
        name = name[0]
    auto = getattr(transformers, name, None) if name else None
    if auto is not None and has_forward(auto):
        if isinstance(config, auto.config_class or object):
            return auto
        # built on another config class (MusicGen Melody's maps to its decoder's model): the module's
        # own class of this config where it has one (EXAONE's Llama model stays)
        try:
            return _module_class(config, name)
        except (LookupError, ImportError):
            return auto
    try:
        return _module_class(config, name)
    except ModuleNotFoundError:
        task = _task_mapping_class(config.model_type)
        if task is None:
            raise
        return task


def _task_mapping_class(model_type: str):
    """The model class a task mapping of transformers' auto classes names for a type with no
    modeling module of its own (PP-Chart2Table: GOT-OCR 2's image-text-to-text model), else None."""
    import transformers
    from transformers.models.auto import modeling_auto

    for mapping, names in vars(modeling_auto).items():
        if mapping.endswith("_MAPPING_NAMES") and isinstance(names, dict) and model_type in names:
            name = names[model_type]
            cls = getattr(transformers, name[0] if isinstance(name, (list, tuple)) else name, None)
            if isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel) and has_forward(cls):
                return cls
    return None


def _module_class(config, name):
    """The one PreTrainedModel of the type's modeling modules built on the config's class."""
    import transformers

    module = modeling_module(config.model_type)
    models = [
        c
        for m in (module, *_sibling_modules(module))
        for _, c in inspect.getmembers(m, inspect.isclass)
        if issubclass(c, transformers.PreTrainedModel)
        and getattr(c, "config_class", None) is type(config)
        and not c.__name__.endswith("PreTrainedModel")
        and c.__module__ == m.__name__
    ]
    if not models and not name:
        raise NoModelClass(
            f"no model class of {module.__name__.rpartition('.')[0]} is built from {type(config).__name__}: a part "
            "of a composite model's config (scored with the composite)"
        )
    # none with a forward of its own: the class that holds the parts (Bark's and Qwen2.5-Omni's
    # generation composites, whose towers then run each on its own; a VQ-VAE, run by its encode)
    found = [c for c in models if has_forward(c)] or [c for c in models if "PreTrained" not in c.__name__]
    # a base model first, else a task head (a type whose only model is one: depth estimation); of
    # the others, one whose forward reads its main input (LW-DETR ViT's backbone, not its encoder
    # of windowed states)
    found.sort(
        key=lambda c: ("For" in c.__name__, not c.__name__.endswith("Model"), not _reads_main_input(c), len(c.__name__))
    )
    if not found:
        raise LookupError(f"no base model class for config {type(config).__name__} in {module.__name__}")
    return found[0]


def _sibling_modules(module) -> list:
    """The other modeling modules of module's package (BLIP's text model lives in modeling_blip_text)."""
    import pkgutil

    package = importlib.import_module(module.__name__.rpartition(".")[0])
    out = []
    for info in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{info.name}"
        if info.name.startswith("modeling_") and name != module.__name__ and "_tf_" not in info.name:
            try:
                out.append(importlib.import_module(name))
            except Exception:  # a module that needs a library not installed
                continue
    return out


def _reads_main_input(cls) -> bool:
    main = getattr(cls, "main_input_name", None)
    return isinstance(main, str) and main in inspect.signature(cls.forward).parameters


def has_forward(cls) -> bool:
    return cls.forward is not torch.nn.Module.forward and cls.forward.__name__ != "_forward_unimplemented"


def build(config, cls=None, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """The model of config in dtype (float64; float32 where its forward insists), eval mode, eager
    attention, every parameter drawn at random from a fixed seed (1-d ones around 1 for gains,
    around 0 for biases)."""
    cls = cls or model_class(config)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = cls._from_config(config, attn_implementation="eager", experts_implementation="eager")
    size = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    if size > MAX_BYTES:  # a default the shrinking missed (a table of positions squared): not tiny
        raise MemoryError(f"the tiny model holds {size / 2**30:.1f} GiB of parameters and buffers")
    complex_buffers = {n: b for n, b in model.named_buffers() if b.is_complex()}
    model.eval().to(dtype)
    _keep_complex(model, complex_buffers, dtype)
    _fit_rope_sections(model)
    _uncached(model)
    return randomised(model)


def _uncached(model) -> None:
    """Caches of a model's own outputs by their inputs (OmDet-Turbo's text embeddings by prompt, an
    LRU) made to miss, so that every traced forward runs the modules behind them."""
    for module in model.modules():
        for value in vars(module).values():
            if type(value).__name__.endswith("LRUCache") and callable(getattr(value, "has", None)):
                value.has = lambda key: False


def _keep_complex(model, buffers: dict, dtype: torch.dtype) -> None:
    """Complex buffers (Llama 4's vision rotations, freqs_ci) complex still, at dtype's precision:
    Module.to(float64) would keep their real parts alone."""
    for name, value in buffers.items():
        owner, _, leaf = name.rpartition(".")
        wide = torch.complex128 if dtype == torch.float64 else torch.complex64
        setattr(model.get_submodule(owner), leaf, value.to(wide))


def randomised(model: torch.nn.Module) -> torch.nn.Module:
    """model's parameters drawn afresh from a fixed seed, in place: 1-d ones around 1 (gains) or
    0 (biases), matrices and convolutions with unit-variance outputs; learned scalars and frozen
    parameters kept, unless constant."""
    generator = torch.Generator().manual_seed(SEED + 1)
    # a convolution's outputs each sum its input channels times its kernel ([out, in, *kernel]): the
    # kernel alone would let each of a deep backbone's convolutions widen its activations (RT-DETR's
    # ResNet of four stages, to 1e41)
    convolutions = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)}
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator, dtype=p.dtype)
            if p.ndim == 0:  # a learned scalar (CLIP's logit scale): kept
                continue
            if not p.requires_grad and not bool((p == p.flatten()[0]).all()):
                continue  # a frozen table the class computes (RoFormer's sinusoids): as built; frozen
                # constants (IDEFICS's frozen towers' gains of one) are drawn, or their names collide
            if p.ndim == 1:
                p.copy_((0.0 if name.endswith("bias") else 1.0) + 0.2 * noise)
            else:
                fan_in = math.prod(p.shape[1:]) if id(p) in convolutions else p.shape[-1]
                p.copy_(noise / max(1.0, fan_in) ** 0.5)
    return model


def _fit_rope_sections(model) -> None:
    """Multimodal rope sections a model class defaults to for its full head (Qwen2.5-VL's
    [16, 24, 24]) rescaled to its tiny head's frequencies, proportions kept."""
    for module in model.modules():
        sections, inv_freq = getattr(module, "mrope_section", None), getattr(module, "inv_freq", None)
        if isinstance(sections, (list, tuple)) and sections and isinstance(inv_freq, torch.Tensor):
            n = inv_freq.numel()
            if sum(sections) != n:
                new = [max(1, round(x * n / sum(sections))) for x in sections]
                new[0] += n - sum(new)
                module.mrope_section = type(sections)(new)


def has_attention_source(model_type: str) -> bool:
    """Whether the modeling code of the type, or of a type its default config holds (a composite's
    towers), computes a softmax over logits (eager or SDPA attention, torch's multi-head
    attention): a type whose tiny model cannot run is refused as having no attention only when
    none of that code has one."""
    import transformers
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    from .shrink import DEFAULTS

    types = {model_type}
    try:
        config = transformers.AutoConfig.for_model(model_type, **DEFAULTS.get(model_type, {}))
        stack = [config]
        while stack:
            c = stack.pop()
            for v in vars(c).values():
                if isinstance(v, transformers.PretrainedConfig):
                    types.add(v.model_type)
                    stack.append(v)
    except Exception:  # a config class that needs arguments: its own code only
        pass
    root = os.path.join(os.path.dirname(transformers.__file__), "models")
    for t in sorted(types):
        folder = os.path.join(root, model_type_to_module_name(t))
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.startswith("modeling_") and name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    if ATTENDS.search(f.read()):
                        return True
    return False
