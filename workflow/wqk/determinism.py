"""torch's deterministic-algorithms switch, without loading its compiler.

`torch.use_deterministic_algorithms` also sets the flag of torch's compiler
(`torch._inductor.config.deterministic`), and importing that config imports the compiler:
torch._inductor and torch._dynamo, 1.4 s of every training process's start on 2 cores. wqk never
compiles, so the flag is set in torch's core alone, unless the compiler is already loaded
(another library imported it), where the public call keeps both flags in step.
"""

from __future__ import annotations

import sys


def use_deterministic_algorithms(mode: bool, warn_only: bool = False) -> None:
    """torch.use_deterministic_algorithms(mode, warn_only=warn_only), the same for every eager op."""
    import torch

    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
