"""Batched decompositions (eig, eigvalsh, eigh, svdvals) split over the CPU's threads.

torch decomposes a batch of small matrices one after another: eig in one thread, eigvalsh and
eigh with MKL's threads sharing each small matrix, which gains little. Splitting the batch over
worker threads, each running torch at one thread, is about twice as fast on 2 cores
(benchmarks/bench_metrics.py), and each matrix is then decomposed by one thread whatever the
core count, so the bits do not depend on it (MKL's threaded eigvalsh, eigh and cholesky give
other bits at 1 and at 2 threads; per matrix at one thread, the split does not change them).

The workers run while torch is set to one thread: a worker running torch at more would leave
an OpenMP team behind it, and libgomp then throttles the spin-waits of every later parallel
region of the process (measured: eigvalsh of 32 matrices 256 x 256, 64 ms before, 750 ms after).
Each worker also sets its own count to one: torch keeps MKL's count per thread, and a worker that
never set it ran MKL at the machine's default, whose complex eigvalsh changed its last bits from
run to run (the quick start's cond_eig, tests/test_per_thread.py).
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import torch

_LOCK = threading.Lock()  # torch's thread count is the process's: one split at a time
_POOLS: dict[int, ThreadPoolExecutor] = {}


def per_thread(fn):
    """fn over a batch [B, ...] (its first argument; the rest passed as they are), its rows split
    over torch's threads on CPU; the results concatenated as fn's would be (a tensor or a tuple)."""

    @functools.wraps(fn)
    def split(x: torch.Tensor, *rest):
        threads = torch.get_num_threads()
        if x.device.type != "cpu" or threads < 2 or len(x) < 2:
            return fn(x, *rest)
        parts = x.tensor_split(min(threads, len(x)))
        with _LOCK:
            if len(parts) not in _POOLS:
                _POOLS[len(parts)] = ThreadPoolExecutor(len(parts), thread_name_prefix="wqk-linalg")
            torch.set_num_threads(1)
            try:
                futures = [_POOLS[len(parts)].submit(_at_one_thread, fn, part, *rest) for part in parts]
                wait(futures)  # every worker done before torch has its threads back, also when one raised
            finally:
                torch.set_num_threads(threads)
        results = [f.result() for f in futures]
        if isinstance(results[0], tuple):
            return tuple(torch.cat(r) for r in zip(*results, strict=True))
        return torch.cat(results)

    return split


def _at_one_thread(fn, *args):
    torch.set_num_threads(1)  # this worker's own MKL count (mkl_set_num_threads_local)
    return fn(*args)
