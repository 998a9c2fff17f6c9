"""The import graph of workflow/wqk (wqk.code_graph: read with ast, nothing imported), and the
layer order of README.md's layout list (tests/test_layout.py checks one against the other)."""

from __future__ import annotations

import re
from pathlib import Path

from wqk.code_graph import imports, modules  # noqa: F401  (the graph: the package's own, used by the workflow)

ROOT = Path(__file__).resolve().parents[1]


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
