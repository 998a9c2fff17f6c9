"""wqk metrics: the registered metrics (wqk.metric_registry), their columns and formulas.

`wqk score --metrics NAMES` selects among them; "default" is every cheap one.
"""


def add_arguments(p):
    pass


def run(args) -> int:
    from ..metric_registry import REGISTRY

    for m in REGISTRY.values():
        cost = "default" if m.cheap else "opt-in"
        print(f"{m.name} ({cost}): {', '.join(m.columns)}\n    {m.summary}")
    return 0
