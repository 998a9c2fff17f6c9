"""The import graph of workflow/wqk, read with ast (nothing imported), and the layer order
of README.md's layout list (tests/test_layout.py checks one against the other)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workflow" / "wqk"


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


def imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at module level or inside functions."""
    mods = modules(package)
    top = package.name
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == top]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = mod.split(".")[: len(mod.split(".")) - (0 if is_pkg else 1)]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                elif (node.module or "").split(".")[0] == top:
                    base = node.module
                else:
                    continue
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                while t not in mods:
                    t = t.rsplit(".", 1)[0]
                if t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def readme_layers(readme: Path = ROOT / "README.md") -> list[list[str]]:
    """The entries of README.md's layout list under `workflow/wqk/`, one list per line (the
    names a line gives: `aggregate.py, validate.py` is one layer), top line first."""
    text = readme.read_text()
    block = text[text.index("workflow/wqk/ ") :].split("\n")
    indent = None
    layers = []
    for line in block[1:]:
        stripped = line.lstrip()
        depth = len(line) - len(stripped)
        if indent is None:
            indent = depth
        if depth < indent or not stripped:
            break
        if depth > indent:  # a package's own modules
            continue
        names = re.match(r"((?:[\w.]+/?(?:, )?)+)", stripped).group(1)
        layers.append([n.strip().removesuffix("/").removesuffix(".py") for n in names.split(",") if n.strip()])
    return layers
