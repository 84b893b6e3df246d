"""Triton's tutorial 08 ("grouped GEMM") with the tutorial's ``@triton.autotune`` over
block sizes and ``NUM_SM`` (``key=['group_size']``, grid ``lambda META: (META['NUM_SM'],)``),
applied to the tutorial's kernel of ``test_compat_grouped_gemm.py``, run through
``mutile.as_triton()`` on both backends against float64 numpy (the tolerance is that
file's). The configs are cut to blocks that divide the test's shapes."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
from mutile import compat

from ..conftest import poison
from .test_compat_grouped_gemm import SHAPES, _check, _inputs, grouped_matmul_kernel


@pytest.fixture(scope="module")
def triton():
    module = mutile.as_triton()
    yield module
    compat.remove_triton()


def test_tutorial_08_grouped_gemm_autotuned(triton, rng, backend):
    tuned = triton.autotune(
        configs=[
            triton.Config({'BLOCK_SIZE_M': 16, 'BLOCK_SIZE_N': 16, 'BLOCK_SIZE_K': 16,
                           'NUM_SM': 4}),
            triton.Config({'BLOCK_SIZE_M': 16, 'BLOCK_SIZE_N': 16, 'BLOCK_SIZE_K': 16,
                           'NUM_SM': 2}),
            triton.Config({'BLOCK_SIZE_M': 16, 'BLOCK_SIZE_N': 16, 'BLOCK_SIZE_K': 16,
                           'NUM_SM': 8}),
        ],
        key=['group_size'],
    )(grouped_matmul_kernel)
    a_list, b_list = _inputs(rng)
    c_list = [poison((m, n), np.float16) for m, n, _ in SHAPES]
    sizes, lds = [], []
    for a, b, c in zip(a_list, b_list, c_list):
        (m, k), (_, n) = a.shape, b.shape
        sizes += [m, n, k]
        lds += [k, n, n]
    grid = lambda META: (META['NUM_SM'], )
    tuned[grid](mutile.AddressTable(a_list), mutile.AddressTable(b_list),
                mutile.AddressTable(c_list), np.array(sizes, np.int32),
                np.array(lds, np.int32), len(a_list), backend=backend)
    for c, a, b in zip(c_list, a_list, b_list):     # the real launch after the trials
        _check(c, a, b)
    d = tuned.tuning_log[-1]
    assert d.key[0] == 3 and len(d.timings) == 3 and not d.reasons
    assert tuned.best_config.kwargs["NUM_SM"] in (2, 4, 8)
