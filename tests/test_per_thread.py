"""wqk.per_thread: a batch of decompositions split over torch's threads gives each matrix's
one-thread result bit for bit, whatever the split, and leaves torch's thread count as it was."""

from __future__ import annotations

import pytest
import torch

from wqk.per_thread import per_thread


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _one_thread(fn, x):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(x)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("fn", [torch.linalg.eigvalsh, torch.linalg.eigh, torch.linalg.eig, torch.linalg.svdvals])
def test_each_matrix_gets_its_one_thread_bits(two_threads, fn, dtype):
    # complex Hermitian eigvalsh of 64 x 64 (wqk.fingerprint.cond_eig's): a worker left at MKL's own
    # thread count gave other last bits than one thread, and other ones from run to run
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 64, 64, generator=g, dtype=dtype)
    x = x @ x.mH if fn in (torch.linalg.eigvalsh, torch.linalg.eigh) else x
    got, want = per_thread(fn)(x), _one_thread(fn, x)
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert torch.equal(a, b)
    assert torch.get_num_threads() == 2


def test_a_failing_part_raises_after_every_part_is_done_and_the_threads_come_back(two_threads):
    x = torch.eye(3, dtype=torch.float64).repeat(4, 1, 1)
    x[3] = torch.nan  # LAPACK fails on this matrix only
    with pytest.raises(torch.linalg.LinAlgError):
        per_thread(torch.linalg.eigh)(x)
    assert torch.get_num_threads() == 2
    w = per_thread(torch.linalg.eigvalsh)(x[:3])  # and the pool still works
    assert torch.equal(w, torch.ones(3, 3, dtype=torch.float64))


def test_one_thread_or_one_matrix_is_a_plain_call():
    x = torch.randn(1, 5, 5, dtype=torch.float64)
    assert torch.equal(per_thread(torch.linalg.svdvals)(x), torch.linalg.svdvals(x))
