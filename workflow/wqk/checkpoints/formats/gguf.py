"""GGUF files (llama.cpp, Ollama, LM Studio) as a TensorStore under Hugging Face names.

The header (metadata and tensor table) is parsed here, skipping the tokenizer's arrays
(GGUFReader builds them all: 7 s for Gemma 3's 262,144 tokens), and works on any file-like
object, so that a hub fetch can read the header by ranges and then take only the q/k bytes.
A tensor's bytes are read by offset and dequantised by the `gguf` package's own
`gguf.quants.dequantize` (every quant type it knows; numpy). GGUF v2 and v3. The metadata is
the config: ARCHITECTURES maps `general.architecture` to the transformers model_type whose
record reads the blocks, and its keys to that type's config keys.

What llama.cpp's converter (convert_hf_to_gguf.py) changed is undone here:
- arch llama: the rows of attn_q and attn_k are permuted within each head, (2, k/2) ->
  (k/2, 2), so that llama.cpp's rope on adjacent pairs pairs what HF's rotate-half pairs. The
  same permutation on q and k leaves every M_h unchanged, but not the rotary pairing the record
  assumes, so it is inverted.
- Gemma (gemma, gemma2, gemma3): every RMSNorm weight is stored as 1 + w. The store gives w, as
  an HF checkpoint holds it (the gemma records add the 1: Attention.gain_offset).
Quantised factors are dequantised to float32; `storage(name)` says what a tensor was stored as
(the blocks carry it, and the scores' `storage` column: adapters.reader, score_table).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CorruptCheckpoint, MissingTensor, UnsupportedModelType
from ..provenance import hash_files

MAGIC = b"GGUF"
VERSIONS = (2, 3)
# Stored as the checkpoint's own float precision; every other type is dequantised to float32.
_FLOAT_TYPES = {"F32": np.float32, "F16": np.float16}

# GGUF tensor suffix in block i -> HF name under model.layers.{i}.
_BLOCK_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_qkv": "self_attn.qkv_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


@dataclass(frozen=True)
class Architecture:
    model_type: str  # the transformers model_type whose record reads the blocks
    rope_permuted: bool = False  # llama.cpp permuted q/k rows for its adjacent-pair rope
    norm_shift: float = 0.0  # stored norm weight = HF weight + norm_shift
    # the arch's metadata (keys after "<arch>.") -> config fields llama.cpp fixes rather than stores
    config: Callable[[dict], dict] | None = None


def _gemma3_config(meta: dict) -> dict:
    # llama.cpp fixes both for gemma3 (llama-model.cpp: swa pattern 6, swa rope base 10000)
    pattern = int(meta.get("attention.sliding_window_pattern", 6))
    n = int(meta["block_count"])
    return {
        "layer_types": ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)],
        "rope_local_base_freq": 10000.0,
        "query_pre_attn_scalar": int(meta.get("attention.key_length") or 0) or None,
    }


ARCHITECTURES = {
    "llama": Architecture("llama", rope_permuted=True),
    "qwen2": Architecture("qwen2"),
    "qwen3": Architecture("qwen3"),
    "phi3": Architecture("phi3"),
    "gemma": Architecture("gemma", norm_shift=1.0),
    "gemma2": Architecture("gemma2", norm_shift=1.0),
    "gemma3": Architecture("gemma3_text", norm_shift=1.0, config=_gemma3_config),
}
# metadata key (after "<arch>.") -> HF config key
_CONFIG_KEYS = {
    "embedding_length": "hidden_size",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "context_length": "max_position_embeddings",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.sliding_window": "sliding_window",
    "rope.freq_base": "rope_theta",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # GGML order: ne0 (the contiguous axis) first
    type_id: int
    offset: int  # absolute byte offset of the data in the file
    nbytes: int

    @property
    def type_name(self) -> str:
        from gguf.constants import GGMLQuantizationType

        return GGMLQuantizationType(self.type_id).name


@dataclass(frozen=True)
class Header:
    version: int
    meta: dict  # every key but the tokenizer's arrays (kept as their lengths)
    tensors: dict[str, TensorInfo]
    data_start: int
    n_kv: int = 0
    raw_meta: bytes | None = None  # the key-value section as stored (read_header(keep_meta=True))

    @property
    def alignment(self) -> int:
        return int(self.meta.get("general.alignment", 32))


# GGUF value types (gguf.constants.GGUFValueType) -> struct format; 8 string, 9 array
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
# Arrays longer than this are kept as their length only (the tokenizer's vocabulary, scores, merges).
_LONG_ARRAY = 1024


class _Reader:
    def __init__(self, fh, where: str):
        self.fh, self.where, self.pos = fh, where, 0
        self.kept: list[bytes] | None = None  # the bytes taken, while keeping

    def take(self, n: int) -> bytes:
        b = self.fh.read(n)
        if len(b) != n:
            raise CorruptCheckpoint(
                f"{self.where}: the GGUF header ends at byte {self.pos + len(b)}, inside a field "
                "(truncated download?); re-download it"
            )
        self.pos += n
        if self.kept is not None:
            self.kept.append(b)
        return b

    def scalar(self, code: str):
        return struct.unpack("<" + code, self.take(struct.calcsize(code)))[0]

    def string(self) -> str:
        n = self.scalar("Q")
        if n > 1 << 30:
            raise CorruptCheckpoint(f"{self.where}: a GGUF string of {n} bytes at byte {self.pos}: the file is corrupt")
        raw = self.take(n)
        return raw.decode("utf-8", errors="replace")

    def value(self, vtype: int):
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            item, n = self.scalar("I"), self.scalar("Q")
            if n > _LONG_ARRAY:
                self.skip_array(item, n)
                return _Skipped(n)
            return [self.value(item) for _ in range(n)]
        raise CorruptCheckpoint(
            f"{self.where}: unknown GGUF value type {vtype} at byte {self.pos}: the file is corrupt"
        )

    def skip_array(self, item: int, n: int) -> None:
        if item in _SCALARS:
            self.take(n * struct.calcsize(_SCALARS[item]))
        elif item == 8:
            for _ in range(n):
                self.take(self.scalar("Q"))
        else:
            for _ in range(n):
                self.value(item)


@dataclass(frozen=True)
class _Skipped:
    length: int  # an array too long to keep (the tokenizer's)


def read_header(fh, where: str, keep_meta: bool = False) -> Header:
    """The header of a GGUF file from a binary file-like object positioned at its start;
    keep_meta: with the key-value section's bytes (what compact_header copies)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    r = _Reader(fh, where)
    magic = r.take(4)
    if magic != MAGIC:
        raise CorruptCheckpoint(f"{where} is not a GGUF file (it starts {magic!r}, not b'GGUF')")
    version = r.scalar("I")
    if version not in VERSIONS:
        raise CorruptCheckpoint(
            f"{where}: GGUF version {version} is not supported (v2, v3); re-convert it with a current llama.cpp"
        )
    n_tensors, n_kv = r.scalar("Q"), r.scalar("Q")
    meta = {}
    r.kept = [] if keep_meta else None
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.scalar("I"))
    raw_meta = None if r.kept is None else b"".join(r.kept)
    r.kept = None
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        shape = tuple(r.scalar("Q") for _ in range(r.scalar("I")))
        type_id, offset = r.scalar("I"), r.scalar("Q")
        infos.append((name, shape, type_id, offset))
    align = int(meta.get("general.alignment", 32))
    data_start = -(-r.pos // align) * align
    tensors = {}
    for name, shape, type_id, offset in infos:
        try:
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
        except (ValueError, KeyError):
            raise UnsupportedModelType(
                f"{where}: tensor {name!r} has GGML type id {type_id}, which the installed gguf package does not know; "
                "upgrade gguf (pip install -U gguf)"
            ) from None
        n = int(np.prod(shape, dtype=np.int64))
        tensors[name] = TensorInfo(name, shape, type_id, data_start + offset, n // block * size)
    return Header(version, meta, tensors, data_start, n_kv, raw_meta)


def compact_header(header: Header, names: list[str]) -> tuple[bytes, dict[str, int]]:
    """A GGUF header holding the metadata of `header` as stored and only the tensors `names`
    (in that order), each at the next aligned offset of a new data section: (the header bytes,
    padded to the alignment; name -> offset in the new data section). What a hub fetch writes
    before the tensors' bytes, so that the result is a GGUF file of its own."""
    if header.raw_meta is None:
        raise ValueError("read the header with keep_meta=True")
    align = header.alignment
    out = [MAGIC, struct.pack("<IQQ", header.version, len(names), header.n_kv), header.raw_meta]
    offsets, pos = {}, 0
    for name in names:
        t = header.tensors[name]
        raw = name.encode()
        out.append(struct.pack("<Q", len(raw)) + raw + struct.pack("<I", len(t.shape)))
        out.append(struct.pack(f"<{len(t.shape)}QIQ", *t.shape, t.type_id, pos))
        offsets[name] = pos
        pos = -(-(pos + t.nbytes) // align) * align
    head = b"".join(out)
    return head + b"\0" * (-len(head) % align), offsets


def _value(v):
    return v if not isinstance(v, _Skipped) else f"<{v.length} items>"


def architecture(header: Header, where: str) -> tuple[str, Architecture]:
    """(general.architecture, its Architecture); UnsupportedModelType naming the supported ones."""
    name = header.meta.get("general.architecture")
    arch = ARCHITECTURES.get(name)
    if arch is None:
        raise UnsupportedModelType(
            f"{where}: GGUF architecture {name!r} is not supported; supported: {', '.join(sorted(ARCHITECTURES))}"
        )
    return name, arch


def hf_names(tensors) -> dict[str, str]:
    """HF name -> GGUF name of the tensors a record may read (blk.{i}.attn_q.weight ->
    model.layers.{i}.self_attn.q_proj.weight, ...), of those present in `tensors`."""
    out = {}
    for gguf_name in tensors:
        if m := _BLOCK.fullmatch(gguf_name):
            hf = _BLOCK_NAMES.get(m.group(2))
            if hf is not None:
                out[f"model.layers.{m.group(1)}.{hf}.{m.group(3)}"] = gguf_name
    if "output_norm.weight" in tensors:
        out["model.norm.weight"] = "output_norm.weight"
    return out


def check_attention(names, where: str) -> None:
    if not any(k.endswith(("q_proj.weight", "qkv_proj.weight")) for k in names):
        raise MissingTensor(f"{where}: no attention tensors (blk.N.attn_q / attn_qkv) in this GGUF file")


def config_of(header: Header, where: str) -> dict:
    """The transformers config the metadata of a GGUF header stands for (model_type of its
    architecture's record, sizes, rope, the fields llama.cpp fixes)."""
    arch_name, arch = architecture(header, where)
    meta = header.meta
    arch_meta = {k.removeprefix(arch_name + "."): v for k, v in meta.items() if k.startswith(arch_name + ".")}
    cfg = {"model_type": arch.model_type}
    for key, hf in _CONFIG_KEYS.items():
        if key in arch_meta:
            cfg[hf] = arch_meta[key]
    if "hidden_size" not in cfg or "num_attention_heads" not in cfg:
        raise CorruptCheckpoint(f"{where}: no {arch_name}.embedding_length or .attention.head_count")
    heads = cfg["num_attention_heads"]
    if isinstance(heads, (list, _Skipped)) or isinstance(cfg.get("num_key_value_heads"), (list, _Skipped)):
        raise UnsupportedModelType(f"{where}: per-layer head counts are not supported")
    cfg.setdefault("num_key_value_heads", heads)
    cfg.setdefault("head_dim", cfg["hidden_size"] // heads)
    rotary = arch_meta.get("rope.dimension_count")
    if rotary and rotary != cfg["head_dim"]:
        cfg["partial_rotary_factor"] = rotary / cfg["head_dim"]
    if arch.config is not None:
        cfg.update(arch.config(arch_meta))
    if "blk.0.attn_q.bias" in header.tensors:
        cfg["attention_bias"] = True
    cfg.update(
        _source_format="gguf",
        _gguf=f"v{header.version}, {arch_name}, {_value(meta.get('general.name', ''))}".rstrip(", "),
    )
    return cfg


class GgufStore:
    """One .gguf file as a TensorStore with HF names (blk.{i}.attn_q.weight ->
    model.layers.{i}.self_attn.q_proj.weight, ...); every GGUF name stays readable too."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            header = read_header(fh, str(self.path))
        self.version, self.tensors = header.version, header.tensors
        self._check_sizes()
        self.meta = {k: _value(v) for k, v in header.meta.items()}
        self.arch_name, self.arch = architecture(header, str(self.path))
        self.config = config_of(header, str(self.path))
        self._map = hf_names(self.tensors)
        check_attention(self._map, str(self.path))
        self._fingerprint: str | None = None

    def _check_sizes(self) -> None:
        size = self.path.stat().st_size
        for t in self.tensors.values():
            if t.offset + t.nbytes > size:
                raise CorruptCheckpoint(
                    f"{self.path}: tensor {t.name!r} needs bytes up to {t.offset + t.nbytes} but the file has "
                    f"{size} (truncated download?); re-download it"
                )

    # --- TensorStore ---

    def names(self) -> list[str]:
        return sorted(set(self._map) | set(self.tensors))

    def __contains__(self, name: str) -> bool:
        return name in self._map or name in self.tensors

    def storage(self, name: str) -> str:
        """The GGUF type a tensor is stored as (F32, F16, Q5_0, ...)."""
        return self._tensor(name).type_name

    def _tensor(self, name: str):
        t = self.tensors.get(self._map.get(name, name))
        if t is None:
            raise MissingTensor(
                f"tensor {name!r} not found in GGUF file {self.path} ({len(self.tensors)} tensors, {self.arch_name})"
            )
        return t

    def read(self, name: str) -> np.ndarray:
        """A tensor as numpy, [rows, columns] as an HF nn.Linear holds it, dequantised to
        float32 unless stored as F32/F16, with llama.cpp's changes undone."""
        from gguf.constants import GGMLQuantizationType
        from gguf.quants import dequantize

        t = self._tensor(name)
        with open(self.path, "rb") as fh:
            fh.seek(t.offset)
            raw = np.frombuffer(fh.read(t.nbytes), np.uint8)
        if raw.size != t.nbytes:
            raise CorruptCheckpoint(f"{self.path}: tensor {t.name!r} is truncated; re-download it")
        shape = tuple(reversed(t.shape))
        kind = t.type_name
        if kind in _FLOAT_TYPES:
            arr = raw.view(_FLOAT_TYPES[kind]).reshape(shape).copy()
        else:
            try:
                arr = dequantize(raw.reshape(*shape[:-1], -1), GGMLQuantizationType(t.type_id)).reshape(shape)
            except NotImplementedError:
                raise UnsupportedModelType(
                    f"{self.path}: tensor {t.name!r} is stored as {kind}, which the installed gguf package cannot "
                    "dequantise; upgrade gguf (pip install -U gguf)"
                ) from None
        if self.arch.norm_shift and t.name.endswith("norm.weight"):
            arr = arr - np.asarray(self.arch.norm_shift, arr.dtype)
        if self.arch.rope_permuted and t.name.endswith(("attn_q.weight", "attn_k.weight")):
            heads = self.config["num_attention_heads" if "attn_q" in t.name else "num_key_value_heads"]
            arr = _unpermute(arr, heads)
        return arr

    def get(self, name: str):
        import torch

        return torch.from_numpy(np.ascontiguousarray(self.read(name)))

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = hash_files([self.path])
        return self._fingerprint


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of convert_hf_to_gguf's LlamaModel.permute: rows (h, k/2, 2) -> (h, 2, k/2)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf's LlamaModel.permute (what a llama GGUF holds): rows (h, 2, k/2) -> (h, k/2, 2)."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
