"""Revision sweeps: one catalogue line, several revisions of one hub model (the checkpoints a
model publishes along its training, as Pythia's `step{N}` branches), scored each on its own.

The `revisions` cell of a catalogue line is either
- a list, `step0,step1000,step143000`: branches, tags, or `NAME@COMMIT` (a branch pinned to the
  commit it named). Loading the catalogue expands the line into one model per revision: model_id
  `<model_id>@<NAME>`, revision the commit (else the name), `sweep` the line's model_id and
  `step` the number in the name (the digits after "step", else its first number);
- or a pattern, `step{N}~8`: the repo's branches and tags that match `step{N}`, sampled to 8 (all
  of them without `~COUNT`), evenly by rank, first and last included; `step{N}~8log`, evenly in
  log(1 + step) instead (the nearest branch to each point: Pythia's 154 branches are 1,000 steps
  apart but for the first ten, so by rank 8 of them hold no early step). Expanding it needs the hub's
  list of branches, so a catalogue never holds one when it is loaded: `wqk pin` (and
  `wqk catalogue --revisions`) writes it out as the list of `NAME@COMMIT` it stands for.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .errors import WqkError
from .ids import is_commit
from .ids import slug as make_slug

_PATTERN = re.compile(r"(?P<pattern>[^~,@]*\{N\}[^~,@]*)(?:~(?P<count>[1-9][0-9]*)(?P<log>log)?)?")
SWEEP_COLUMNS = ("sweep", "step")  # what an expanded line carries instead of `revisions`


class SweepError(WqkError):
    pass


@dataclass(frozen=True)
class Revision:
    """One revision of a sweep: its name (a branch or tag), the commit it is pinned to (None: the
    name is fetched as it stands) and the training step it is."""

    name: str
    commit: str | None
    step: int

    @property
    def fetched(self) -> str:
        """What `wqk fetch --revision` is given."""
        return self.commit or self.name

    def __str__(self) -> str:
        return f"{self.name}@{self.commit}" if self.commit else self.name


@dataclass(frozen=True)
class Pattern:
    """`step{N}~8`: branches or tags matching `text` with a number at {N}, `count` of them (None:
    all), evenly by rank or (log, `~8log`) evenly in log(1 + step)."""

    text: str
    count: int | None
    log: bool = False

    def regex(self) -> re.Pattern:
        before, after = self.text.split("{N}", 1)
        return re.compile(re.escape(before) + r"(\d+)" + re.escape(after))

    def sample(self, refs: dict[str, str]) -> list[Revision]:
        """The refs (name -> commit) it names, pinned, in step order."""
        regex = self.regex()
        steps = sorted((int(m.group(1)), name) for name in refs if (m := regex.fullmatch(name)))
        if not steps:
            shown = ", ".join(sorted(refs)[:8]) + (" ..." if len(refs) > 8 else "")
            raise SweepError(f"no branch or tag matches {self.text} (the repo has: {shown or 'none'})")
        n = len(steps) if self.count is None else min(self.count, len(steps))
        if n == 1:
            picked = [len(steps) - 1]
        elif n == len(steps):
            picked = list(range(n))
        elif self.log:
            picked = _nearest_in_log([step for step, _ in steps], n)
        else:
            picked = sorted({round(i * (len(steps) - 1) / (n - 1)) for i in range(n)})
        return [Revision(steps[i][1], refs[steps[i][1]], steps[i][0]) for i in picked]

    def __str__(self) -> str:
        return self.text + (f"~{self.count}{'log' if self.log else ''}" if self.count is not None else "")


def _nearest_in_log(steps: list[int], n: int) -> list[int]:
    """Indices into the sorted `steps` of the ones nearest, in log(1 + step), to n points evenly
    spaced there from the first to the last (both included); fewer where two points share one."""
    lo, hi = math.log1p(steps[0]), math.log1p(steps[-1])
    logs = [math.log1p(s) for s in steps]
    points = [lo + i * (hi - lo) / (n - 1) for i in range(n)]
    return sorted({min(range(len(steps)), key=lambda j: (abs(logs[j] - x), j)) for x in points})


def parse(cell: str) -> list[Revision] | Pattern | None:
    """A `revisions` cell: None when empty, a Pattern, or the revisions it lists. Raises SweepError."""
    cell = cell.strip()
    if not cell:
        return None
    if "{" in cell or "~" in cell:
        m = _PATTERN.fullmatch(cell)
        if not m:
            raise SweepError(
                f"{cell!r} is no pattern: write one as step{{N}}, step{{N}}~COUNT or step{{N}}~COUNTlog (COUNT >= 1)"
            )
        return Pattern(m.group("pattern"), int(m.group("count")) if m.group("count") else None, bool(m.group("log")))
    revisions, seen = [], set()
    for item in cell.split(","):
        name, _, commit = item.strip().partition("@")
        if not name or (commit and not is_commit(commit)):
            raise SweepError(f"{item.strip()!r} in {cell!r}: give each revision as NAME or NAME@COMMIT (40 hex digits)")
        if is_commit(name):
            raise SweepError(f"{name} is a bare commit: name it, as NAME@{name} (its training step is read from NAME)")
        if name in seen:
            raise SweepError(f"{name} is listed twice in {cell!r}")
        seen.add(name)
        revisions.append(Revision(name, commit or None, step_of(name)))
    return revisions


def step_of(name: str) -> int:
    """The training step a revision's name gives: step143000 -> 143000, step1000-tokens4B -> 1000."""
    after_step = re.search(r"step(\d+)", name, re.IGNORECASE)
    digits = after_step.group(1) if after_step else next(iter(re.findall(r"\d+", name)), None)
    if digits is None:
        raise SweepError(f"revision {name!r} has no number in its name to read its training step from")
    return int(digits)


def expand(row: dict, revisions: list[Revision]) -> list[dict]:
    """A catalogue row with a list of revisions as one row per revision (see the module's doc)."""
    out = []
    for r in revisions:
        model_id = f"{row['model_id']}@{r.name}"
        slug = f"{row['slug']}--{make_slug(r.name)}" if row.get("slug") else make_slug(model_id)
        out.append(
            {**row, "model_id": model_id, "slug": slug, "revision": r.fetched, "sweep": row["model_id"], "step": r.step}
        )
    return out


def format_cell(revisions: list[Revision]) -> str:
    return ",".join(map(str, revisions))


def pin(cell: str, refs: dict[str, str], repo: str = "the repo") -> str:
    """A `revisions` cell as the NAME@COMMIT list it stands for, given the repo's refs (name ->
    commit): a pattern sampled from them, each listed name without a commit pinned to its ref's."""
    revisions = parse(cell)
    if revisions is None:
        raise SweepError("no revisions given")
    if isinstance(revisions, Pattern):
        return format_cell(revisions.sample(refs))
    missing = [r.name for r in revisions if not r.commit and r.name not in refs]
    if missing:
        raise SweepError(f"{repo} has no branch or tag {', '.join(missing)}")
    return format_cell([r if r.commit else Revision(r.name, refs[r.name], r.step) for r in revisions])


def training_fraction(frame, by=("sweep", "stack")):
    """Each row's step over the last step of its history (the rows sharing `by`); 0 where the
    last step is 0. `frame` is a pandas DataFrame with a `step` column."""
    last = frame.groupby(list(by))["step"].transform("max")
    return frame["step"] / last.where(last > 0, 1)
