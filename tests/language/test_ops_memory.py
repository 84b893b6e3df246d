"""Memory: pointer tiles (gathers and scatters) with masks and ``other`` for several
dtypes, scalar loads and stores, ``ptr.dtype.element_ty``, pointer arithmetic beyond
2^31 (int64 element offsets, and int32 indices whose byte offsets exceed 2^31), strided
and negatively strided (non-contiguous) numpy views, inputs given through
``__array_interface__`` and ``__dlpack__``, and tensor descriptors."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import ArrayInterfaceOnly, DLPackOnly, assert_bits_equal, poison, random_data


# ---------------------------------------------------------------- masks and other
@mutile.jit
def gather_kernel(X, IDX, O, n, other, BLOCK: ml.constexpr):
    """O[i] = X[IDX[i]] where i < n and IDX[i] >= 0 (else ``other``), written for i < n;
    a scatter writes O[n + 64 + IDX[i]] = X[i] for the same mask."""
    offs = ml.arange(0, BLOCK)
    in_range = offs < n
    idx = ml.load(IDX + offs, mask=in_range, other=-1)
    m = in_range & (idx >= 0)
    v = ml.load(X + idx, mask=m, other=other)
    ml.store(O + offs, v, mask=in_range)
    ml.store(O + n + 64 + idx, ml.load(X + offs, mask=m), mask=m)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.float8_e4m3fn, np.int64,
                                   np.uint8], ids=lambda d: np.dtype(d).name)
def test_masked_gather_scatter(dtype, rng, backend):
    """Masked-off lanes are never read (their addresses point far outside X: a read would
    fault or bring garbage) and take ``other``; masked-off stores never write."""
    B, n = 128, 100
    x = random_data(dtype, B, rng, specials=False)
    idx = rng.permutation(B).astype(np.int32)
    idx[rng.random(B) < 0.3] = -(10 ** 6)          # masked: a far out-of-bounds address
    o = poison(n + 64 + B, dtype)
    other = 3
    gather_kernel[(1,)](x, idx, o, n, other, BLOCK=B, backend=backend)
    i = idx[:n]
    ok = i >= 0
    want = np.where(ok, x[np.where(ok, i, 0)], np.array(other).astype(dtype))
    assert_bits_equal(o[:n], want.astype(dtype), "gather")
    assert_bits_equal(o[n:n + 64], poison(64, dtype), "masked-off stores")
    scatter = poison(B, dtype)
    scatter[i[ok]] = x[:n][ok]
    assert_bits_equal(o[n + 64:], scatter, "scatter")


def test_masked_loads_never_touch_memory(backend):
    """With check_bounds=True, a masked-off lane pointing outside the array is fine."""
    x = np.arange(16, dtype=np.float32)
    idx = np.full(16, -(10 ** 6), np.int32)
    idx[:4] = [3, 1, 4, 1]
    o = poison(16 + 64 + 16, np.float32)
    gather_kernel[(1,)](x, idx, o, 16, 0.5, BLOCK=16, backend=backend, check_bounds=True)
    assert o[:4].tolist() == [3, 1, 4, 1] and (o[4:16] == 0.5).all()


# ---------------------------------------------------------------- scalars, element_ty
@mutile.jit
def scalar_kernel(X, O, F, k):
    a = ml.load(X + k)                       # a scalar load at a runtime offset
    b = ml.load(X)
    ml.store(O, a + b)                       # scalar stores
    ml.store(O + 1, a * b)
    ml.store(O + k, -a)
    f = (a + 0.5).to(F.dtype.element_ty)     # convert to the pointee type of F
    ml.static_assert(f.dtype == ml.float16)
    ml.static_assert(X.dtype.element_ty == ml.int32)
    ml.static_assert(F.dtype == ml.pointer_type(ml.float16))
    ml.store(F, f)
    ml.store(F + 1, a)                       # store converts int32 -> float16


def test_scalar_loads_stores_and_element_ty(backend):
    x = np.array([7, 11, 13, 17, 19], np.int32)
    o, f = poison(5, np.int32), poison(2, np.float16)
    scalar_kernel[(1,)](x, o, f, 3, backend=backend)
    assert o.tolist()[:2] == [24, 119] and o[3] == -17
    assert o[2] == o[4] == np.iinfo(np.int32).max                 # untouched
    assert f.tolist() == [17.5, 17.0]


# ---------------------------------------------------------------- large offsets
@mutile.jit
def far_kernel(B8, B32, far, idx, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    # int64 element offsets: far > 2^31 (an i64 argument)
    v = ml.load(B8 + far + offs)
    ml.store(B8 + (far + BLOCK) + offs, v + 1)
    # int32 element indices whose byte offsets exceed 2^31
    w = ml.load(B32 + idx + offs)
    ml.store(B32 + idx + BLOCK + offs, w * 2)
    big = offs.to(ml.int64) + far
    ml.store(B8 + big + 2 * BLOCK, (big - far).to(ml.int8))


def test_offsets_beyond_2_to_31(backend):
    """A 2.1 GB zero-filled buffer (pages are only allocated when touched): element
    offsets > 2^31 computed in int64, and f32 indices ~2^29 (byte offsets > 2^31), must
    reach the right addresses. check_bounds turns a wrong address into a DeviceFault."""
    nbytes = 2 ** 31 + 2 ** 20
    buf = np.zeros(nbytes, np.int8)
    f32 = buf.view(np.float32)
    far = 2 ** 31 + 1000
    idx = (2 ** 31 + 4096) // 4
    B = 16
    buf[far:far + B] = np.arange(B, dtype=np.int8) + 5
    f32[idx:idx + B] = np.arange(B, dtype=np.float32) + 0.5
    far_kernel[(1,)](buf, f32, far, idx, BLOCK=B, backend=backend, check_bounds=True)
    assert buf[far + B:far + 2 * B].tolist() == list(range(6, 6 + B))
    assert f32[idx + B:idx + 2 * B].tolist() == [2 * v + 1.0 for v in range(B)]
    assert buf[far + 2 * B:far + 3 * B].tolist() == list(range(B))
    assert not buf[:far].any()


# ---------------------------------------------------------------- strided inputs
@mutile.jit
def strided_copy(X, Y, rows, cols, sxr, sxc, syr, syc, BR: ml.constexpr, BC: ml.constexpr):
    r = ml.program_id(0) * BR + ml.arange(0, BR)
    c = ml.arange(0, BC)
    m = (r[:, None] < rows) & (c[None, :] < cols)
    x = ml.load(X + r[:, None] * sxr + c[None, :] * sxc, mask=m)
    ml.store(Y + r[:, None] * syr + c[None, :] * syc, x * 3, mask=m)


def elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def test_strided_views(rng, backend):
    """Non-contiguous views (every other row, every third column; a transposed view; a
    reversed view with negative strides) are passed by base address, the kernel taking
    their element strides; the output is itself a strided view of a poisoned buffer."""
    base = random_data(np.float32, (40, 90), rng, specials=False)
    views = [base[::2, 1::3], base.T[5:25, :30], base[::-1, ::-2]]
    for x in views:
        rows, cols = x.shape
        out_buf = poison((rows, 2 * cols + 3), np.float32)
        y = out_buf[:, 1::2][:, :cols]
        strided_copy[(mutile.cdiv(rows, 8),)](x, y, rows, cols, *elem_strides(x), *elem_strides(y),
                                              BR=8, BC=64, backend=backend)
        assert_bits_equal(y, x * np.float32(3), f"view with strides {x.strides}")
        assert np.isnan(out_buf[:, 0::2]).all(), "wrote between the output's elements"


# ---------------------------------------------------------------- __array_interface__, __dlpack__
def test_array_interface_and_dlpack_inputs(rng, backend):
    n = 300
    x = random_data(np.float32, n, rng, specials=False)
    y = poison(n, np.float32)
    for make in (ArrayInterfaceOnly, DLPackOnly):
        y[:] = np.nan
        strided_copy[(1,)](make(x), y, 1, n, 0, 1, 0, 1, BR=1, BC=512, backend=backend)
        assert_bits_equal(y, x * 3, make.__name__)
    out = poison(n, np.float32)
    strided_copy[(1,)](x, ArrayInterfaceOnly(out), 1, n, 0, 1, 0, 1, BR=1, BC=512,
                       backend=backend)
    assert_bits_equal(out, x * 3, "output through __array_interface__")


# ---------------------------------------------------------------- tensor descriptors
@mutile.jit
def desc_kernel(X, Y, Z, M, N, BM: ml.constexpr, BN: ml.constexpr):
    pm, pn = ml.program_id(0), ml.program_id(1)
    xd = ml.make_tensor_descriptor(X, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    yd = ml.make_tensor_descriptor(Y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    blk = xd.load([pm * BM, pn * BN])
    yd.store([pm * BM, pn * BN], blk + 1)
    # the whole block, as loaded, into Z (padded to whole blocks) through plain pointers
    r = pm * BM + ml.arange(0, BM)
    c = pn * BN + ml.arange(0, BN)
    ml.store(Z + r[:, None] * (ml.num_programs(1) * BN) + c[None, :], blk)


def test_tensor_descriptor_edges(rng, backend):
    """Blocks past the edge read 0 (Z, a padded copy of the loaded blocks, is 0 outside
    [M, N]) and their stores outside [M, N] are dropped (Y's tail stays poisoned)."""
    M, N, BM, BN = 37, 45, 16, 16
    xbuf = poison(M * N + 512, np.int32)
    xbuf[:M * N] = random_data(np.int32, M * N, rng)
    ybuf = poison(M * N + 512, np.int32)
    gm, gn = mutile.cdiv(M, BM), mutile.cdiv(N, BN)
    z = poison((gm * BM, gn * BN), np.int32)
    desc_kernel[(gm, gn)](xbuf, ybuf, z, M, N, BM=BM, BN=BN, backend=backend)
    want_z = np.zeros_like(z)
    want_z[:M, :N] = xbuf[:M * N].reshape(M, N)
    assert_bits_equal(z, want_z, "loaded blocks (0 outside the tensor)")
    assert_bits_equal(ybuf[:M * N], xbuf[:M * N] + np.int32(1), "in bounds")
    assert_bits_equal(ybuf[M * N:], poison(512, np.int32), "dropped stores")
