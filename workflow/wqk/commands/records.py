"""wqk records {list,derive,coverage}: the architecture records, hand-written and derived.

wqk records list [TYPE ...] [--json]   per model type of the installed transformers (tab-separated:
                                       type, hand|derived|refused, category, detail): hand,
                                       derived, or refused and why (derivations cached)
wqk records derive TYPE [--config config.json]
                                       the derived record of TYPE as the source of a record
                                       module (to review and commit where a hand record is wanted)
wqk records coverage [--markdown]      how many types have dot-product attention, how many score
                                       (hand, derived) and how many are refused, by category
"""


def add_arguments(p):
    sub = p.add_subparsers(dest="action", required=True, metavar="{list,derive,coverage}")
    ls = sub.add_parser("list", help="hand, derived or refused, per model type")
    ls.add_argument("types", nargs="*", help="model types (default: every type of the installed transformers)")
    ls.add_argument("--json", action="store_true", help="one JSON object per type")
    d = sub.add_parser("derive", help="print the derived record of a model type as Python source")
    d.add_argument("type", help="a model_type of the installed transformers")
    d.add_argument("--config", help="a config.json whose structure to derive (default: the config class's defaults)")
    c = sub.add_parser("coverage", help="the coverage table of the installed transformers")
    c.add_argument("--markdown", action="store_true", help="as a Markdown table (README)")


def run(args) -> int:
    if args.action == "derive":
        return _derive(args)
    from ..derive.coverage import statuses

    rows = statuses(args.types if args.action == "list" else None)
    if args.action == "coverage":
        from ..derive.coverage import coverage_table

        print(coverage_table(rows, markdown=args.markdown))
        return 0
    if args.json:
        import json

        print(json.dumps([r._asdict() for r in rows], indent=1))
        return 0
    for r in rows:
        print(f"{r.model_type}\t{r.status}\t{r.category}\t{r.detail}")
    return 0


def _derive(args) -> int:
    import json

    from ..derive import derive
    from ..derive.source import record_source
    from ..errors import UnsupportedModelType

    fields = json.loads(open(args.config, encoding="utf-8").read()) if args.config else None
    result = derive(args.type, fields)
    if not result.ok:
        raise UnsupportedModelType(f"model_type {args.type!r} is not derivable: {result.category}: {result.reason}")
    print(record_source(result))
    return 0
