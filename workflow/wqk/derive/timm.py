"""timm checkpoints (ViT, DeiT, BEiT, EVA as timm names them): records derived from timm's own forward.

A timm checkpoint's config.json names the architecture timm builds it from ("vit_base_patch16_224")
and, where they differ from its defaults, the arguments (model_args); its model_type here is
"timm:" + the architecture (checkpoints.model_type_of). timm itself builds a model of that
architecture with two blocks at its full width (so its head count is the checkpoint's: timm's
config.json does not state one, and the record carries it as heads_default), in float64 with
random parameters; its forward on random images is traced, and the record is derived and
verified as a transformers model's is (derive.record_of). timm is an optional extra
(pip install 'wqk[timm]'); torchvision, which timm imports, must import beside torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..adapters.record import Tiny
from ..checkpoints.checkpoint import TIMM
from .calls import Underivable
from .heads import HeadKeys

DEPTH = 2  # blocks of the derivation's model: two, so that layer templates have a varying number
BATCH = 2
GRID = 4  # patches per side of the derivation's images


def architecture(model_type: str) -> str:
    return model_type.removeprefix(TIMM)


def model_args(fields: dict | None) -> dict:
    """The arguments timm builds the checkpoint's model with (config.json's model_args)."""
    args = (fields or {}).get("model_args") or {}
    return dict(sorted(args.items())) if isinstance(args, dict) else {}


def version() -> str:
    """timm's version; UnsupportedModelType saying how to install it where it does not import."""
    try:
        import timm
    except Exception as e:  # ImportError, or torchvision's RuntimeError beside a torch it was not built for
        from ..errors import UnsupportedModelType

        raise UnsupportedModelType(
            f"a timm checkpoint needs timm to derive its record, and timm does not import here "
            f"({type(e).__name__}: {str(e)[:200]}): pip install 'wqk[timm]' (timm imports torchvision, which "
            "must be the build made for the installed torch)"
        ) from None
    return timm.__version__


def structure_key(fields: dict | None) -> str:
    """A short hash of the model_args: the architecture and they fix the structure."""
    import hashlib

    return hashlib.sha256(json.dumps(model_args(fields), sort_keys=True).encode()).hexdigest()[:12]


def _create(arch: str, args: dict, small: bool) -> tuple[torch.nn.Module, dict] | None:
    """(model, the arguments that built it): two blocks where the architecture takes a depth;
    small: on images of GRID x GRID patches (DINOv2's 518 pixels are 1369 tokens in float64
    otherwise), None where the architecture takes no image size or has no smaller one."""
    import timm

    error = None
    for extra in ({"depth": DEPTH}, {}):
        kwargs = {**args, **extra}
        try:
            torch.manual_seed(0)
            model = timm.create_model(arch, pretrained=False, **kwargs)
        except TypeError as e:  # an architecture without a depth argument
            error = error or e
            continue
        if not small:
            return model, kwargs
        patch = getattr(getattr(model, "patch_embed", None), "patch_size", None)
        side = GRID * int(patch[0] if isinstance(patch, (tuple, list)) else patch or 0)
        if not side or "img_size" in args or side >= model.pretrained_cfg.get("input_size", (3, 0, 0))[-1]:
            return None
        try:
            torch.manual_seed(0)
            return timm.create_model(arch, pretrained=False, **kwargs, img_size=side), {**kwargs, "img_size": side}
        except Exception:  # an architecture whose image size is fixed
            return None
    raise error


def _images(model, seed: int) -> dict:
    channels, height, width = model.pretrained_cfg.get("input_size", (3, 224, 224))
    if isinstance(size := getattr(getattr(model, "patch_embed", None), "img_size", None), (tuple, list)):
        height, width = size
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(BATCH, channels, height, width, generator=g, dtype=torch.float64)}


def _save(model, folder: Path, arch: str, args: dict) -> None:
    """model.safetensors and config.json as timm's hub export writes them (state_dict names)."""
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    config = {"architecture": arch, "model_args": args, "num_classes": getattr(model, "num_classes", 0)}
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def save_tiny(tiny: Tiny, out_dir: Path, seed: int = 0) -> Path:
    """The tiny model a timm record was derived on (Tiny: architecture and timm arguments), timm's
    own initialisation from seed, saved as timm's hub export lays it out (`wqk tiny`)."""
    import timm

    torch.manual_seed(seed)
    model = timm.create_model(tiny.architecture, pretrained=False, **tiny.config).eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    _save(model, out_dir, tiny.architecture, tiny.config)
    return out_dir


def _heads(call, heads: int, kv: int, groups: tuple[int, int] = (1, 1)):
    """heads.head_keys for timm: no config field states the count (the record's heads_default)."""
    if groups != (1, 1):
        raise Underivable("layout", f"{call.name}: grouped projections {groups} (timm: none expected)")
    if kv != heads:
        raise Underivable("layout", f"{call.name}: {kv} key heads for {heads} query heads (timm: none expected)")
    return HeadKeys()


def derive_timm(model_type: str, fields: dict | None):
    """The Derivation of a timm architecture (a record, or why not): on small images first, at
    full image size where the small ones fail (Swin's windows) or cannot be had."""
    version()
    arch, args = architecture(model_type), model_args(fields)
    error = None
    for small in (True, False):
        try:
            built = _create(arch, args, small)
            if built is not None:
                return _derived(model_type, arch, *built)
        except Underivable as e:
            error = e
        except Exception as e:  # whatever timm raises building the model
            error = _forward_error(e)
    raise error


def _forward_error(e: Exception) -> Underivable:
    first = str(e).splitlines()[0][:300] if str(e) else ""
    return Underivable("forward", f"{type(e).__name__}: {first}")


def _derived(model_type: str, arch: str, model: torch.nn.Module, kwargs: dict):
    """The Derivation of the model timm built from arch and kwargs."""
    from .build import randomised
    from .run import Step, runs
    from .verified import no_rotation, record_of

    try:
        model = randomised(model.eval().double())
        steps = [Step("", _images(model, 0), _images(model, 1))]
        with no_rotation(model):  # EVA-02's and the Perception Encoder's 2-d rotary: left out of the record
            trace, again = runs(model, steps)
    except Exception as e:  # whatever timm raises running the model
        raise _forward_error(e) from e
    return record_of(
        model_type,
        model,
        steps,
        (trace, again),
        lambda trace: _heads,
        lambda m, folder: _save(m, folder, arch, kwargs),
        "",
        Tiny(arch, kwargs, family="timm"),
        modality="vision",
    )
