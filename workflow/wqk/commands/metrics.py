"""wqk metrics [--json]: the registered metrics (wqk.metric_registry), their columns and formulas;
--json: one object per column (wqk.metric_docs): column, metric, scope, input,
transpose_invariant, reproduces (the published columns it equals), definition.

`wqk score --metrics NAMES` selects among them; "default" is every cheap one, "follow_ups" the
three follow-up papers' families.
"""


def add_arguments(p):
    p.add_argument("--json", action="store_true", help="one JSON object per column, in a list")


def run(args) -> int:
    if args.json:
        import json

        from ..metric_docs import described

        print(json.dumps(described(), indent=1))
        return 0
    from ..metric_registry import REGISTRY

    for m in REGISTRY.values():
        cost = "default" if m.cheap else "opt-in"
        print(f"{m.name} ({cost}): {', '.join(m.columns)}\n    {m.summary}")
    return 0
