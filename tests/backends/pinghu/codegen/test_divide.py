"""Integer division and remainder by a constant power of two lower to shifts and masks
(no ALU.IDIV / ALU.IREM) with C's truncating semantics (docs/semantics.md), on random
32-bit data including INT_MIN, INT_MAX, 0 and -1; the same kernels on llvm agree."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml


@mutile.jit
def divide(X, Q, R, D: ml.constexpr, N: ml.constexpr):
    offs = ml.arange(0, N)
    x = ml.load(X + offs)
    ml.store(Q + offs, x // D)
    ml.store(R + offs, x % D)


def _oracle(x, d):
    """C's quotient and remainder, exactly (Python ints)."""
    q = [abs(int(v)) // d * (1 if v >= 0 else -1) for v in x]
    return np.array(q, np.int64), x.astype(np.int64) - np.array(q, np.int64) * d


@pytest.mark.parametrize("dtype", [np.int32, np.uint32], ids=["i32", "u32"])
@pytest.mark.parametrize("d", [2, 8, 1024, 2 ** 30, 6])
def test_constant_divisors(backend, rng, dtype, d):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, 256, dtype=np.int64, endpoint=True).astype(dtype)
    x[:5] = [info.min, info.max, 0, 1, info.max - 1]
    if dtype == np.int32:
        x[5:8] = [-1, -d, -d - 1]
    q, r = (np.full(256, 0x5A5A, dtype) for _ in range(2))
    divide[(1,)](x, q, r, D=d, N=256, backend=backend)
    want_q, want_r = _oracle(x, d)
    np.testing.assert_array_equal(q.astype(np.int64), want_q)
    np.testing.assert_array_equal(r.astype(np.int64), want_r)
    if backend == "pinghu":
        text = divide.warmup(x, q, r, D=d, N=256, backend="pinghu", grid=(1,)).asm["musa"]
        power = d & (d - 1) == 0
        assert ("ALU.IDIV" in text) != power and ("ALU.IREM" in text) != power
