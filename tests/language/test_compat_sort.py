"""``ml.sort``, ``ml.topk``, ``ml.bitonic_merge``, ``ml.flip`` and ``ml.histogram``, as
Triton has them (issue 10, family 6): ascending and descending with many ties, NaNs
(last when ascending, first when descending) and signed zeros (sorting permutes, it
never duplicates an element), several dtypes and dims, top-k of k = 1..n in both
directions, flips of every dim, and a masked histogram whose values also fall outside
the bins. Random data against numpy, outputs poisoned, both backends.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import assert_bits_equal, marked, poison

M, N = 4, 16


@mutile.jit
def offsets2(R: ml.constexpr, S: ml.constexpr):
    return ml.arange(0, R)[:, None] * S + ml.arange(0, S)[None, :]


@mutile.jit
def sort_kernel(X, ASC, DESC, DIM0, MERGED, M: ml.constexpr, N: ml.constexpr):
    offs = offsets2(M, N)
    x = ml.load(X + offs)
    ml.store(ASC + offs, ml.sort(x))
    ml.store(DESC + offs, ml.sort(x, dim=1, descending=True))
    ml.store(DIM0 + offs, ml.sort(x, 0))
    halves = ml.sort(ml.reshape(x, [M, 2, N // 2]))      # each half of a row sorted...
    halves = ml.where(ml.arange(0, 2)[None, :, None] == 1, ml.flip(halves, 2), halves)
    bitonic = ml.reshape(halves, [M, N])                 # ...the second one reversed
    ml.store(MERGED + offs, ml.bitonic_merge(bitonic))


def _sorted_ref(x, axis=-1, descending=False):
    """numpy's sort (NaNs last) of the values in float64 (numpy's own sort of ml_dtypes
    arrays misplaces NaNs with ml_dtypes 0.4); descending: its reverse (NaNs first)."""
    s = np.sort(x.astype(np.float64), axis=axis)
    return np.flip(s, axis=axis) if descending else s


def _multiset(a):
    """The bit patterns of each row, sorted: equal for two rows holding the same elements."""
    u = np.dtype(f"u{a.dtype.itemsize}")
    return np.sort(np.ascontiguousarray(a).view(u), axis=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, ml_dtypes.bfloat16, np.uint8,
                                   np.bool_])
def test_sort_with_ties_nans_and_signed_zeros(dtype, rng, backend):
    x = rng.integers(-3, 4, (M, N)).astype(np.float32)          # many ties
    if dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
        x += rng.choice([0.0, 0.25], (M, N)).astype(np.float32)
        x[1, 3], x[1, 9], x[2, 0] = np.nan, np.nan, np.nan
        x[3, :4] = [0.0, -0.0, -0.0, 0.0]
    x = x.astype(dtype)
    asc, desc, dim0, merged = (poison((M, N), dtype) for _ in range(4))
    sort_kernel[(1,)](x, asc, desc, dim0, merged, M=M, N=N, backend=backend)
    for got, want, what in [(asc, _sorted_ref(x), "ascending"),
                            (desc, _sorted_ref(x, descending=True), "descending"),
                            (dim0, _sorted_ref(x, axis=0), "along dim 0"),
                            (merged, _sorted_ref(x), "bitonic_merge")]:
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        assert np.array_equal(g64, w64, equal_nan=True), f"{what}:\n{got}\nwant\n{want}"
    assert_bits_equal(_multiset(asc), _multiset(x), "ascending is a permutation of each row")
    assert_bits_equal(_multiset(desc), _multiset(x), "descending is a permutation")


@mutile.jit
def topk_kernel(X, TOP, LOW, K: ml.constexpr, M: ml.constexpr, N: ml.constexpr):
    x = ml.load(X + offsets2(M, N))
    ml.store(TOP + offsets2(M, K), ml.topk(x, K))
    ml.store(LOW + offsets2(M, K), ml.topk(x, K, descending=False))


@pytest.mark.parametrize("k", [1, 2, 4, 16])
def test_topk(k, rng, backend):
    x = rng.integers(-20, 20, (M, N)).astype(np.float32) * 0.5
    x[0, 5] = np.nan
    top, low = poison((M, k), np.float32), poison((M, k), np.float32)
    topk_kernel[(1,)](x, top, low, K=k, M=M, N=N, backend=backend)
    want_top = _sorted_ref(x, descending=True)[:, :k]
    want_low = _sorted_ref(x)[:, :k]
    assert np.array_equal(top, want_top, equal_nan=True), f"{top}\nwant\n{want_top}"
    assert np.array_equal(low, want_low, equal_nan=True), f"{low}\nwant\n{want_low}"


@mutile.jit
def flip_kernel(X, X3, F_LAST, F_0, F3_1, F3_NEG, M: ml.constexpr, N: ml.constexpr):
    offs = offsets2(M, N)
    x = ml.load(X + offs)
    ml.store(F_LAST + offs, ml.flip(x))
    ml.store(F_0 + offs, x.flip(0))
    i = ml.arange(0, 2)[:, None, None] * 32 + ml.arange(0, 4)[None, :, None] * 8
    o3 = i + ml.arange(0, 8)[None, None, :]
    x3 = ml.load(X3 + o3)
    ml.store(F3_1 + o3, ml.flip(x3, 1))
    ml.store(F3_NEG + o3, ml.flip(x3, -3))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, ml_dtypes.bfloat16, np.float64])
def test_flip(dtype, rng, backend):
    x = (rng.standard_normal((M, N)) * 50).astype(dtype)
    x3 = (rng.standard_normal((2, 4, 8)) * 50).astype(dtype)
    outs = [poison((M, N), dtype), poison((M, N), dtype), poison((2, 4, 8), dtype),
            poison((2, 4, 8), dtype)]
    flip_kernel[(1,)](x, x3, *outs, M=M, N=N, backend=backend)
    assert_bits_equal(outs[0], x[:, ::-1].copy(), "flip, last dim")
    assert_bits_equal(outs[1], x[::-1].copy(), "flip dim 0")
    assert_bits_equal(outs[2], x3[:, ::-1].copy(), "3-D, dim 1")
    assert_bits_equal(outs[3], x3[::-1].copy(), "3-D, dim -3")


@mutile.jit
def histogram_kernel(X, H, HM, n, BINS: ml.constexpr, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    ml.store(H + ml.arange(0, BINS), ml.histogram(x, BINS))
    ml.store(HM + ml.arange(0, BINS), x.histogram(BINS, mask=offs < n))


@pytest.mark.parametrize("bins,block,dtype", [(8, 64, np.int32), (32, 64, np.int64),
                                              (4, 64, np.uint8), (64, 256, np.int32)])
def test_histogram_with_mask(bins, block, dtype, rng, backend):
    """The last case's [bins, n] match tile is twice the budget: counted in halves."""
    n = block * 3 // 4 - 3
    lo = 0 if np.dtype(dtype).kind == "u" else -3
    x = rng.integers(lo, bins + 3, block).astype(dtype)        # some outside the bins
    h, hm = poison(bins, np.int32), poison(bins, np.int32)
    histogram_kernel[(1,)](x, h, hm, n, BINS=bins, BLOCK=block, backend=backend)
    want = np.array([(x == v).sum() for v in range(bins)], np.int32)
    want_m = np.array([(x[:n] == v).sum() for v in range(bins)], np.int32)
    assert_bits_equal(h, want, "histogram")
    assert_bits_equal(hm, want_m, "masked histogram")
    assert want.sum() < block, "some values must fall outside the bins"


# ---------------------------------------------------------------- errors
@mutile.jit
def err_topk_k(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.topk(x, 3)  # LINE-MARK: ml.topk
    ml.store(X + ml.arange(0, 4), y)


@mutile.jit
def err_topk_big(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.topk(x, 32)  # LINE-MARK: ml.topk
    ml.store(X + ml.arange(0, 16), y)


@mutile.jit
def err_hist_float(X):
    x = ml.load(X + ml.arange(0, 16))
    h = ml.histogram(x, 8)  # LINE-MARK: ml.histogram
    ml.store(X + ml.arange(0, 8), h.to(ml.float32))


@mutile.jit
def err_sort_dim(X):
    x = ml.load(X + ml.arange(0, 16))
    y = ml.sort(x, dim=1)  # LINE-MARK: ml.sort
    ml.store(X + ml.arange(0, 16), y)


@pytest.mark.parametrize("kernel,pattern", [
    (err_topk_k, r"topk's k must be a power of two, got 3"),
    (err_topk_big, r"topk: k must be a compile-time integer in \[1, 16\], got 32"),
    (err_hist_float, r"histogram needs a 1-D integer tile, got tile<16xf32>"),
    (err_sort_dim, r"sort: dim must be None or an integer in \[-1, 1\), got 1"),
])
def test_bad_arguments_point_at_the_call(kernel, pattern):
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, {"X": T.PointerType(T.f32)}, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "sorting.py" not in str(e) and "compose.py" not in str(e)
