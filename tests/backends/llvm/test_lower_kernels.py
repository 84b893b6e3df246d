"""Whole kernels: vector add and a tiled matmul (Triton tutorial shapes) vs numpy."""
from __future__ import annotations

import numpy as np
import pytest

from mutile.ir import types as T

from .conftest import poisoned
from .ir_kernels import matmul, matmul_args, vector_add


def test_vector_add(rng):
    k = vector_add().compile()
    n = 98_765
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = poisoned((n,), T.f32)
    k.run([x, y, out, n], (-(-n // 1024),))
    np.testing.assert_array_equal(out, x + y)


@pytest.fixture(scope="module")
def mm():
    return matmul(64, 64, 32).compile(check_bounds=True)


@pytest.mark.parametrize("MNK", [(256, 256, 256), (200, 120, 72)], ids=str)
def test_tiled_matmul(mm, MNK, rng):
    M, N, K = MNK
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = poisoned((M, N), T.f32)
    mm.run(matmul_args(A, B, C), (-(-M // 64), -(-N // 64)))
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_tiled_matmul_transposed_b(mm, rng):
    """B given as a transposed view: its rows are strided (gathers), columns contiguous."""
    A = rng.standard_normal((128, 64)).astype(np.float32)
    Bt = rng.standard_normal((96, 64)).astype(np.float32)
    C = poisoned((128, 96), T.f32)
    mm.run(matmul_args(A, Bt.T, C), (2, 2))
    np.testing.assert_allclose(C, A.astype(np.float64) @ Bt.T, rtol=1e-4, atol=1e-4)


def test_matmul_bf16_inputs(rng):
    import ml_dtypes
    k = matmul(32, 32, 32, t=T.bf16).compile()
    A = rng.standard_normal((64, 96)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((96, 64)).astype(ml_dtypes.bfloat16)
    C = poisoned((64, 64), T.f32)
    k.run(matmul_args(A, B, C), (2, 2))
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-4,
                               atol=1e-4)
