"""wqk: the bilinear forms W_q W_k^T of attention heads, their symmetry and directionality.

    import wqk
    scores = wqk.score("org/name")     # or a folder, pypi:<package>, a loaded transformers model
    scores[scores["scope"] == "layer"]  # per layer; scope "head": per head

`import wqk` is cheap: torch and pandas load on the first `wqk.score`.
"""

from .api import score
from .errors import WqkError
from .ids import slug
from .version import __version__

__all__ = ["WqkError", "__version__", "score", "slug"]
