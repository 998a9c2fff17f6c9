"""Derived records on disk: one JSON file per transformers version, model type and structure.

Derivations are kept per transformers version and per version of the code that derives (a hash
of it). The structure of a checkpoint is its tiny config (shrink: every flag kept, every size shrunk):
two checkpoints of one family that differ only in size share one derivation; one with QK-norm or
multi-query on does not. `cached(model_type, fields)` returns the Derivation from the cache, or
derives it once and stores it (a refusal too, with its reason). No torch is imported to read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path

from ..adapters.record import Attention, Authors, Record, Rotary, Tiny
from ..checkpoints.checkpoint import TIMM

log = logging.getLogger("wqk")
FORMAT = 1  # bump when the derivation changes what it writes


def cache_root() -> Path:
    """$WQK_CACHE/derived (~/.cache/wqk/derived)."""
    return Path(os.environ.get("WQK_CACHE") or "~/.cache/wqk").expanduser() / "derived"


def record_to_dict(record: Record) -> dict:
    def attention(a: Attention) -> dict:
        d = dataclasses.asdict(a)
        if d.pop("only_if") is not None:
            raise ValueError(f"{record.model_type}: a record with code (only_if) cannot be stored")
        return d

    return {
        "model_type": record.model_type,
        "attention": [attention(a) for a in record.attention],
        "objectives": dict(record.objectives),
        "rope": None
        if record.rope is None
        else {k: v for k, v in dataclasses.asdict(record.rope).items() if k != "only_if"},
        "tiny": None if record.tiny is None else dataclasses.asdict(record.tiny),
    }


def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def record_from_dict(d: dict) -> Record:
    return Record(
        d["model_type"],
        tuple(Attention(**_tuples(a)) for a in d["attention"]),
        dict(d["objectives"]),
        rope=Rotary(**_tuples(d["rope"])) if d.get("rope") else None,
        authors=Authors(),
        tiny=Tiny(**d["tiny"]) if d.get("tiny") else None,
    )


def structure_key(model_type: str, fields: dict | None) -> str:
    """A short hash of the tiny config of a checkpoint's structure (transformers imported)."""
    from .shrink import tiny_config

    try:
        config = tiny_config(model_type, fields).to_diff_dict()
    except Exception as e:  # a config transformers cannot read: the derivation will say why
        config = {"unreadable": f"{type(e).__name__}: {e}"}
    config.pop("transformers_version", None)
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def code_key() -> str:
    """A hash of the code a derivation runs (this package, the generic reader): a change to it
    derives again rather than reading what older code derived."""
    here = Path(__file__).resolve().parent
    files = sorted(here.glob("*.py")) + [
        here.parent / "adapters" / f for f in ("reader.py", "record.py", "rope.py", "common.py")
    ]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()[:8]


def path_for(model_type: str, fields: dict | None) -> Path:
    if model_type.startswith(TIMM):
        from . import timm

        folder, structure = f"timm-{timm.version()}-wqk-{code_key()}", timm.structure_key(fields)
    else:
        import transformers

        folder, structure = (
            f"transformers-{transformers.__version__}-wqk-{code_key()}",
            structure_key(model_type, fields),
        )
    return cache_root() / folder / f"{model_type}-{structure}.json"


def cached(model_type: str, fields: dict | None = None):
    """The Derivation of model_type for config.json fields (None: the config class's defaults),
    read from the cache or derived and written there (one log line)."""
    from . import Derivation, derive

    path = path_for(model_type, fields)
    if path.is_file():
        d = json.loads(path.read_text(encoding="utf-8"))
        if d.get("format") == FORMAT:
            record = record_from_dict(d["record"]) if d.get("record") else None
            return Derivation(model_type, record, d.get("category"), d.get("reason"), d.get("facts", {}))
    result = derive(model_type, fields)
    log.info(
        "derived the record of model_type %r from its library's forward: %s (%s)",
        model_type,
        "verified" if result.ok else f"refused, {result.category}: {result.reason}",
        path,
    )
    payload = {
        "format": FORMAT,
        "model_type": model_type,
        "record": record_to_dict(result.record) if result.ok else None,
        "category": result.category,
        "reason": result.reason,
        "facts": result.facts,
    }
    from ..atomic import write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(payload, indent=1, sort_keys=True, default=str) + "\n")
    return result
