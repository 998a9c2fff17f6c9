"""The package's shape: `wqk score` walks down the modules, never back up; the imports
follow the layers of README.md's layout list and form no cycle."""

import subprocess
import sys

import import_graph
from call_walk import climbs
from wqk.cli import main
from wqk.tiny import build_tiny


def test_climbs_are_detected():
    """The check itself: module a calls b, which calls back into a."""
    a, b = {"__name__": "wqk.probe_a"}, {"__name__": "wqk.probe_b"}
    exec("def down():\n    return b_calls()\ndef leaf():\n    return 1", a)
    exec("def b_calls():\n    return leaf()\ndef plain():\n    return 2", b)
    a["b_calls"], b["leaf"] = b["b_calls"], a["leaf"]
    assert climbs(a["down"]) == ["wqk.probe_a -> wqk.probe_b -> wqk.probe_a"]
    a["b_calls"] = b["plain"]
    assert climbs(a["down"]) == []


def test_score_of_a_folder_walks_down_the_package(tmp_path):
    folder = build_tiny("llama", tmp_path / "tiny-llama")
    out = tmp_path / "scores.parquet"
    assert climbs(main, ["score", str(folder), "--out", str(out), "--quiet"]) == []
    assert out.is_file()


def _layer_of(module: str, layers: list[list[str]]) -> int | None:
    name = module.split(".")[1] if "." in module else "__init__"
    return next((i for i, names in enumerate(layers) if name in names), None)


def _upward(graph, layers) -> list[str]:
    """Imports of a module on a lower line (later in README's list) of one on a higher line."""
    return sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        for d in deps
        if _layer_of(m, layers) is not None
        and _layer_of(d, layers) is not None
        and _layer_of(d, layers) < _layer_of(m, layers)
    )


def _between(graph, a: str, b: str) -> list[str]:
    """Imports from a module of wqk.<a> into wqk.<b> or back (two subpackages on lines of their own)."""

    def top(module):
        return module.split(".")[1] if "." in module else None

    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if {top(m), top(d)} == {a, b})


def test_the_checks_of_the_import_graph_fail_where_they_should():
    graph = {"wqk.a": {"wqk.b"}, "wqk.b": {"wqk.c"}, "wqk.c": {"wqk.a"}, "wqk.d": set()}
    assert import_graph.cycles(graph) == [["wqk.a", "wqk.b", "wqk.c"]]
    assert import_graph.cycles({"wqk.a": {"wqk.b"}, "wqk.b": set()}) == []
    assert _upward({"wqk.a": {"wqk.b"}, "wqk.b": {"wqk.a"}}, [["a"], ["b"]]) == ["wqk.b -> wqk.a"]
    assert _upward({"wqk.a": {"wqk.b"}}, [["a", "b"]]) == []  # one line, one layer
    down, up = {"wqk.figures.f": {"wqk.tables.t"}}, {"wqk.tables.t": {"wqk.figures"}}
    assert _between(down, "figures", "tables") == ["wqk.figures.f -> wqk.tables.t"]
    assert _between(up, "figures", "tables") == ["wqk.tables.t -> wqk.figures"]
    assert _between({"wqk.figures.f": {"wqk.report_data", "wqk.figures"}}, "figures", "tables") == []


def test_the_parser_sees_function_level_imports_and_skips_type_checking_ones(tmp_path):
    pkg = tmp_path / "wqk"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("X = 1\n")
    (pkg / "sub" / "__init__.py").write_text("from .. import low\n")
    (pkg / "high.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import x\n"
        "def f():\n    from .low import X\n    import wqk.sub\n"
    )
    graph = import_graph.imports(pkg)
    assert graph["wqk.high"] == {"wqk.low", "wqk.sub"}
    assert graph["wqk.sub"] == {"wqk.low"}


def test_imports_form_no_cycle():
    assert import_graph.cycles(import_graph.imports()) == []


def test_every_module_is_in_the_readme_layers_and_no_import_goes_up():
    layers = import_graph.readme_layers()
    graph = import_graph.imports()
    unlisted = sorted({m for m in graph if _layer_of(m, layers) is None})
    assert unlisted == [], f"add these to README.md's layout list, at their layer: {unlisted}"
    assert _upward(graph, layers) == []


def test_figures_and_tables_do_not_import_each_other():
    """Two lines of README's list; what both need is in wqk.report_data, below them."""
    layers = import_graph.readme_layers()
    assert ["figures"] in layers and ["tables"] in layers and ["report_data"] in layers
    assert layers.index(["report_data"]) > max(layers.index(["figures"]), layers.index(["tables"]))
    assert _between(import_graph.imports(), "figures", "tables") == []


def test_nothing_imports_the_front_door():
    graph = import_graph.imports()
    assert sorted(m for m, deps in graph.items() if "wqk" in deps) == []


def test_the_provenance_hash_starts_before_torch_is_imported(tmp_path):
    """`wqk score FOLDER` locates the checkpoint (which starts the hash of its weights in a
    thread) before anything imports torch: the hash runs while torch loads."""
    folder = build_tiny("llama", tmp_path / "tiny-llama")
    probe = (
        "import sys, wqk.checkpoints as c\n"
        "real = c.locate\n"
        "def locate(*a, **k):\n"
        "    print('torch loaded at locate:', 'torch' in sys.modules, file=sys.stderr)\n"
        "    return real(*a, **k)\n"
        "c.locate = locate\n"
        "from wqk.cli import main\n"
        f"sys.exit(main(['score', {str(folder)!r}, '--out', {str(tmp_path / 's.parquet')!r}, '--quiet']))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "torch loaded at locate: False" in r.stderr
