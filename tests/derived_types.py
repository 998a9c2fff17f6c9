"""The expected outcome of deriving every model type of the installed transformers.

    python tests/derived_types.py            # rewrite tests/derived_types.json (minutes, two workers)
    python tests/derived_types.py --reasons reasons.tsv   # and every type's reason, to read the refusals
    .venv-timm/bin/python tests/derived_types.py --out timm.json   # with the timm extra: its table, elsewhere

tests/test_derive_all.py derives every type again and compares it with this file: a type that
derived must still derive (its record passes the logits test inside `derive`), a type refused
must be refused in the same category. Rewrite it when the derivation or transformers changes,
and read the diff: it says which types were won and which were lost.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "derived_types.json"


def expected() -> dict:
    return json.loads(EXPECTED.read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    import argparse
    import os

    import transformers

    from wqk.derive.coverage import coverage_table, statuses
    from wqk.derive.store import code_key

    parser = argparse.ArgumentParser(description="Rewrite tests/derived_types.json from a fresh derivation.")
    parser.add_argument("--reasons", type=Path, help="also write type, status, category and reason per line (TSV)")
    parser.add_argument("--out", type=Path, default=EXPECTED, help="where to write the outcomes (default: %(default)s)")
    args = parser.parse_args(argv)
    code = code_key()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["WQK_CACHE"] = cache  # a fresh derivation of every type, not an old cache's
        try:
            rows = statuses()
        except Exception:
            if code_key() == code:
                raise
            rows = None
    if code_key() != code:  # the workers derive under the code of their moment: a mix of two versions
        print("the derivation's code changed during the run: nothing written; run it again", file=sys.stderr)
        return 1
    print(coverage_table(rows, markdown=True))
    out = {
        "transformers": transformers.__version__,
        "types": {r.model_type: r.status if r.status != "refused" else f"refused: {r.category}" for r in rows},
    }
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    counts = {}
    for v in out["types"].values():
        counts[v] = counts.get(v, 0) + 1
    print(f"{args.out}: {len(rows)} types, {counts}")
    if args.reasons:
        lines = ["\t".join((r.model_type, r.status, r.category, " ".join(r.detail.split()))) for r in rows]
        args.reasons.write_text("type\tstatus\tcategory\treason\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
