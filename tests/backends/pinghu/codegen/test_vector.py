"""Vectorized global accesses (LSU.*.GLOBAL.B128): emitted when the offsets' recipe
proves 4 (or 2) consecutive, aligned elements per group, taken at run time only when
the base is 16-byte aligned and the assumed strides and bounds are multiples of the
group; every other launch takes the scalar path, with the same results."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml


@mutile.jit
def scale(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    x = ml.load(X + offs, mask=m, other=-1.0)
    ml.store(Y + offs, x * 2.0, mask=m)


@mutile.jit
def shift2d(X, Y, M, N, sx, sy, BM: ml.constexpr, BN: ml.constexpr):
    rm = ml.program_id(0) * BM + ml.arange(0, BM)
    rn = ml.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    x = ml.load(X + rm[:, None] * sx + rn[None, :], mask=m, other=0.0)
    ml.store(Y + rm[:, None] * sy + rn[None, :], x + 1, mask=m)


def _listing(kernel, *args, **kw) -> str:
    return kernel.warmup(*args, backend="pinghu", grid=(1,), **kw).asm["musa"]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64])
def test_contiguous_1d_uses_128_bit_accesses(dtype):
    x = np.zeros(8, dtype)
    text = _listing(scale, x, x, 8, BLOCK=1024)
    assert "LSU.LD.GLOBAL.B128" in text and "LSU.ST.GLOBAL.B128" in text
    assert "LSU.LD.GLOBAL.B" + ("32" if x.itemsize == 4 else "64") in text  # the fallback


@pytest.mark.parametrize("n", [4096, 4000, 3999, 1])
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_1d_results_on_every_path(n, offset, dtype, rng):
    """Aligned, ragged-but-divisible, ragged and misaligned (a view one element in)."""
    base = (rng.standard_normal(n + 1) * 100).astype(dtype)
    x = base[offset:offset + n]
    y = np.full(n, -7, dtype) if dtype == np.int64 else np.full(n, np.nan, dtype)
    scale[(mutile.cdiv(n, 1024),)](x, y, n, BLOCK=1024, backend="pinghu")
    np.testing.assert_array_equal(y, x * 2)


@pytest.mark.parametrize("M,N,sx", [(64, 32, 40), (63, 30, 40), (64, 32, 41), (17, 32, 32)])
def test_2d_tiles_with_runtime_strides(M, N, sx, rng):
    x = rng.standard_normal((M, sx)).astype(np.float32)
    y = np.full((M, 36), np.nan, np.float32)
    shift2d[(mutile.cdiv(M, 32),)](x, y, M, N, sx, 36, BM=32, BN=32, backend="pinghu")
    np.testing.assert_array_equal(y[:, :N], x[:, :N] + 1)
    assert np.isnan(y[:, N:]).all()
    text = _listing(shift2d, x, y, M, N, sx, 36, BM=32, BN=32)
    assert "LSU.LD.GLOBAL.B128" in text and "LSU.ST.GLOBAL.B128" in text


def test_narrow_or_replicated_tiles_stay_scalar():
    x16 = np.zeros(8, np.float16)
    assert "B128" not in _listing(scale, x16, x16, 8, BLOCK=1024)    # 16-bit elements
    x = np.zeros(8, np.float32)
    assert "B128" not in _listing(scale, x, x, 8, BLOCK=256)         # 2 per thread


def test_vectorize_option_off():
    x = np.zeros(8, np.float32)
    assert "B128" not in _listing(scale, x, x, 8, BLOCK=1024, vectorize=False)
