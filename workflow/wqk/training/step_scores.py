"""The scores of a saved step, computed in the training process from the model's own tensors
by the one scoring path (wqk.scoring), as `wqk score` would score that step's checkpoint."""

from __future__ import annotations

from pathlib import Path

from ..determinism import use_deterministic_algorithms
from .run_folder import checkpoint_dir, matrices_path, scores_path


def step_name(run_dir: Path, step: int) -> str:
    """The model name a step's scores record: RUN/checkpoints/step-NNNNNN, the path that
    `wqk score` records when run from the run folder's parent (wqk.training.summary reads
    the run and the step from it). Relative: the bytes do not depend on where RUN lies."""
    return f"{run_dir.name}/checkpoints/step-{step:06d}"


def score_step(model, run_dir: Path, step: int, device: str = "auto", matrices: bool = False) -> Path:
    """Score the model as it is at a saved step, in this process, by the scoring of
    `wqk score` (wqk.scoring.score: its state_dict through the in-memory store and the
    adapter of its model_type; the q/k matrices too when asked). Identity as `wqk score`
    gives the step's checkpoint, which must be written already: its name (step_name) and
    the hash of its model.safetensors. Writes scores_path (and matrices_path) atomically;
    returns the former."""
    import torch

    from ..checkpoints.provenance import hash_files
    from ..score_table import write_scores
    from ..scoring import score

    weights = checkpoint_dir(run_dir, step) / "model.safetensors"
    out = scores_path(run_dir, step)
    out.parent.mkdir(parents=True, exist_ok=True)
    m_out = matrices_path(run_dir, step) if matrices else None
    if m_out is not None:
        m_out.parent.mkdir(parents=True, exist_ok=True)
    # Training runs with deterministic algorithms required; the scorer's kernels are
    # deterministic (matmuls, sums), but a CUDA kernel torch cannot certify must not stop a
    # run at its first saved step: it only warns while scoring.
    strict = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    use_deterministic_algorithms(strict, warn_only=True)
    try:
        scored = score(
            model,
            name=step_name(run_dir, step),
            provenance=f"xxh3:{hash_files([weights])}",
            device=device,
            progress=False,
            matrices_out=m_out,
        )
    finally:
        use_deterministic_algorithms(strict, warn_only=warn_only)
    write_scores(scored.table, out)
    return out
