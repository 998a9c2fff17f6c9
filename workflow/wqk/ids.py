"""Model ids as file names: the one place where ids become paths (imported by the hub cache,
the catalogue, aggregation and the workflow's rules, below everything that scores), and what a
pinned revision looks like."""

import re

# What `slug` gives, as a pattern (the workflow's {slug} wildcard): one pattern, not the
# alternation of every slug, whose size every job's wildcard matching would pay for.
SLUG_PATTERN = r"[a-z0-9._-]+"


# A git commit as the hub names one: a revision pinned to it never moves.
_COMMIT = re.compile(r"[0-9a-f]{40}")


def is_commit(revision) -> bool:
    return isinstance(revision, str) and _COMMIT.fullmatch(revision) is not None


def slug(model_id: str) -> str:
    """Filesystem-safe name of a model id.

    >>> slug("meta-llama/Llama-2-7b-hf@main")
    'meta-llama--llama-2-7b-hf--main'
    """
    s = model_id.strip().lower().replace("/", "--").replace("@", "--")
    return re.sub(r"[^a-z0-9._-]", "_", s)
