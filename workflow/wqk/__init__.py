"""wqk: the bilinear forms W_q W_k^T of attention heads, their symmetry and directionality.

    import wqk
    scores = wqk.score("org/name")     # or a folder, pypi:<package>, a loaded transformers model
    scores[scores["scope"] == "layer"]  # per layer; scope "head": per head

`import wqk` is cheap: torch and pandas load on the first `wqk.score`.
"""

import re

from .api import score
from .errors import WqkError

__all__ = ["WqkError", "__version__", "score", "slug"]

__version__ = "0.1.0"


def slug(model_id: str) -> str:
    """Filesystem-safe name of a model id: the one place where ids become paths.

    >>> slug("meta-llama/Llama-2-7b-hf@main")
    'meta-llama--llama-2-7b-hf--main'
    """
    s = model_id.strip().lower().replace("/", "--").replace("@", "--")
    return re.sub(r"[^a-z0-9._-]", "_", s)
