"""Reductions and scans: sum, max, min, argmax, argmin, xor_sum (axis 0, 1, None, with
and without keep_dims, ``max(..., return_indices=True)``, tensor methods), cumsum and
cumprod (axis 0 and 1), on 2-D tiles loaded with a ragged mask and ``other`` and on
1-D tiles, for float and integer dtypes, against numpy on the same padded data.

Every result goes to its own slot (one row of a poisoned (slots, BR*BC) buffer per
result type), flattened row-major; the rest of each slot must stay poisoned. The
input buffer holds NaN / garbage outside the masked region, so a read of a masked-off
element shows up.

Tolerances: integer results and max/min/argmax/argmin are exact (integers wrap); a
float sum or prefix sum of n terms is within (n - 1) * u * sum|x| (u = 2^-24 for f32
accumulation, which f16 sums use; 2^-53 for f64), a prefix sum likewise with u of its
type (cumsum keeps f16); a float prefix product of k factors is within k * u relative
(u of the input type, which cumprod keeps).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import assert_bits_equal, poison

BR, BC = 8, 16          # the tile
R, C = 6, 13            # the valid region (ragged)
STRIDE = 19             # row stride of the input buffer


@mutile.jit
def put(base, slot, v, BR: ml.constexpr, BC: ml.constexpr, CHECK: ml.constexpr = True):
    """Store ``v`` (scalar, 1-D or 2-D) flattened at the start of row ``slot`` of a
    (slots, BR * BC) buffer; its dtype must be the buffer's unless CHECK is false."""
    if CHECK:
        ml.static_assert(v.dtype == base.dtype.element_ty, "result dtype differs from the slot's")
    p = base + slot * (BR * BC)
    if len(v.shape) == 0:
        ml.store(p, v)
    elif len(v.shape) == 1:
        ml.store(p + ml.arange(0, v.shape[0]), v)
    else:
        ml.store(p + ml.arange(0, v.shape[0])[:, None] * v.shape[1]
                 + ml.arange(0, v.shape[1])[None, :], v)


@mutile.jit
def reduce_ops(X, n_rows, n_cols, stride, other, S, D, I, CS, BR: ml.constexpr,
               BC: ml.constexpr):
    rows = ml.arange(0, BR)
    cols = ml.arange(0, BC)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = ml.load(X + rows[:, None] * stride + cols[None, :], mask=mask, other=other)
    x1 = ml.load(X + cols, mask=cols < n_cols, other=other)       # 1-D: the first row
    is_int = X.dtype.element_ty.is_int()
    # sums (S), in the sum dtype
    put(S, 0, ml.sum(x, axis=0), BR, BC)
    put(S, 1, ml.sum(x, axis=1), BR, BC)
    put(S, 2, ml.sum(x), BR, BC)
    put(S, 3, ml.sum(x, axis=0, keep_dims=True), BR, BC)
    put(S, 4, ml.sum(x, axis=1, keep_dims=True), BR, BC)
    put(S, 5, ml.sum(x, axis=None, keep_dims=True), BR, BC)
    put(S, 6, ml.sum(x1, axis=0), BR, BC)
    put(S, 7, x.sum(axis=-1), BR, BC)
    # max / min (D), in the input dtype
    put(D, 0, ml.max(x, axis=0), BR, BC)
    put(D, 1, ml.max(x, axis=1, keep_dims=True), BR, BC)
    put(D, 2, ml.max(x), BR, BC)
    put(D, 3, ml.min(x, axis=0, keep_dims=True), BR, BC)
    put(D, 4, ml.min(x, axis=1), BR, BC)
    put(D, 5, ml.min(x, axis=None, keep_dims=True), BR, BC)
    put(D, 6, ml.max(x1, axis=0), BR, BC)
    put(D, 7, x1.min(), BR, BC)
    vmax, imax = ml.max(x, axis=1, return_indices=True)
    put(D, 8, vmax, BR, BC)
    vmin, imin = ml.min(x, axis=0, return_indices=True)
    put(D, 9, vmin, BR, BC)
    # argmax / argmin (I), int32
    put(I, 0, ml.argmax(x, axis=0), BR, BC)
    put(I, 1, ml.argmax(x, axis=1), BR, BC)
    put(I, 2, ml.argmin(x, axis=0, keep_dims=True), BR, BC)
    put(I, 3, ml.argmin(x, axis=1, keep_dims=True), BR, BC)
    put(I, 4, ml.argmax(x1, axis=0), BR, BC)
    put(I, 5, x1.argmin(axis=0), BR, BC)
    put(I, 6, imax, BR, BC)
    put(I, 7, imin, BR, BC)
    # scans: cumsum (CS: the cumsum dtype; not checked, see test_cumsum_dtype), cumprod (D)
    put(CS, 0, ml.cumsum(x, axis=0), BR, BC, False)
    put(CS, 1, ml.cumsum(x, axis=1), BR, BC, False)
    put(CS, 2, x1.cumsum(0), BR, BC, False)
    put(D, 10, ml.cumprod(x, axis=0), BR, BC)
    put(D, 11, x.cumprod(axis=1), BR, BC)
    put(D, 12, ml.cumprod(x1, axis=0), BR, BC)
    if is_int:
        put(D, 13, ml.xor_sum(x, axis=0), BR, BC)
        put(D, 14, ml.xor_sum(x, axis=1, keep_dims=True), BR, BC)
        put(D, 15, ml.xor_sum(x), BR, BC)
        put(D, 16, x1.xor_sum(axis=0), BR, BC)


def sum_dtype(d):
    d = np.dtype(d)
    if d.kind == "i" and d.itemsize < 4:
        return np.dtype(np.int32)
    if d.kind == "u" and d.itemsize < 4:
        return np.dtype(np.uint32)
    if d.kind == "f" or d == ml_dtypes.bfloat16:
        return np.dtype(np.float64) if d == np.float64 else np.dtype(np.float32)
    return d


def cumsum_dtype(d):
    d = np.dtype(d)
    return np.dtype(np.int32) if d.kind in "iu" and d.itemsize < 4 else d


DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32, np.uint64]


def make_input(dtype, rng):
    """The input buffer: random values in the valid region, NaN (floats) or the dtype's
    maximum (integers, which would win every max) outside it."""
    d = np.dtype(dtype)
    buf = poison((BR + 2, STRIDE), dtype)
    if d.kind in "iu":
        info = np.iinfo(d)
        vals = rng.integers(max(info.min, -100), min(info.max, 100) + 1, (R, C))
        vals[0, :4] = [info.min, info.max, 0, 7] if info.min < 0 else [0, 100, 0, 7]
        vals[1, :3] = 0x7F if info.bits > 8 else 3    # ties for argmax / argmin
        buf[:R, :C] = vals.astype(d)
        other = 5
    else:
        vals = rng.uniform(0.5, 2.0, (R, C)) * rng.choice([-1.0, 1.0], (R, C))
        buf[:R, :C] = vals.astype(d)
        buf[1, :3] = 1.75                              # ties
        other = 1.25
    return buf, other


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reductions_and_scans(dtype, rng, backend):
    d = np.dtype(dtype)
    is_int = d.kind in "iu"
    buf, other = make_input(dtype, rng)
    sd, csd = sum_dtype(d), cumsum_dtype(d)
    S, D = poison((8, BR * BC), sd), poison((17, BR * BC), d)
    I, CS = poison((8, BR * BC), np.int32), poison((3, BR * BC), csd)
    reduce_ops[(1,)](buf, R, C, STRIDE, other, S, D, I, CS, BR=BR, BC=BC, backend=backend)

    xp = np.full((BR, BC), other).astype(d)            # the tile the kernel loaded
    xp[:R, :C] = buf[:R, :C]
    x1 = xp[0]

    def slot(buf_, k, want, what, tol=None):
        want = np.asarray(want)
        n = want.size
        got = buf_[k, :n].reshape(want.shape)
        if tol is None:
            assert_bits_equal(got, want.astype(buf_.dtype), what)
        else:
            err = np.abs(got.astype(np.float64) - want.astype(np.float64))
            assert (err <= tol).all(), f"{what}: err {err.max():.3g} > {np.max(tol):.3g}"
        rest = buf_[k, n:]
        assert_bits_equal(rest, poison(rest.shape, buf_.dtype), f"{what}: wrote past the result")

    w = xp.astype(np.float64) if not is_int else xp.astype(object)
    u = 2.0 ** -53 if d == np.float64 else 2.0 ** -24

    def sum_tol(a, axis, keepdims=False):
        if is_int:
            return None
        n = a.size if axis is None else a.shape[axis]
        return (n - 1) * u * np.abs(a).sum(axis=axis, keepdims=keepdims) + 1e-300

    def wrapped(v, t):
        """Python-int results wrapped to integer type ``t`` (floats pass through)."""
        if not is_int:
            return v
        bits = np.dtype(t).itemsize * 8
        signed = np.dtype(t).kind == "i"
        f = np.vectorize(lambda z: (int(z) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
                         if signed else int(z) % (1 << bits), otypes=[object])
        return np.asarray(f(np.asarray(v, dtype=object)), dtype=object).astype(t)

    def sums(a, axis, keep=False):
        return wrapped(a.sum(axis=axis, keepdims=keep), sd)

    slot(S, 0, sums(w, 0), "sum axis 0", sum_tol(w, 0))
    slot(S, 1, sums(w, 1), "sum axis 1", sum_tol(w, 1))
    slot(S, 2, sums(w, None), "sum", sum_tol(w, None))
    slot(S, 3, sums(w, 0, True), "sum axis 0 keep", sum_tol(w, 0, True))
    slot(S, 4, sums(w, 1, True), "sum axis 1 keep", sum_tol(w, 1, True))
    slot(S, 5, sums(w, None, True), "sum keep", sum_tol(w, None, True))
    slot(S, 6, sums(w[0], 0), "sum 1-D", sum_tol(w[0], 0))
    slot(S, 7, sums(w, 1), "x.sum(axis=-1)", sum_tol(w, 1))
    slot(D, 0, xp.max(0), "max axis 0")
    slot(D, 1, xp.max(1, keepdims=True), "max axis 1 keep")
    slot(D, 2, xp.max(), "max")
    slot(D, 3, xp.min(0, keepdims=True), "min axis 0 keep")
    slot(D, 4, xp.min(1), "min axis 1")
    slot(D, 5, xp.min(keepdims=True).reshape(1, 1), "min keep")
    slot(D, 6, x1.max(), "max 1-D")
    slot(D, 7, x1.min(), "min 1-D")
    slot(D, 8, xp.max(1), "max(return_indices) values")
    slot(D, 9, xp.min(0), "min(return_indices) values")
    slot(I, 0, xp.argmax(0), "argmax axis 0")
    slot(I, 1, xp.argmax(1), "argmax axis 1")
    slot(I, 2, xp.argmin(0)[None, :], "argmin axis 0 keep")
    slot(I, 3, xp.argmin(1)[:, None], "argmin axis 1 keep")
    slot(I, 4, x1.argmax(), "argmax 1-D")
    slot(I, 5, x1.argmin(), "argmin 1-D")
    slot(I, 6, xp.argmax(1), "max(return_indices) indices")
    slot(I, 7, xp.argmin(0), "min(return_indices) indices")
    for k, (a, axis) in enumerate([(w, 0), (w, 1), (w[0], 0)]):
        want = np.cumsum(a, axis=axis)
        tol = None
        if not is_int:   # f16 scans in f16
            uc = 2.0 ** -(ml_dtypes.finfo(csd).nmant + 1)
            tol = (a.shape[axis] - 1) * uc * np.cumsum(np.abs(a), axis=axis) + 1e-300
        slot(CS, k, wrapped(want, csd), f"cumsum #{k}", tol)
    for k, (a, axis) in enumerate([(w, 0), (w, 1), (w[0], 0)]):
        want = np.cumprod(a, axis=axis)
        if is_int:
            slot(D, 10 + k, wrapped(want, d), f"cumprod #{k}")
        else:
            ud = 2.0 ** -(ml_dtypes.finfo(d).nmant + 1)
            tol = a.shape[axis] * ud * np.abs(want) * 1.01 + 1e-300
            slot(D, 10 + k, want, f"cumprod #{k}", tol)
    if is_int:
        xi = xp.astype(np.uint64) if d.kind == "u" else xp.astype(np.int64)
        slot(D, 13, np.bitwise_xor.reduce(xi, 0).astype(d), "xor_sum axis 0")
        slot(D, 14, np.bitwise_xor.reduce(xi, 1)[:, None].astype(d), "xor_sum axis 1 keep")
        slot(D, 15, np.bitwise_xor.reduce(xi.ravel()).astype(d), "xor_sum")
        slot(D, 16, np.bitwise_xor.reduce(xi[0]).astype(d), "xor_sum 1-D")
    else:
        assert np.isnan(D[13:].astype(np.float64)).all()


@mutile.jit
def cumsum_dtype_kernel(X, O, EXPECT: ml.constexpr, BLOCK: ml.constexpr):
    r = ml.cumsum(ml.load(X + ml.arange(0, BLOCK)), axis=0)
    ml.static_assert(r.dtype == EXPECT, "cumsum dtype")
    s = ml.sum(ml.load(X + ml.arange(0, BLOCK)), axis=0)
    ml.static_assert(s.dtype == EXPECT, "sum dtype")
    ml.store(O + ml.arange(0, BLOCK), r)


@pytest.mark.parametrize("dtype,expect", [(np.int8, ml.int32), (np.int16, ml.int32)],
                         ids=["int8", "int16"])
def test_cumsum_dtype(dtype, expect, backend):
    """cumsum, like sum, accumulates narrow integers in 32 bits of the same signedness."""
    x = np.arange(16).astype(dtype)
    o = poison(16, np.int32)
    cumsum_dtype_kernel[(1,)](x, o, EXPECT=expect, BLOCK=16, backend=backend)
    assert_bits_equal(o, np.cumsum(np.arange(16)).astype(np.int32), "cumsum")


def test_cumsum_unsigned_dtype(backend):
    x = np.arange(16).astype(np.uint8)
    o = poison(16, np.uint32)
    cumsum_dtype_kernel[(1,)](x, o, EXPECT=ml.uint32, BLOCK=16, backend=backend)
    assert_bits_equal(o, np.cumsum(np.arange(16)).astype(np.uint32), "cumsum")


@mutile.jit
def xor_sum_kernel(X, O, BLOCK: ml.constexpr):
    ml.store(O, ml.xor_sum(ml.load(X + ml.arange(0, BLOCK)), axis=0))


def test_xor_sum_of_floats_is_a_compile_error(backend):
    x = np.ones(16, np.float32)
    with pytest.raises(mutile.CompilationError, match="integer"):
        xor_sum_kernel[(1,)](x, poison(1, np.float32), BLOCK=16, backend=backend)
