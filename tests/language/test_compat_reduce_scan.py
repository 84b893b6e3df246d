"""``ml.reduce`` and ``ml.associative_scan`` with a ``@jit`` combine function, as Triton
has them (issue 10, family 6): single tiles and tuples of tiles, every axis, keep_dims,
an argmax-like (value, index) pair with its tie-break, a non-commutative combine (2x2
integer matrix products, whose order any wrong tree would change), the linear
recurrence ``h = a * h + b`` that chunked-attention kernels scan, forward and reverse;
and the reverse ``cumsum``/``cumprod`` built on them. Random data against float64
numpy (exact where the combine is exact), outputs poisoned, both backends.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes

from ..conftest import assert_bits_equal, marked, poison

M, N = 4, 16


@mutile.jit
def add_fn(a, b):
    return a + b


@mutile.jit
def max_fn(a, b):
    return ml.maximum(a, b)


@mutile.jit
def first_argmax(v1, i1, v2, i2):
    take1 = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return ml.where(take1, v1, v2), ml.where(take1, i1, i2)


@mutile.jit
def last_argmin(v1, i1, v2, i2):
    take1 = (v1 < v2) | ((v1 == v2) & (i1 > i2))
    return ml.where(take1, v1, v2), ml.where(take1, i1, i2)


@mutile.jit
def matmul2(a0, a1, a2, a3, b0, b1, b2, b3):
    """(a0 a1; a2 a3) @ (b0 b1; b2 b3): associative, not commutative."""
    return a0 * b0 + a1 * b2, a0 * b1 + a1 * b3, a2 * b0 + a3 * b2, a2 * b1 + a3 * b3


@mutile.jit
def recurrence(a1, b1, a2, b2):
    """h -> a2 * (a1 * h + b1) + b2, as one (a, b) pair."""
    return a1 * a2, a2 * b1 + b2


@mutile.jit
def or_fn(a, b):
    return a | b


@mutile.jit
def offsets2(R: ml.constexpr, S: ml.constexpr):
    return ml.arange(0, R)[:, None] * S + ml.arange(0, S)[None, :]


# ---------------------------------------------------------------- reduce
@mutile.jit
def reduce_kernel(X, I, B, O_MAX1, O_SUM0, O_ALL, O_ARG, O_ARGV, O_ARGMIN, O_I8, O_OR,
                  M: ml.constexpr, N: ml.constexpr):
    offs = offsets2(M, N)
    x = ml.load(X + offs)
    ml.store(O_MAX1 + ml.arange(0, M), ml.reduce(x, 1, max_fn))
    ml.store(O_SUM0 + ml.arange(0, N)[None, :], ml.reduce(x, 0, add_fn, keep_dims=True))
    total = ml.reduce(x, None, add_fn, keep_dims=True)            # shape [1, 1]
    ml.store(O_ALL + ml.arange(0, 1)[:, None] + ml.arange(0, 1)[None, :], total)
    idx = ml.broadcast_to(ml.arange(0, N)[None, :], [M, N])
    v, i = ml.reduce((x, idx), 1, first_argmax)
    ml.store(O_ARG + ml.arange(0, M), i)
    ml.store(O_ARGV + ml.arange(0, M), v)
    _, i2 = ml.reduce((x, idx), axis=1, combine_fn=last_argmin)
    ml.store(O_ARGMIN + ml.arange(0, M), i2)
    small = ml.load(I + offs)                                    # int8: wraps in int8
    ml.store(O_I8 + ml.arange(0, N), small.reduce(0, add_fn))   # the tensor method
    flags = ml.load(B + offs) != 0
    ml.store(O_OR + ml.arange(0, M), ml.reduce(flags, 1, or_fn))


def test_reduce_with_combine_functions(rng, backend):
    x = (rng.integers(-4, 5, (M, N)) + rng.choice([0, 0.5], (M, N))).astype(np.float32)
    # (many ties; every sum exact in float32)
    i8 = rng.integers(-128, 128, (M, N)).astype(np.int8)
    flags = (rng.random((M, N)) < 0.1).astype(np.int32)
    flags[0] = 0
    mx, s0, tot = poison(M, np.float32), poison(N, np.float32), poison(1, np.float32)
    arg, argv, argmin = poison(M, np.int32), poison(M, np.float32), poison(M, np.int32)
    s8, anyf = poison(N, np.int8), poison(M, np.bool_)
    reduce_kernel[(1,)](x, i8, flags, mx, s0, tot, arg, argv, argmin, s8, anyf, M=M, N=N,
                        backend=backend)
    x64 = x.astype(np.float64)
    assert_bits_equal(mx, x.max(1), "reduce max axis 1")
    assert_bits_equal(s0, x64.sum(0).astype(np.float32), "sum axis 0, keep_dims")
    assert_bits_equal(tot, np.float32([x64.sum()]), "sum of all, keep_dims")
    assert_bits_equal(arg, x.argmax(1).astype(np.int32), "argmax, first of ties")
    assert_bits_equal(argv, x.max(1), "argmax's value")
    assert_bits_equal(argmin, (N - 1 - x[:, ::-1].argmin(1)).astype(np.int32),
                      "argmin, last of ties")
    assert_bits_equal(s8, i8.sum(0, dtype=np.int8), "int8 sum wraps in int8")
    assert_bits_equal(anyf, flags.any(1), "or of bools")


@mutile.jit
def matrix_reduce_kernel(A, O, L: ml.constexpr):
    r = ml.arange(0, L) * 4
    m = ml.reduce((ml.load(A + r), ml.load(A + r + 1), ml.load(A + r + 2), ml.load(A + r + 3)),
                  0, matmul2)
    for k in ml.static_range(4):
        ml.store(O + k, m[k])


UNIMODULAR = np.array([[[1, 1], [0, 1]], [[1, 0], [1, 1]], [[0, 1], [-1, 0]], [[1, -1], [0, 1]],
                       [[2, 1], [1, 1]], [[0, -1], [1, 0]]], np.int32)


def random_matrices(rng, n):
    """``n`` random 2x2 integer matrices of determinant +-1: their products never vanish,
    and almost never commute."""
    return UNIMODULAR[rng.integers(0, len(UNIMODULAR), n)]


def _chain(mats):
    out = np.eye(2, dtype=np.int64)
    for a in mats:
        out = out @ a
    return out


def test_reduce_keeps_the_order_of_a_non_commutative_combine(rng, backend):
    L = 16
    mats = random_matrices(rng, L)
    out = poison(4, np.int32)
    matrix_reduce_kernel[(1,)](mats.reshape(-1), out, L=L, backend=backend)
    want = _chain(mats.astype(np.int64)).reshape(-1).astype(np.int32)
    assert not np.array_equal(want, _chain(mats[::-1].astype(np.int64)).reshape(-1)), \
        "the data must tell the orders apart"
    assert_bits_equal(out, want, "product of 2x2 matrices in index order")


# ---------------------------------------------------------------- associative_scan
@mutile.jit
def scan_kernel(X, A, BB, O_CS0, O_CS1R, O_MAX, O_H, O_HR, O_CUMR, O_PRODR,
                M: ml.constexpr, N: ml.constexpr):
    offs = offsets2(M, N)
    x = ml.load(X + offs)
    ml.store(O_CS0 + offs, ml.associative_scan(x, 0, add_fn))
    ml.store(O_CS1R + offs, ml.associative_scan(x, 1, add_fn, reverse=True))
    ml.store(O_MAX + offs, x.associative_scan(-1, max_fn))
    a = ml.load(A + offs)
    b = ml.load(BB + offs)
    _, h = ml.associative_scan((a, b), 1, recurrence)
    ml.store(O_H + offs, h)
    _, hr = ml.associative_scan((a, b), 1, recurrence, reverse=True)
    ml.store(O_HR + offs, hr)
    xi = x.to(ml.int32)
    ml.store(O_CUMR + offs, ml.cumsum(xi, 1, reverse=True))
    ml.store(O_PRODR + offs, ml.cumprod(a, 0, reverse=True))


def test_associative_scan_forward_and_reverse(rng, backend):
    x = rng.integers(-50, 50, (M, N)).astype(np.float32)
    a = rng.uniform(0.5, 1.0, (M, N)).astype(np.float32)
    b = rng.standard_normal((M, N)).astype(np.float32)
    cs0, cs1r, run, h, hr, prodr = (poison((M, N), np.float32) for _ in range(6))
    cumr = poison((M, N), np.int32)
    scan_kernel[(1,)](x, a, b, cs0, cs1r, run, h, hr, cumr, prodr, M=M, N=N, backend=backend)
    x64, a64, b64 = (v.astype(np.float64) for v in (x, a, b))
    assert_bits_equal(cs0, np.cumsum(x64, 0).astype(np.float32), "cumsum axis 0")
    assert_bits_equal(cs1r, np.cumsum(x64[:, ::-1], 1)[:, ::-1].astype(np.float32),
                      "reverse cumsum axis 1")
    assert_bits_equal(run, np.maximum.accumulate(x, 1), "running max (axis -1)")
    want, want_r = np.zeros((M, N)), np.zeros((M, N))
    acc, acc_r = np.zeros(M), np.zeros(M)
    for j in range(N):                       # h_j = a_j h_(j-1) + b_j, and from the end
        acc = a64[:, j] * acc + b64[:, j]
        want[:, j] = acc
        acc_r = a64[:, N - 1 - j] * acc_r + b64[:, N - 1 - j]
        want_r[:, N - 1 - j] = acc_r
    np.testing.assert_allclose(h, want, rtol=2e-5, atol=1e-5, err_msg="recurrence")
    np.testing.assert_allclose(hr, want_r, rtol=2e-5, atol=1e-5, err_msg="reverse recurrence")
    xi = x.astype(np.int32)
    assert_bits_equal(cumr, np.cumsum(xi[:, ::-1], 1)[:, ::-1].astype(np.int32),
                      "cumsum(reverse=True)")
    np.testing.assert_allclose(prodr, np.cumprod(a64[::-1], 0)[::-1], rtol=1e-6,
                               err_msg="cumprod(reverse=True)")


@mutile.jit
def matrix_scan_kernel(A, O, OR, L: ml.constexpr):
    r = ml.arange(0, L) * 4
    parts = (ml.load(A + r), ml.load(A + r + 1), ml.load(A + r + 2), ml.load(A + r + 3))
    fwd = ml.associative_scan(parts, 0, matmul2)
    rev = ml.associative_scan(parts, 0, matmul2, reverse=True)
    for k in ml.static_range(4):
        ml.store(O + r + k, fwd[k])
        ml.store(OR + r + k, rev[k])


@pytest.mark.parametrize("L", [2, 8, 32])
def test_scan_of_a_non_commutative_combine(L, rng, backend):
    mats = random_matrices(rng, L)
    out, outr = poison(4 * L, np.int32), poison(4 * L, np.int32)
    matrix_scan_kernel[(1,)](mats.reshape(-1), out, outr, L=L, backend=backend)
    m64 = mats.astype(np.int64)
    want = np.stack([_chain(m64[:i + 1]) for i in range(L)]).reshape(-1).astype(np.int32)
    # reverse: the later elements are the left operand (Triton flips, scans, flips back)
    want_r = np.stack([_chain(m64[i:][::-1]) for i in range(L)]).reshape(-1).astype(np.int32)
    assert_bits_equal(out, want, "prefix products")
    assert_bits_equal(outr, want_r, "reverse prefix products")


# ---------------------------------------------------------------- errors
def plain_python(a, b):
    return a + b


@mutile.jit
def two_results(a, b):
    return a + b, a - b


@mutile.jit
def to_float(a, b):
    return (a + b).to(ml.float32)


@mutile.jit
def err_not_jit(X):
    x = ml.load(X + ml.arange(0, 16))
    s = ml.reduce(x, 0, plain_python)  # LINE-MARK: ml.reduce
    ml.store(X, s)


@mutile.jit
def err_count(X):
    x = ml.load(X + ml.arange(0, 16))
    s = ml.reduce(x, 0, two_results)  # LINE-MARK: ml.reduce
    ml.store(X, s)


@mutile.jit
def err_dtype(X):
    x = ml.load(X + ml.arange(0, 16)).to(ml.int32)
    s = ml.associative_scan(x, 0, to_float)  # LINE-MARK: ml.associative_scan
    ml.store(X + ml.arange(0, 16), s.to(ml.float32))


@mutile.jit
def err_axis(X):
    x = ml.load(X + ml.arange(0, 16))
    s = ml.associative_scan(x, 1, add_fn)  # LINE-MARK: ml.associative_scan
    ml.store(X + ml.arange(0, 16), s)


@mutile.jit
def err_shapes(X):
    x = ml.load(X + ml.arange(0, 16))
    v, i = ml.reduce((x, ml.arange(0, 8)), 0, first_argmax)  # LINE-MARK: ml.reduce
    ml.store(X, v)


@pytest.mark.parametrize("kernel,pattern", [
    (err_not_jit, r"reduce: combine_fn must be a @mutile.jit function"),
    (err_count, r"combine_fn two_results returned 2 values for 1 inputs"),
    (err_dtype, r"combine_fn to_float returned ml.float32 for input 0 of type ml.int32"),
    (err_axis, r"associative_scan: axis 1 out of range for shape \[16\]"),
    (err_shapes, r"reduce: every input must have one shape, got \[16\] and \[8\]"),
])
def test_bad_combines_point_at_the_call(kernel, pattern):
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, {"X": T.PointerType(T.f32)}, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "combine.py" not in str(e) and "semantic.py" not in str(e)
