"""``ml.softmax``, batched (3-D and 4-D) ``ml.dot`` and ``ml.dot_scaled`` with the OCP
microscaling formats (issue 10, family 6).

The MX reference below decodes the formats from the OCP MX v1.0 spec on its own (sign,
exponent and mantissa fields; e8m0 scale ``2**(s-127)``, 0xFF NaN) in float64, so it
shares no code with mutile's decoder. Batched dots must equal the 2-D dot of each batch
bit for bit, and float64 numpy within float32's rounding. Outputs poisoned, both
backends.
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

from ..conftest import assert_bits_equal, marked, poison, tile_offsets


# ---------------------------------------------------------------- softmax
@mutile.jit
def softmax_kernel(X, D0, D1, DN, M: ml.constexpr, N: ml.constexpr):
    offs = tile_offsets(M, N, 1, 2)
    x = ml.load(X + offs)
    y0 = ml.softmax(x)                        # Triton's default: dim 0
    ml.static_assert(y0.dtype == ml.float32, "softmax computes in float32")
    ml.store(D0 + offs, y0)
    ml.store(D1 + offs, ml.softmax(x, 1, keep_dims=True))
    ml.store(DN + offs, x.softmax(dim=-1, ieee_rounding=True))


def _softmax(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softmax(dtype, rng, backend):
    M, N = 8, 16
    x = (rng.standard_normal((M, N)) * 4).astype(dtype)
    x[2, 5], x[6, 0] = -np.inf, -np.inf                 # masked-out scores
    d0, d1, dn = (poison((M, N), np.float32) for _ in range(3))
    softmax_kernel[(1,)](x, d0, d1, dn, M=M, N=N, backend=backend)
    np.testing.assert_allclose(d0, _softmax(x, 0), rtol=2e-6, atol=1e-7, err_msg="dim 0")
    np.testing.assert_allclose(d1, _softmax(x, 1), rtol=2e-6, atol=1e-7, err_msg="dim 1")
    np.testing.assert_allclose(dn, _softmax(x, 1), rtol=2e-6, atol=1e-7, err_msg="dim -1")
    assert d1[2, 5] == 0 and d0[6, 0] == 0


# ---------------------------------------------------------------- batched dot
@mutile.jit
def batched_dot_kernel(A, B, ACC, C, C2, BT: ml.constexpr, M: ml.constexpr, K: ml.constexpr,
                       N: ml.constexpr, PREC: ml.constexpr):
    a = ml.load(A + tile_offsets(BT, M, K, 3))
    b = ml.load(B + tile_offsets(BT, K, N, 3))
    acc = ml.load(ACC + tile_offsets(BT, M, N, 3))
    ml.store(C + tile_offsets(BT, M, N, 3), ml.dot(a, b, acc, input_precision=PREC))
    for i in ml.static_range(BT):             # the same products, one 2-D dot per batch
        a2 = ml.load(A + i * M * K + tile_offsets(M, K, 1, 2))
        b2 = ml.load(B + i * K * N + tile_offsets(K, N, 1, 2))
        acc2 = ml.load(ACC + i * M * N + tile_offsets(M, N, 1, 2))
        ml.store(C2 + i * M * N + tile_offsets(M, N, 1, 2), ml.dot(a2, b2, acc2, input_precision=PREC))


@pytest.mark.parametrize("dtype,acc_dtype,prec", [(np.float32, np.float32, "ieee"),
                                                  (np.float32, np.float32, "tf32"),
                                                  (np.float16, np.float32, "ieee"),
                                                  (np.int8, np.int32, "ieee")])
def test_batched_dot_is_a_dot_per_batch(dtype, acc_dtype, prec, rng, backend):
    BT, M, K, N = 2, 16, 16, 8
    if np.dtype(dtype).kind == "i":
        a = rng.integers(-128, 128, (BT, M, K)).astype(dtype)
        b = rng.integers(-128, 128, (BT, K, N)).astype(dtype)
        acc = rng.integers(-1000, 1000, (BT, M, N)).astype(acc_dtype)
    else:
        a = rng.standard_normal((BT, M, K)).astype(dtype)
        b = rng.standard_normal((BT, K, N)).astype(dtype)
        acc = rng.standard_normal((BT, M, N)).astype(acc_dtype)
    c, c2 = poison((BT, M, N), acc_dtype), poison((BT, M, N), acc_dtype)
    batched_dot_kernel[(1,)](a, b, acc, c, c2, BT=BT, M=M, K=K, N=N, PREC=prec,
                             backend=backend)
    assert_bits_equal(c, c2, "batched dot vs the 2-D dot of each batch")
    want = a.astype(np.float64) @ b.astype(np.float64) + acc
    if np.dtype(dtype).kind == "i":
        assert_bits_equal(c, want.astype(acc_dtype), "int8 batched dot")
    else:
        tol = (2e-3 if prec == "tf32" else 1e-5) * (np.abs(a.astype(np.float64))
                                                     @ np.abs(b.astype(np.float64)) + 1)
        assert np.all(np.abs(c - want) <= tol), np.abs(c - want).max()


@mutile.jit
def dot4_kernel(A, B, C):
    i = ml.arange(0, 2)[:, None, None, None] * 128 + ml.arange(0, 2)[None, :, None, None] * 64
    a = ml.load(A + i + ml.arange(0, 8)[None, None, :, None] * 8
                + ml.arange(0, 8)[None, None, None, :])
    b = ml.load(B + i + ml.arange(0, 8)[None, None, :, None] * 8
                + ml.arange(0, 8)[None, None, None, :])
    c = ml.dot(a, b, input_precision="ieee")
    ml.store(C + i + ml.arange(0, 8)[None, None, :, None] * 8
             + ml.arange(0, 8)[None, None, None, :], c)


def test_dot_with_two_batch_dims(rng, backend):
    a = rng.standard_normal((2, 2, 8, 8)).astype(np.float32)
    b = rng.standard_normal((2, 2, 8, 8)).astype(np.float32)
    c = poison((2, 2, 8, 8), np.float32)
    dot4_kernel[(1,)](a, b, c, backend=backend)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(c - want) <= 1e-5 * (np.abs(a) @ np.abs(b) + 1))


# ---------------------------------------------------------------- dot_scaled
_LAYOUT = {"e2m1": (2, 1, 1), "e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}   # exp, man, bias


def decode_mx(codes, fmt):
    """float64 of OCP MX element codes (ints), from the spec's field layout."""
    eb, mb, bias = _LAYOUT[fmt]
    codes = codes.astype(np.int64)
    sign = np.where((codes >> (eb + mb)) & 1, -1.0, 1.0)
    e = (codes >> mb) & ((1 << eb) - 1)
    m = codes & ((1 << mb) - 1)
    mag = np.where(e == 0, 2.0 ** (1 - bias) * m / 2 ** mb,
                   2.0 ** (e - bias) * (1 + m / 2 ** mb))
    if fmt == "e5m2":
        mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
    if fmt == "e4m3":
        mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return sign * mag


def decode_e8m0(s):
    return np.where(s == 255, np.nan, 2.0 ** (s.astype(np.float64) - 127))


def random_codes(fmt, shape, rng):
    """Finite codes of ``fmt`` (NaN and infinity left out)."""
    if fmt == "e2m1":
        return rng.integers(0, 16, shape)
    c = rng.integers(0, 256, shape)
    bad = (c & 0x7F) == 0x7F if fmt == "e4m3" else (c & 0x7C) == 0x7C
    return np.where(bad, c & 0x3F, c)


def operand(fmt, codes, axis, as_bits):
    """What a kernel is given for logical codes ``codes``: e2m1 packed two per byte along
    ``axis`` (low nibble first), fp8 as its dtype or uint8 bits, bf16 as bfloat16."""
    if fmt == "e2m1":
        c = np.moveaxis(codes, axis, -1)
        packed = (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)
        return np.ascontiguousarray(np.moveaxis(packed, -1, axis))
    if fmt == "bf16":
        return codes
    bits = codes.astype(np.uint8)
    return bits if as_bits else bits.view(ml_dtypes.float8_e4m3fn if fmt == "e4m3"
                                          else ml_dtypes.float8_e5m2)


@mutile.jit
def dot_scaled_kernel(A, SA, B, SB, ACC, C, M: ml.constexpr, N: ml.constexpr, K: ml.constexpr,
                      AR: ml.constexpr, AC: ml.constexpr, BR: ml.constexpr, BC: ml.constexpr,
                      FA: ml.constexpr, FB: ml.constexpr, A_KPACK: ml.constexpr,
                      B_KPACK: ml.constexpr, SCALE_A: ml.constexpr, USE_ACC: ml.constexpr):
    a = ml.load(A + tile_offsets(AR, AC, 1, 2))
    b = ml.load(B + tile_offsets(BR, BC, 1, 2))
    sa = ml.load(SA + tile_offsets(M, K // 32, 1, 2)) if SCALE_A else None
    sb = ml.load(SB + tile_offsets(N, K // 32, 1, 2))
    acc = ml.load(ACC + tile_offsets(M, N, 1, 2)) if USE_ACC else None
    c = ml.dot_scaled(a, sa, FA, b, sb, FB, acc, lhs_k_pack=A_KPACK, rhs_k_pack=B_KPACK)
    ml.store(C + tile_offsets(M, N, 1, 2), c)


CASES = [  # lhs format, rhs format, lhs_k_pack, rhs_k_pack, lhs scaled, accumulate
    ("e2m1", "e2m1", True, True, True, False),
    ("e4m3", "e5m2", True, True, True, True),
    ("e5m2", "e4m3", True, True, True, False),
    ("e2m1", "e4m3", False, True, True, False),
    ("e4m3", "e2m1", True, False, True, True),
    ("bf16", "e2m1", True, True, False, False),
]


@pytest.mark.parametrize("fa,fb,akp,bkp,scale_a,use_acc", CASES)
def test_dot_scaled(fa, fb, akp, bkp, scale_a, use_acc, rng, backend):
    M, N, K = 16, 16, 64
    if fa == "bf16":
        a_val = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
        a_in, av = a_val, a_val.astype(np.float64)
    else:
        ca = random_codes(fa, (M, K), rng)
        a_in, av = operand(fa, ca, 1 if akp else 0, False), decode_mx(ca, fa)
    cb = random_codes(fb, (K, N), rng)
    b_in, bv = operand(fb, cb, 0 if bkp else 1, True), decode_mx(cb, fb)
    sa = rng.integers(121, 134, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(121, 134, (N, K // 32)).astype(np.uint8)
    if scale_a:
        av = av * np.repeat(decode_e8m0(sa), 32, axis=1)
    bv = bv * np.repeat(decode_e8m0(sb), 32, axis=1).T
    acc = rng.standard_normal((M, N)).astype(np.float32)
    c = poison((M, N), np.float32)
    dot_scaled_kernel[(1,)](a_in, sa, b_in, sb, acc, c, M=M, N=N, K=K, AR=a_in.shape[0],
                            AC=a_in.shape[1], BR=b_in.shape[0], BC=b_in.shape[1], FA=fa, FB=fb,
                            A_KPACK=akp, B_KPACK=bkp, SCALE_A=scale_a, USE_ACC=use_acc,
                            backend=backend)
    want = av @ bv + (acc if use_acc else 0)
    bound = 4e-6 * (np.abs(av) @ np.abs(bv) + 1)
    assert np.all(np.abs(c - want) <= bound), (np.abs(c - want) / bound).max()


@mutile.jit
def nan_scale_kernel(A, SA, B, SB, C):
    a = ml.load(A + tile_offsets(4, 64, 1, 2))
    b = ml.load(B + tile_offsets(64, 4, 1, 2))
    c = ml.dot_scaled(a, ml.load(SA + tile_offsets(4, 2, 1, 2)), "e4m3", b, ml.load(SB + tile_offsets(4, 2, 1, 2)),
                      "e4m3")
    ml.store(C + tile_offsets(4, 4, 1, 2), c)


def test_the_nan_scale_makes_nan(rng, backend):
    a = random_codes("e4m3", (4, 64), rng).astype(np.uint8)
    b = random_codes("e4m3", (64, 4), rng).astype(np.uint8)
    sa = np.full((4, 2), 127, np.uint8)
    sb = np.full((4, 2), 127, np.uint8)
    sa[1, 1] = 255                                   # row 1 of lhs has a NaN scale
    c = poison((4, 4), np.float32)
    nan_scale_kernel[(1,)](a, sa, b, sb, c, backend=backend)
    assert np.isnan(c[1]).all() and not np.isnan(np.delete(c, 1, 0)).any()
    want = decode_mx(a, "e4m3") @ decode_mx(b, "e4m3")
    np.testing.assert_allclose(np.delete(c, 1, 0), np.delete(want, 1, 0), rtol=1e-5, atol=1e-5)


@mutile.jit
def dot_scaled_3d_kernel(A, SA, B, SB, C):
    a = ml.load(A + tile_offsets(2, 16, 32, 3))                     # e2m1: [2, 16, 64] values
    sa = ml.load(SA + tile_offsets(2, 16, 2, 3))
    b = ml.load(B + tile_offsets(2, 64, 16, 3))
    sb = ml.load(SB + tile_offsets(2, 16, 2, 3))
    ml.store(C + tile_offsets(2, 16, 16, 3), ml.dot_scaled(a, sa, "e2m1", b, sb, "e5m2"))


def test_batched_dot_scaled(rng, backend):
    ca, cb = random_codes("e2m1", (2, 16, 64), rng), random_codes("e5m2", (2, 64, 16), rng)
    a = (ca[..., 0::2] | (ca[..., 1::2] << 4)).astype(np.uint8)
    sa = rng.integers(124, 131, (2, 16, 2)).astype(np.uint8)
    sb = rng.integers(124, 131, (2, 16, 2)).astype(np.uint8)
    c = poison((2, 16, 16), np.float32)
    dot_scaled_3d_kernel[(1,)](a, sa, cb.astype(np.uint8).view(ml_dtypes.float8_e5m2), sb, c,
                               backend=backend)
    av = decode_mx(ca, "e2m1") * np.repeat(decode_e8m0(sa), 32, axis=2)
    bv = decode_mx(cb, "e5m2") * np.swapaxes(np.repeat(decode_e8m0(sb), 32, axis=2), 1, 2)
    want = av @ bv
    assert np.all(np.abs(c - want) <= 4e-6 * (np.abs(av) @ np.abs(bv) + 1))


# ---------------------------------------------------------------- errors
@mutile.jit
def err_format(X):
    a = ml.load(X + tile_offsets(16, 64, 1, 2)).to(ml.uint8)
    c = ml.dot_scaled(a, None, "e3m2", ml.trans(a), None, "e4m3")  # LINE-MARK: ml.dot_scaled
    ml.store(X + tile_offsets(16, 16, 1, 2), c)


@mutile.jit
def err_e2m1_dtype(X):
    a = ml.load(X + tile_offsets(16, 32, 1, 2))
    c = ml.dot_scaled(a, None, "e2m1", ml.trans(a), None, "e2m1")  # LINE-MARK: ml.dot_scaled
    ml.store(X + tile_offsets(16, 16, 1, 2), c)


@mutile.jit
def err_scale_shape(X):
    a = ml.load(X + tile_offsets(16, 64, 1, 2)).to(ml.uint8)
    s = ml.zeros([16, 4], ml.uint8)
    c = ml.dot_scaled(a, s, "e4m3", ml.trans(a), None, "e4m3")  # LINE-MARK: ml.dot_scaled
    ml.store(X + tile_offsets(16, 16, 1, 2), c)


@mutile.jit
def err_batch(X):
    a = ml.load(X + tile_offsets(2, 8, 8, 3))
    b = ml.load(X + tile_offsets(4, 8, 2, 3))
    c = ml.dot(a, b)  # LINE-MARK: ml.dot
    ml.store(X + tile_offsets(2, 8, 2, 3), c)


@mutile.jit
def err_rank(X):
    a = ml.load(X + tile_offsets(2, 8, 8, 3))
    c = ml.dot(a, ml.load(X + tile_offsets(8, 8, 1, 2)))  # LINE-MARK: ml.dot
    ml.store(X + tile_offsets(8, 8, 1, 2), c)


@pytest.mark.parametrize("kernel,pattern", [
    (err_batch, r"dot: the batch dims differ, \[2, 8, 8\] @ \[4, 8, 2\]"),
    (err_rank, r"dot needs two 2-D tiles \(or two 3-D tiles, batched\), got shapes "
               r"\[2, 8, 8\] and \[8, 8\]"),
    (err_format, r"lhs_format must be one of e2m1, e4m3, e5m2, bf16, fp16, got 'e3m2'"),
    (err_e2m1_dtype, r"an e2m1 lhs holds two values per byte as uint8, got ml.float32"),
    (err_scale_shape, r"lhs_scale must have shape \[16, 2\] \(one e8m0 scale per 32 elements "
                      r"along K=64\), got \[16, 4\]"),
])
def test_bad_dots_point_at_the_call(kernel, pattern):
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, {"X": T.PointerType(T.f32)}, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "mx.py" not in str(e) and "tiles.py" not in str(e)
