"""The package's shape: `wqk score` walks down the modules, never back up."""

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
