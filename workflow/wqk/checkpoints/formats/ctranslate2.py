"""CTranslate2 model.bin reader, and a store that shows a CT2 Whisper under Hugging Face names.

Format (binary versions 2-6, little-endian; see CTranslate2 src/models/model.cc):
u32 binary version; [v>=2] string spec name, u32 spec revision; u32 number of variables;
per variable: string name, u8 rank, rank x u32 dims, then [v>=4] u8 dtype id and u32 byte
count, [v<4] u8 item size and u32 element count; the raw bytes. [v>=3] u32 number of aliases,
then (alias, target) string pairs. A string is a u16 length that counts a trailing NUL.

Only the header is parsed up front (seeking past the data); a variable's bytes are read by
offset when asked for, so a tensor costs its own size, never the whole file.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...errors import CorruptCheckpoint, MissingTensor, UnsupportedModelType
from ..config_checks import FIX, head_count_problem
from ..provenance import hash_files
from . import CT2_VERSIONS

# CTranslate2 DataType ids (include/ctranslate2/types.h).
_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: "bfloat16"}
_OLD_ITEM_SIZE = {4: 0, 2: 2, 1: 1}  # binary version < 4 stored only the item size


@dataclass(frozen=True)
class Ct2Variable:
    name: str
    shape: tuple[int, ...]
    dtype: int  # CT2 DataType id
    offset: int  # absolute byte offset of the data in the file
    nbytes: int


@dataclass
class Ct2File:
    """The parsed header of a model.bin; read(name) fetches one variable's bytes by offset."""

    path: Path
    version: int
    spec: str
    spec_revision: int
    variables: dict[str, Ct2Variable]
    aliases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path) -> Ct2File:
        path = Path(path)
        size = path.stat().st_size
        # Unbuffered: every seek skips the data for real instead of refilling a buffer.
        with open(path, "rb", buffering=0) as fh:
            r = _Reader(fh, path, size)
            version = r.u32()
            if version not in CT2_VERSIONS:
                raise CorruptCheckpoint(
                    f"{path}: CTranslate2 binary version {version} is not supported "
                    f"(supported {CT2_VERSIONS.start}-{CT2_VERSIONS.stop - 1}); "
                    "is this a CTranslate2 model.bin? re-convert it with a current ctranslate2"
                )
            spec, revision = r.string(), r.u32()
            variables: dict[str, Ct2Variable] = {}
            for _ in range(r.u32()):
                name = r.string()
                shape = tuple(r.u32() for _ in range(r.u8()))
                if version >= 4:
                    dtype, nbytes = r.u8(), r.u32()
                else:
                    item = r.u8()
                    if item not in _OLD_ITEM_SIZE:
                        raise CorruptCheckpoint(f"{path}: variable {name!r} has item size {item}")
                    dtype, nbytes = _OLD_ITEM_SIZE[item], r.u32() * item
                if dtype not in _DTYPES:
                    raise CorruptCheckpoint(f"{path}: variable {name!r} has unknown CTranslate2 dtype id {dtype}")
                itemsize = 2 if dtype == 5 else np.dtype(_DTYPES[dtype]).itemsize
                if nbytes != int(np.prod(shape, dtype=np.int64)) * itemsize:
                    raise CorruptCheckpoint(
                        f"{path}: variable {name!r} of shape {list(shape)} claims {nbytes} bytes; the file is corrupt"
                    )
                variables[name] = Ct2Variable(name, shape, dtype, r.pos, nbytes)
                r.skip(nbytes)
            aliases = {}
            if version >= 3:
                for _ in range(r.u32()):
                    alias, target = r.string(), r.string()
                    aliases[alias] = target
        return cls(path, version, spec, revision, variables, aliases)

    def resolve(self, name: str) -> str:
        seen = set()
        while name in self.aliases and name not in self.variables and name not in seen:
            seen.add(name)
            name = self.aliases[name]
        return name

    def __contains__(self, name: str) -> bool:
        return self.resolve(name) in self.variables

    def names(self) -> list[str]:
        return sorted(n for n in set(self.variables) | set(self.aliases) if n in self)

    def read(self, name: str) -> np.ndarray:
        """One variable as a numpy array of its stored dtype (bfloat16 as float32)."""
        var = self.variables.get(self.resolve(name))
        if var is None:
            raise MissingTensor(f"variable {name!r} not found in CTranslate2 file {self.path}")
        with open(self.path, "rb", buffering=0) as fh:
            fh.seek(var.offset)
            raw = fh.read(var.nbytes)
        if len(raw) != var.nbytes:
            raise CorruptCheckpoint(f"{self.path}: variable {name!r} is truncated; re-download the model")
        if var.dtype == 5:  # bfloat16: the high half of a float32
            arr = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, _DTYPES[var.dtype])
        return arr.reshape(var.shape)

    def read_float(self, name: str) -> torch.Tensor:
        """A variable at its stored float precision (float32, float16, bfloat16); int8/int16
        weights are dequantised with their `_scale` to float32, other types made float32."""
        arr = self.read(name)
        if arr.dtype in (np.int8, np.int16) and name + "_scale" in self:
            scale = self.read(name + "_scale").astype(np.float32)
            # CT2 quantises as q = round(w * scale), one scale per output row (int8) or per tensor.
            scale = scale.reshape(-1, *([1] * (arr.ndim - 1))) if scale.size > 1 else scale
            return torch.from_numpy(arr.astype(np.float32) / scale)
        if self.variables[self.resolve(name)].dtype == 5:  # bfloat16, which read() widened exactly
            return torch.from_numpy(arr).to(torch.bfloat16)
        if arr.dtype in (np.float32, np.float16):
            return torch.from_numpy(arr.copy())  # read() gives a read-only view of the bytes
        return torch.from_numpy(arr.astype(np.float32))

    def scalar(self, name: str) -> int | None:
        return int(self.read(name).reshape(-1)[0]) if name in self else None


class _Reader:
    def __init__(self, fh, path: Path, size: int):
        self.fh, self.path, self.size, self.pos = fh, path, size, 0

    def _take(self, n: int) -> bytes:
        b = self.fh.read(n) if n else b""
        if len(b) != n:
            raise CorruptCheckpoint(
                f"{self.path}: CTranslate2 file ends at byte {self.size} while reading its header "
                f"at {self.pos} (truncated download?); re-download or re-convert the model"
            )
        self.pos += n
        return b

    def u8(self) -> int:
        return self._take(1)[0]

    def u32(self) -> int:
        return struct.unpack("<I", self._take(4))[0]

    def string(self) -> str:
        n = struct.unpack("<H", self._take(2))[0]
        raw = self._take(n)
        try:
            return raw.rstrip(b"\0").decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptCheckpoint(
                f"{self.path}: unreadable name at byte {self.pos - n}; the file is corrupt"
            ) from None

    def skip(self, n: int) -> None:
        if self.pos + n > self.size:
            raise CorruptCheckpoint(
                f"{self.path}: data at byte {self.pos} needs {n} bytes but the file has {self.size} "
                "(truncated download?); re-download or re-convert the model"
            )
        self.pos += n
        self.fh.seek(self.pos)


# --- Whisper under Hugging Face names -------------------------------------------------------

# Heads of the OpenAI Whisper sizes by d_model (all have head width 64); used only when a
# file predates the spec revision that stores num_heads, never extrapolated to other widths.
_WHISPER_HEADS = {384: 6, 512: 8, 768: 12, 1024: 16, 1280: 20}

_LAYER = re.compile(r"(encoder|decoder)/layer_(\d+)/")


class Ct2WhisperStore:
    """A CTranslate2 WhisperSpec model.bin as a TensorStore with HF Whisper tensor names.

    Mapped (HF name <- CT2 variable; fused nn.Linear weights split by rows, d = d_model):
      model.{stack}.layers.{l}.self_attn.{q,k,v}_proj.weight
          <- {stack}/layer_{l}/self_attention/linear_0/weight rows 0:d, d:2d, 2d:3d
      model.{stack}.layers.{l}.self_attn.{q,v}_proj.bias <- linear_0/bias slices (HF: no k bias)
      model.decoder.layers.{l}.encoder_attn.q_proj.{weight,bias} <- decoder/layer_{l}/attention/linear_0
      model.decoder.layers.{l}.encoder_attn.{k,v}_proj.weight
          <- decoder/layer_{l}/attention/linear_1/weight rows 0:d, d:2d
      model.decoder.layers.{l}.encoder_attn.v_proj.bias <- attention/linear_1/bias rows d:2d
    Heads: `{stack}/num_heads` from the file (spec revision >= 2), else the folder's
    config.json `{stack}_attention_heads`, else the OpenAI Whisper size for that d_model
    (all have head width 64); any other width without num_heads is an error, not a guess.
    Every raw CT2 variable (and alias) stays readable under its own '/' name, so the fused
    k-bias slice can still be checked: it is exactly 0 in a converted HF/OpenAI Whisper.
    """

    def __init__(self, path: str | Path, package_config: dict | None = None):
        self.path = Path(path)
        self.file = Ct2File.open(self.path)
        if self.file.spec != "WhisperSpec":
            raise UnsupportedModelType(
                f"{self.path}: CTranslate2 spec {self.file.spec!r} is not supported; only WhisperSpec is read "
                "(convert the original Hugging Face checkpoint instead)"
            )
        self._map: dict[str, tuple[str, int, int]] = {}  # HF name -> (CT2 name, row start, row stop)
        self._build_map()
        self.config = self._config(package_config or {})
        self._fingerprint: str | None = None

    def _d(self) -> int:
        return self.file.variables[self.file.resolve("encoder/conv1/weight")].shape[0]

    def _build_map(self) -> None:
        if "encoder/conv1/weight" not in self.file:
            raise MissingTensor(f"variable 'encoder/conv1/weight' not found in {self.path}; not a Whisper model?")
        d = self._d()
        q, k, v = (0, d), (d, 2 * d), (2 * d, 3 * d)
        for stack, l in sorted({(m.group(1), int(m.group(2))) for n in self.file.names() if (m := _LAYER.match(n))}):
            src, dst = f"{stack}/layer_{l}", f"model.{stack}.layers.{l}"
            fused = f"{src}/self_attention/linear_0"
            if f"{fused}/weight" not in self.file:
                continue  # e.g. low-rank "lite" Whisper: left unmapped, the adapter reports it
            for part, rows in (("q", q), ("k", k), ("v", v)):
                self._map[f"{dst}.self_attn.{part}_proj.weight"] = (f"{fused}/weight", *rows)
            for part, rows in (("q", q), ("v", v)):
                self._map[f"{dst}.self_attn.{part}_proj.bias"] = (f"{fused}/bias", *rows)
            if stack == "decoder" and f"{src}/attention/linear_0/weight" in self.file:
                cross_q, cross_kv = f"{src}/attention/linear_0", f"{src}/attention/linear_1"
                self._map[f"{dst}.encoder_attn.q_proj.weight"] = (f"{cross_q}/weight", *q)
                self._map[f"{dst}.encoder_attn.q_proj.bias"] = (f"{cross_q}/bias", *q)
                self._map[f"{dst}.encoder_attn.k_proj.weight"] = (f"{cross_kv}/weight", 0, d)
                self._map[f"{dst}.encoder_attn.v_proj.weight"] = (f"{cross_kv}/weight", d, 2 * d)
                self._map[f"{dst}.encoder_attn.v_proj.bias"] = (f"{cross_kv}/bias", d, 2 * d)
        self._map = {hf: src for hf, src in self._map.items() if src[0] in self.file}

    def _config(self, package_config: dict) -> dict:
        d = self._d()
        n_layers = {
            s: len({int(m.group(2)) for n in self.file.names() if (m := _LAYER.match(n)) and m.group(1) == s})
            for s in ("encoder", "decoder")
        }
        heads = {}
        for s in ("encoder", "decoder"):
            # Spec revision >= 2 stores `<stack>/num_heads` (int16); older files did not.
            h = self.file.scalar(f"{s}/num_heads")
            how = "file"
            if h is None and package_config.get(f"{s}_attention_heads"):
                key = f"{s}_attention_heads"
                problem = head_count_problem(key, package_config[key], package_config)
                if problem is not None:
                    raise CorruptCheckpoint(f"{self.path.parent}: {problem}; {FIX}")
                h, how = int(package_config[key]), "config.json"
            if h is None and d in _WHISPER_HEADS:
                h, how = _WHISPER_HEADS[d], "openai-whisper size table"
            if h is None:
                raise CorruptCheckpoint(
                    f"{self.path}: no {s}/num_heads in the file and d_model {d} is not an OpenAI Whisper size; "
                    f"add '{s}_attention_heads' to {self.path.parent / 'config.json'}"
                )
            heads[s] = (h, how)
        conv1 = self.file.variables[self.file.resolve("encoder/conv1/weight")].shape
        cfg = {
            "model_type": "whisper",
            "d_model": d,
            "encoder_layers": n_layers["encoder"],
            "decoder_layers": n_layers["decoder"],
            "encoder_attention_heads": heads["encoder"][0],
            "decoder_attention_heads": heads["decoder"][0],
            "num_mel_bins": conv1[1],
            "_source_format": "ctranslate2",
            "_ct2_spec": f"{self.file.spec} rev {self.file.spec_revision} (binary v{self.file.version})",
            "_heads_from": {s: how for s, (_, how) in heads.items()},
        }
        for key, var, axis in (
            ("vocab_size", "decoder/embeddings/weight", 0),
            ("max_source_positions", "encoder/position_encodings/encodings", 0),
            ("max_target_positions", "decoder/position_encodings/encodings", 0),
            ("encoder_ffn_dim", "encoder/layer_0/ffn/linear_0/weight", 0),
            ("decoder_ffn_dim", "decoder/layer_0/ffn/linear_0/weight", 0),
        ):
            if var in self.file:
                cfg[key] = self.file.variables[self.file.resolve(var)].shape[axis]
        return cfg

    # --- TensorStore ---

    def names(self) -> list[str]:
        return sorted(set(self._map) | set(self.file.names()))

    def __contains__(self, name: str) -> bool:
        return name in self._map or name in self.file

    def get(self, name: str) -> torch.Tensor:
        if name in self._map:
            src, start, stop = self._map[name]
            t = self.file.read_float(src)
            if t.shape[0] < stop:
                raise CorruptCheckpoint(f"{self.path}: {src} has {t.shape[0]} rows, expected at least {stop}")
            return t[start:stop].contiguous()
        if name in self.file:
            return self.file.read_float(name)
        raise MissingTensor(
            f"tensor {name!r} not found in CTranslate2 file {self.path} ({len(self._map)} mapped HF names); "
            "only attention projections are mapped from CTranslate2 Whisper"
        )

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = hash_files([self.path])
        return self._fingerprint
