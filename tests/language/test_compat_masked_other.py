"""Masked loads without ``other`` read zero in masked-off lanes, on both backends
(issue 10, family 11).

Triton leaves those lanes unspecified, but published kernels rely on zeros in
practice (an RMSNorm summing a row of which only ``n_cols`` are loaded), so mutile
defines them: all bits clear (0, +0.0, False). Checked for every dtype, for the three
shapes a load takes on the llvm backend (contiguous rows, a gather, a scalar), and on a
row reduction over a partly masked tile against float64 numpy.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import assert_bits_equal, poison, random_data

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, ml_dtypes.float8_e4m3fn,
          ml_dtypes.float8_e5m2, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64,
          np.bool_]
ROWS, N, BLOCK = 4, 23, 32          # each row loads N of BLOCK lanes


@mutile.jit
def masked_copies(X, O, S, n, BLOCK: ml.constexpr):
    """O[0]: contiguous masked row; O[1]: the same lanes gathered through a permutation;
    S: scalar masked loads, one taken and one not."""
    row = ml.program_id(0)
    cols = ml.arange(0, BLOCK)
    out = O + row * 2 * BLOCK
    ml.store(out + cols, ml.load(X + row * n + cols, mask=cols < n))
    perm = (cols * 5) % BLOCK                    # a non-contiguous pointer tile
    ml.store(out + BLOCK + cols, ml.load(X + row * n + perm, mask=perm < n))
    ml.store(S + row * 2, ml.load(X + row * n, mask=row >= 0))
    ml.store(S + row * 2 + 1, ml.load(X + row * n + 1, mask=row < 0))


def as_bits(a):
    return a.view(f"u{a.dtype.itemsize}") if a.dtype != np.bool_ else a.view(np.uint8)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_masked_off_lanes_read_zero(dtype, rng, backend):
    x = random_data(dtype, (ROWS, N), rng, specials=False)
    if np.dtype(dtype) == np.bool_:
        x[:] = True                                   # zero would be indistinguishable
    elif np.dtype(dtype).kind in "iu":
        x[x == 0] = 1
    o = poison((ROWS, 2, BLOCK), dtype)
    s = poison((ROWS, 2), dtype)
    masked_copies[(ROWS,)](x, o, s, N, BLOCK=BLOCK, backend=backend)
    zero = np.zeros((), dtype)
    want = np.zeros((ROWS, 2, BLOCK), dtype)
    want[:, 0, :N] = x
    perm = (np.arange(BLOCK) * 5) % BLOCK
    want[:, 1] = np.where(perm < N, x[:, np.minimum(perm, N - 1)], zero)
    assert_bits_equal(as_bits(o), as_bits(want), f"{np.dtype(dtype).name} tiles")
    want_s = np.stack([x[:, 0], np.full(ROWS, zero)], axis=1)
    assert_bits_equal(as_bits(s), as_bits(want_s), f"{np.dtype(dtype).name} scalars")


# ---------------------------------------------------------------- a reduction over the tail
@mutile.jit
def row_sums(X, O, n_cols, stride, BLOCK: ml.constexpr):
    """sum(x) and sum(x*x) of a row whose tail lanes are masked off, without ``other``."""
    row = ml.program_id(0)
    cols = ml.arange(0, BLOCK)
    x = ml.load(X + row * stride + cols, mask=cols < n_cols).to(ml.float32)
    ml.store(O + row * 2, ml.sum(x, axis=0))
    ml.store(O + row * 2 + 1, ml.sum(x * x, axis=0))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_sum_over_a_masked_tail(dtype, rng, backend):
    """96 of 128 columns: the padding of each row holds NaN, which must not be read."""
    rows, cols, block = 6, 96, 128
    buf = np.full((rows, block), np.nan, dtype)
    buf[:, :cols] = rng.standard_normal((rows, cols)).astype(dtype)
    o = poison((rows, 2), np.float32)
    row_sums[(rows,)](buf, o, cols, block, BLOCK=block, backend=backend)
    x64 = buf[:, :cols].astype(np.float64)
    want = np.stack([x64.sum(1), (x64 * x64).sum(1)], axis=1)
    assert np.isfinite(o).all()
    # float32 sums of 96 terms: |error| <= 96 * eps32 * sum|terms|
    bound = 96 * 2.0 ** -24 * np.stack([np.abs(x64).sum(1), (x64 * x64).sum(1)], axis=1)
    assert (np.abs(o - want) <= bound).all(), (o, want)
