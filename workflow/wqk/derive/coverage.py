"""Per model type of the installed transformers: hand, derived, or refused and why; the coverage
table (`wqk records list`, `wqk records coverage`).

Derivations are read from the cache (store), the missing ones derived in worker processes (two
by default), each type with a time limit, a worker that dies restarted past its type: one model
type whose tiny model crashes the interpreter costs only its own row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from typing import NamedTuple

from .calls import CATEGORIES

TIME_LIMIT = 120  # seconds per type


class Status(NamedTuple):
    model_type: str
    status: str  # "hand", "derived" or "refused"
    category: str  # "" (scored), or a refusal category (calls.CATEGORIES, "no attention")
    detail: str


def _worker_main(types: list[str]) -> None:
    import signal

    from .store import cached

    def alarm(*_):
        raise TimeoutError(f"over {TIME_LIMIT} s")

    signal.signal(signal.SIGALRM, alarm)
    for t in types:
        print("START", t, flush=True)
        signal.alarm(TIME_LIMIT)
        try:
            cached(t)
        except BaseException as e:  # a row, not a crash of the table
            _store_failure(t, "forward", f"{type(e).__name__}: {e}")
        signal.alarm(0)
        print("DONE", t, flush=True)


def _store_failure(model_type: str, category: str, reason: str) -> None:
    from ..atomic import write_text
    from .store import FORMAT, path_for

    path = path_for(model_type, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "model_type": model_type, "record": None, "category": category, "reason": reason}
    write_text(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")


def _derive_missing(types: list[str], jobs: int) -> None:
    from ..progress import bar

    lock = threading.Lock()
    progress = bar(total=len(types), desc="deriving records", unit="type")

    def stream(todo: list[str]) -> None:
        while todo:
            cmd = [
                sys.executable,
                "-c",
                "import sys; from wqk.derive.coverage import _worker_main; _worker_main(sys.argv[1:])",
                *todo,
            ]
            env = dict(os.environ, TQDM_DISABLE="1")
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
            current = None
            for line in proc.stdout:
                kind, _, name = line.strip().partition(" ")
                if kind == "START":
                    current = name
                elif kind == "DONE" and name in todo:
                    todo.remove(name)
                    current = None
                    with lock:
                        progress.update(1)
            proc.wait()
            if current is not None:  # the interpreter died deriving it
                _store_failure(current, "forward", f"the process deriving it died (exit {proc.returncode})")
                todo.remove(current)
                with lock:
                    progress.update(1)

    threads = [threading.Thread(target=stream, args=(types[i::jobs],)) for i in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    progress.close()


def statuses(types: list[str] | None = None, jobs: int = 2) -> list[Status]:
    """One Status per model type (default: every type of the installed transformers), sorted."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    from ..adapters import _REFUSED, _load_all, get_record, is_hand
    from . import _quiet
    from .store import path_for

    _load_all()
    types = sorted(types or CONFIG_MAPPING_NAMES)
    with _quiet():  # transformers' config warnings about token ids past a tiny vocabulary
        paths = {t: path_for(t, None) for t in types if not is_hand(t)}
    missing = [t for t, path in paths.items() if not path.is_file()]
    if missing:
        _derive_missing(missing, jobs)
    rows = []
    for t in types:
        if t in _REFUSED:
            rows.append(Status(t, "refused", "not bilinear", _REFUSED[t]))
            continue
        if is_hand(t):
            rows.append(Status(t, "hand", "", "hand-written record (wqk/adapters)"))
            continue
        d = json.loads(paths[t].read_text(encoding="utf-8"))
        if d.get("record"):
            stacks = ", ".join(a["stack"] for a in d["record"]["attention"])
            rows.append(Status(t, "derived", "", f"stacks {stacks}"))
        else:
            rows.append(Status(t, "refused", d["category"], d.get("reason") or ""))
    del get_record
    return rows


def coverage_table(rows: list[Status], markdown: bool = False) -> str:
    """Types with dot-product attention, how many score (hand, derived), refusals by category."""
    import transformers

    counts = Counter((r.status, r.category) for r in rows)
    no_attention, no_model = counts[("refused", "no attention")], counts[("refused", "no model")]
    attention = len(rows) - no_attention - no_model
    hand, derived = counts[("hand", "")], counts[("derived", "")]
    apart = ("no attention", "no model")
    refused = Counter(r.category for r in rows if r.status == "refused" and r.category not in apart)
    lines = [
        ("model types of transformers " + transformers.__version__, len(rows), ""),
        ("without a model class of their own", no_model, "refused: no model"),
        ("without dot-product attention", no_attention, "refused: no attention"),
        ("with dot-product attention", attention, "100%"),
        ("score: hand-written record", hand, f"{hand / attention:.1%}"),
        ("score: derived record", derived, f"{derived / attention:.1%}"),
        ("score: together", hand + derived, f"{(hand + derived) / attention:.1%}"),
    ]
    lines += [(f"refused: {c} ({CATEGORIES.get(c, c)})", n, f"{n / attention:.1%}") for c, n in sorted(refused.items())]
    bilinear = attention - refused["not bilinear"]
    if bilinear:  # the share of the types a bilinear form can describe at all
        share = f"{(hand + derived) / bilinear:.1%} of {bilinear}"
        lines.append(("score, of those whose logits are a bilinear form", hand + derived, share))
    if markdown:
        out = ["| model types | count | share of those with attention |", "| --- | ---: | ---: |"]
        out += [f"| {a} | {n} | {s} |" for a, n, s in lines]
        return "\n".join(out)
    width = max(len(a) for a, _, _ in lines)
    return "\n".join(f"{a:<{width}}  {n:>5}  {s}" for a, n, s in lines)
