"""The package's import graph, read from the source with `ast` (nothing is imported), and the
files a module runs: what a figure or table rule lists as its code inputs, so that editing
shared code reruns exactly the rules that use it."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def modules(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, whether it is a package's __init__)."""
    found = {}
    for f in sorted(package.rglob("*.py")):
        parts = list(f.relative_to(package.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (annotations, never run)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _module_level(tree: ast.Module) -> set[int]:
    """ids of the nodes that run when the module is imported (outside function bodies)."""
    found: set[int] = set()

    def visit(node):
        found.add(id(node))
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child)

    visit(tree)
    return found


def _targets(node, mod: str, is_pkg: bool, mods, top: str) -> list[str]:
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names if a.name.split(".")[0] == top]
    elif node.level:
        parts = mod.split(".")[: len(mod.split(".")) - (0 if is_pkg else 1)]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    elif (node.module or "").split(".")[0] == top:
        base = node.module
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    else:
        return []
    found = []
    for t in targets:
        while t not in mods:
            t = t.rsplit(".", 1)[0]
        if t != mod:
            found.append(t)
    return found


def graphs(package: Path = PACKAGE) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(every import, the imports run when the module is imported): module -> modules of the
    package, imports under `if TYPE_CHECKING:` left out."""
    mods = modules(package)
    top = package.name
    every: dict[str, set[str]] = {m: set() for m in mods}
    on_import: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip, eager = _type_checking_only(tree), _module_level(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
                targets = _targets(node, mod, is_pkg, mods, top)
                every[mod].update(targets)
                if id(node) in eager:
                    on_import[mod].update(targets)
    return every, on_import


def imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at module level or inside functions."""
    return graphs(package)[0]


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def runs(entries: list[str], package: Path = PACKAGE) -> list[str]:
    """The modules that running `entries` may execute: what they import, at module level or in
    a function, and so on down; each imported module's parent packages, whose __init__ runs
    first. Of a module reached only because it is imported while a parent package loads (such
    as the `wqk.api` of `wqk/__init__.py`), only the imports run at import time are followed:
    its functions are not called. Sorted dotted names."""
    every, on_import = _cached_graphs(package)
    used, loaded = set(), set()
    todo = [(m, True) for m in entries]
    while todo:
        mod, is_used = todo.pop()
        if mod in used or (not is_used and mod in loaded):
            continue
        (used if is_used else loaded).add(mod)
        todo += [(p, False) for p in _parents(mod)]
        todo += [(d, is_used) for d in (every if is_used else on_import)[mod]]
    return sorted(used | loaded)


def files(entries: list[str], package: Path = PACKAGE) -> list[str]:
    """The source files of `runs(entries)`, relative to the package's folder, sorted."""
    mods = modules(package)
    return sorted(mods[m][0].relative_to(package).as_posix() for m in runs(entries, package))


def command_files(module: str, command: str, package: Path = PACKAGE) -> list[str]:
    """The files `wqk COMMAND` may run when it renders `module` (wqk.figures.depth_profile, say):
    the module's, the command's and the `wqk` entry point's, with what they import."""
    return files([module, f"wqk.commands.{command}", "wqk.cli"], package)


@lru_cache(maxsize=4)
def _cached_graphs(package: Path):
    return graphs(package)
