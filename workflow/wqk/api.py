"""The library's front door: `wqk.score`, the scores table of a checkpoint or a loaded model.

    import wqk
    df = wqk.score("org/name")            # or a folder, pypi:<package>, a matrices .parquet
    df = wqk.score(model, device="cuda")  # a loaded transformers model

The same code path as `wqk score` (wqk.scoring.score), returned as a DataFrame instead
of written to Parquet. torch and pandas are imported on the first call, not by `import wqk`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import pandas as pd
    import torch
    from transformers import PreTrainedModel

#: What `score` takes: a source string or path (hub id ``org/name[@revision]``, local
#: folder, ``pypi:<package>``, matrices ``.parquet``) or a loaded transformers model.
SourceLike = Union[str, "os.PathLike[str]", "PreTrainedModel"]


def score(
    source: SourceLike,
    *,
    device: str | torch.device = "auto",
    name: str | None = None,
    synthetic: bool = False,
    n_std: float = 2.0,
    progress: bool = True,
    method: str = "exact",
    metrics: str | list[str] = "default",
    rotary_offsets: list[int] | None = None,
) -> pd.DataFrame:
    """Symmetry and directionality of every attention head and layer of a model.

    Args:
        source: a hub id ``"org/name[@revision]"`` (only the q/k bytes are fetched, cached
            under ``~/.cache/wqk``), a local folder (config.json + safetensors or
            pytorch_model.bin), ``"pypi:<package>"``, a matrices Parquet written by
            ``wqk extract``, or a loaded ``transformers`` model (a ``PreTrainedModel``:
            its ``config`` and ``state_dict()`` are read, nothing is copied).
        device: where the scores are computed: ``"auto"`` (CUDA when torch sees it),
            ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        name: the model name to record (default: the source as given; for a model in
            memory its ``config.name_or_path``, else its class name). Not for matrices
            files, which record their own.
        synthetic: mark the model as synthetic (random weights, not data).
        n_std: the threshold of the directionality score (mean + n_std std of the norms).
        progress: a progress bar, drawn only on a terminal and never with
            ``HF_HUB_DISABLE_PROGRESS_BARS=1`` (see ``wqk.progress``).
        method: ``"exact"`` (the correct scores), or ``"authors"``: what the paper
            authors' code computed, mistakes included (``wqk.authors``), to prove the
            paper's errata; not for matrices files. The DataFrame's ``attrs["method"]``
            records ``"authors"``.
        metrics: the metrics beyond the paper's two (``wqk.metric_registry``):
            ``"default"`` (every cheap one), ``"all"``, or names such as
            ``["spectra", "folded"]``; symmetry and directionality always.
        rotary_offsets: the position offsets of ``rotary_symmetry`` (default: 0 and the
            powers of two below the model's context).

    Returns:
        The scores table, one row per layer (``scope == "layer"``, ``head`` null) and per
        head, sorted by stack, layer, head; the columns of the scores Parquet
        (``wqk.contracts.SCORES_SCHEMA``), then those of the selected metrics (NaN where a
        block has none), ``head`` as nullable Int32. For a folder it
        holds the same numbers as ``wqk score FOLDER``.

    Raises:
        wqk.WqkError: a source that cannot be found or read, an unsupported model_type,
            a missing tensor; the message names the model, the file and the way out.
            Options that cannot go together (a matrices file with name or method
            "authors", an unknown metric) raise wqk.scoring.InvalidOption, a WqkError and
            a ValueError, before any work.
        TypeError: source is none of the above.
    """
    from .scoring import score as score_source

    scored = score_source(
        source,
        method=method,
        metrics=metrics,
        rotary_offsets=rotary_offsets,
        n_std=n_std,
        device=device,
        name=name,
        synthetic=synthetic,
        progress=progress,
    )
    from .score_table import to_frame

    return to_frame(scored.table)
