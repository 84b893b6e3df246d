"""Masked loads/stores whose mask is provably all-true at run time take an unmasked fast
path (``version_masks``, on by default): results must be identical with it on and off,
including offsets that wrap around int32 and masks that are partly or wholly false."""
import numpy as np
import pytest

import mutile
import mutile.language as ml

INT_MAX = 2 ** 31 - 1
N = 16


@mutile.jit
def masked_copy(x_ptr, y_ptr, base, bound, MODE: ml.constexpr, N: ml.constexpr):
    i = ml.arange(0, N)
    if MODE == 0:
        m = (base + i) < bound
    elif MODE == 1:
        m = bound > (base + i)
    elif MODE == 2:
        m = (base + i) >= bound
    elif MODE == 3:
        m = (base - i * 3) <= bound
    elif MODE == 4:
        m = ((base + i)[:, None] < bound) & (i[None, :] * 2 + base > bound - 100)
    elif MODE == 5:
        m = (base + i * base) < bound
    else:
        m = (bound + 0 * i) >= (base + 2 * i)
    if MODE == 4:
        v = ml.load(x_ptr + i[:, None] * N + i[None, :], mask=m, other=-7.0)
        ml.store(y_ptr + i[:, None] * N + i[None, :], v + 1.0, mask=m)
    else:
        v = ml.load(x_ptr + i, mask=m, other=-7.0)
        ml.store(y_ptr + i, v + 1.0, mask=m)


def expected_mask(base, bound, mode):
    i = np.arange(N, dtype=np.int64)

    def wrap(a):                       # int32 arithmetic wraps
        return ((a + 2 ** 31) % 2 ** 32) - 2 ** 31

    return {0: lambda: wrap(base + i) < bound,
            1: lambda: bound > wrap(base + i),
            2: lambda: wrap(base + i) >= bound,
            3: lambda: wrap(base - 3 * i) <= bound,
            4: lambda: (wrap(base + i)[:, None] < bound) & (wrap(2 * i[None, :] + base)
                                                           > wrap(bound - 100)),
            5: lambda: wrap(base + i * base) < bound,
            6: lambda: bound >= wrap(base + 2 * i)}[mode]()


CASES = [(0, 16), (0, 15), (0, 0), (5, 30), (-20, -5), (INT_MAX - 10, INT_MAX),
         (INT_MAX - 3, INT_MAX), (INT_MAX - 3, -2 ** 31 + 5), (-2 ** 31, -2 ** 31 + 3),
         (-2 ** 31 + 2, 0), (100, 50), (1, 2 ** 30), (2 ** 28, INT_MAX)]


@pytest.mark.parametrize("mode", range(7))
@pytest.mark.parametrize("versioned", [True, False])
def test_fast_path_matches_the_masked_path(mode, versioned):
    shape = (N, N) if mode == 4 else (N,)
    x = np.random.default_rng(mode).standard_normal(shape).astype(np.float32)
    for base, bound in CASES:
        y = np.full(shape, np.nan, np.float32)
        masked_copy[(1,)](x, y, base, bound, MODE=mode, N=N, backend="llvm",
                          version_masks=versioned)
        m = np.broadcast_to(expected_mask(base, bound, mode), shape)
        want = np.where(m, x + 1, np.nan).astype(np.float32)
        assert np.array_equal(y, want, equal_nan=True), (mode, base, bound)
