"""MKL's vector math (VML), called once from one thread before any parallel use.

On CPU, torch computes sqrt, exp, log and the other functions of ATen/cpu/vml.h with MKL's
VML (`vmsSqrt(..., VML_HA)`), in chunks of 2048 elements over the intra-op threads. On a
2-core Intel Xeon with AMX (MKL 2024.2, torch 2.13.0), when a function's first call in a
process came from two threads at once, one thread's half now and then came out with about
12 bits of precision instead of the 24 of VML_HA: the squared row norms of a first layer
were right, their square roots 3e-4 off, and E_r of that half of the heads 1e-3 off (5 in 450
`wqk score` runs of MiniLM, 3 at once on 2 cores; 23 in 450 with more work between the
loads). Every later call was exact: the fault is in MKL's lazy set-up of each function,
which a first call from a single thread does alone. `prime` makes that call for every VML
function torch uses, in float32 and float64, on a tensor too small to be split
(benchmarks/bench_row_norms_stress.py: 0 in 450 runs with it).
"""

from __future__ import annotations

from functools import cache

# the functions ATen/cpu/vml.h hands to MKL (IMPLEMENT_VML_MKL)
FUNCTIONS = "acos asin atan cos erf erfc erfinv exp log log10 log2 sin sqrt tan tanh trunc".split()


@cache
def prime() -> None:
    """Call each of torch's VML functions once, on this thread only (8 elements: below ATen's
    2048-element grain, so no other thread takes part). Once per process."""
    import torch

    for dtype in (torch.float32, torch.float64):
        x = torch.full((8,), 0.5, dtype=dtype)
        for name in FUNCTIONS:
            getattr(torch, name)(x)
