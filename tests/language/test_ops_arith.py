"""Arithmetic, comparison and bitwise operators on tiles, for every integer width and
signedness and for f16, bf16, f32 and f64, against independent references (Python
integers for C semantics, float64 rounded once for floats); and Triton's type
promotion, observed through the dtypes of results (``ml.static_assert`` in the kernel)
and their values.

One kernel per dtype computes every operator into slots of one output array; every
output is poisoned first.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.ir import semantics
from mutile.ir import types as T

from ..conftest import assert_bits_equal, poison, put, random_data

N = 256           # elements per test array
TILE = 64         # elements per program (compile time grows with the tile)
GRID = (N // TILE,)
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def name(d):
    return np.dtype(d).name


# ---------------------------------------------------------------- integers
@mutile.jit
def int_ops(X, Y, S, O, C, F, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    y = ml.load(Y + offs)
    s = ml.load(S + offs)
    put(O, 0, x + y, BLOCK)
    put(O, 1, x - y, BLOCK)
    put(O, 2, x * y, BLOCK)
    put(O, 3, x // y, BLOCK)
    put(O, 4, x % y, BLOCK)
    put(O, 5, x & y, BLOCK)
    put(O, 6, x | y, BLOCK)
    put(O, 7, x ^ y, BLOCK)
    put(O, 8, ~x, BLOCK)
    put(O, 9, -x, BLOCK)
    put(O, 10, x << s, BLOCK)
    put(O, 11, x >> s, BLOCK)
    put(O, 12, +x, BLOCK)
    cmps = (x < y, x <= y, x > y, x >= y, x == y, x != y)
    for i in ml.static_range(6):
        put(C, i, cmps[i].to(ml.int8), BLOCK)
    put(C, 6, (not x).to(ml.int8), BLOCK)
    q = x / y
    ml.static_assert(q.dtype == ml.float32, "int / int must compute in float32")
    put(F, 0, q, BLOCK)


def wrap(v: int, dtype) -> int:
    info = np.iinfo(dtype)
    bits = info.bits
    v &= (1 << bits) - 1
    return v - (1 << bits) if info.min < 0 and v >= 1 << (bits - 1) else v


def c_div(a: int, b: int, dtype) -> int:
    """C quotient (toward zero); x // 0 == -1 (all ones); INT_MIN // -1 wraps."""
    if b == 0:
        return wrap(-1, dtype)
    q = abs(a) // abs(b)
    return wrap(-q if (a < 0) != (b < 0) else q, dtype)


def c_rem(a: int, b: int, dtype) -> int:
    """C remainder (sign of the dividend); x % 0 == x."""
    if b == 0:
        return a
    r = abs(a) % abs(b)
    return wrap(-r if a < 0 else r, dtype)


def shift_left(a, s, dtype):
    return 0 if s >= np.iinfo(dtype).bits else wrap(a << s, dtype)


def shift_right(a, s, dtype):
    if s >= np.iinfo(dtype).bits:
        return -1 if a < 0 else 0
    return a >> s        # arithmetic for negative (signed) values, as C on two's complement


INT_REFS = [
    lambda a, b, s, d: wrap(a + b, d), lambda a, b, s, d: wrap(a - b, d),
    lambda a, b, s, d: wrap(a * b, d), lambda a, b, s, d: c_div(a, b, d),
    lambda a, b, s, d: c_rem(a, b, d), lambda a, b, s, d: wrap(a & b, d),
    lambda a, b, s, d: wrap(a | b, d), lambda a, b, s, d: wrap(a ^ b, d),
    lambda a, b, s, d: wrap(~a, d), lambda a, b, s, d: wrap(-a, d),
    lambda a, b, s, d: shift_left(a, s, d), lambda a, b, s, d: shift_right(a, s, d),
    lambda a, b, s, d: a,
]
INT_NAMES = ["+", "-", "*", "//", "%", "&", "|", "^", "~", "neg", "<<", ">>", "pos"]


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_integer_operators(dtype, rng, backend):
    """Wrap-around + - * and unary -, C-style // and % with negative operands, x // 0 ==
    -1, x % 0 == x, INT_MIN // -1 == INT_MIN, & | ^ ~, shifts by 0 .. width+3 (>= width
    gives 0, or -1 for >> of a negative), comparisons, ``not``, and int / int in f32."""
    info = np.iinfo(dtype)
    x = random_data(dtype, N, rng)
    y = random_data(dtype, N, rng)
    y[:8] = np.array([0, 0, -1 if info.min else 1, 3, -3 if info.min else 7, 0, 1, 2],
                     dtype=object).astype(dtype)
    x[8:11] = np.array([info.min, -7 if info.min else 7, 7], dtype=object).astype(dtype)
    y[8:11] = np.array([-1 if info.min else 1, 2, -2 if info.min else 2],
                       dtype=object).astype(dtype)
    s = rng.integers(0, info.bits + 4, N).astype(dtype)
    o, c, f = poison((13, N), dtype), poison((7, N), np.int8), poison(N, np.float32)
    int_ops[GRID](x, y, s, o, c, f, BLOCK=TILE, backend=backend)
    xs, ys, ss = ([int(v) for v in arr] for arr in (x, y, s))
    for slot, (ref, op) in enumerate(zip(INT_REFS, INT_NAMES)):
        want = np.array([ref(a, b, sh, dtype) for a, b, sh in zip(xs, ys, ss)],
                        dtype=object).astype(dtype)
        assert_bits_equal(o[slot], want, f"{name(dtype)} {op}")
    for i, cmp in enumerate([np.less, np.less_equal, np.greater, np.greater_equal, np.equal,
                             np.not_equal]):
        assert_bits_equal(c[i], cmp(x, y).astype(np.int8), f"{name(dtype)} {cmp.__name__}")
    assert_bits_equal(c[6], (x == 0).astype(np.int8), "not x")
    with np.errstate(all="ignore"):
        assert_bits_equal(f, x.astype(np.float32) / y.astype(np.float32), "int / int")


# ---------------------------------------------------------------- floats
@mutile.jit
def float_ops(X, Y, O, Q, C, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    y = ml.load(Y + offs)
    put(O, 0, x + y, BLOCK)
    put(O, 1, x - y, BLOCK)
    put(O, 2, x * y, BLOCK)
    put(O, 3, -x, BLOCK)
    put(Q, 0, x / y, BLOCK)
    put(Q, 1, x % y, BLOCK)
    cmps = (x < y, x <= y, x > y, x >= y, x == y, x != y)
    for i in ml.static_range(6):
        put(C, i, cmps[i].to(ml.int8), BLOCK)


def round_once(v64, dtype):
    """A float64 result rounded to ``dtype``: correctly rounded for one + - * / of
    ``dtype`` operands (f64 holds >= 2p+2 bits of every narrower type, so rounding
    through f32 is innocuous)."""
    return v64.astype(np.float32).astype(dtype) if np.dtype(dtype).itemsize < 4 \
        else v64.astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=name)
def test_float_operators(dtype, rng, backend):
    """+ - * and unary - keep the dtype and are correctly rounded; / and % compute in f32
    for f16/bf16 (Triton's div_or_mod promotion); % is C's fmod (sign of the dividend);
    IEEE comparisons with NaN, infinities, signed zeros and subnormals — bit exact."""
    x = random_data(dtype, N, rng)
    y = random_data(dtype, N, rng)
    y[:4] = np.array([1.5, 0.0, -0.0, np.inf]).astype(dtype)   # x = 0, -0, inf, -inf
    x[20:30] = y[20:30]                                          # equal pairs for == / <=
    qd = np.float32 if np.dtype(dtype).itemsize < 4 else dtype
    o, q, c = poison((4, N), dtype), poison((2, N), qd), poison((6, N), np.int8)
    float_ops[GRID](x, y, o, q, c, BLOCK=TILE, backend=backend)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        for slot, (op, want) in enumerate([("+", x64 + y64), ("-", x64 - y64), ("*", x64 * y64),
                                           ("neg", -x64)]):
            assert_bits_equal(o[slot], round_once(want, dtype), f"{name(dtype)} {op}")
        assert_bits_equal(q[0], round_once(x64 / y64, qd), f"{name(dtype)} /")
        assert_bits_equal(q[1], np.fmod(x.astype(qd), y.astype(qd)), f"{name(dtype)} %")
    for i, cmp in enumerate([np.less, np.less_equal, np.greater, np.greater_equal, np.equal,
                             np.not_equal]):
        assert_bits_equal(c[i], cmp(x64, y64).astype(np.int8), f"{name(dtype)} {cmp.__name__}")


# ---------------------------------------------------------------- promotion
@mutile.jit
def mixed_ops(X, Y, O, C, BLOCK: ml.constexpr):
    """Binary ops on two tiles of different dtypes; O's element type is the expected
    computation type, which every result must have."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    y = ml.load(Y + offs)
    put(O, 0, x + y, BLOCK)
    put(O, 1, x * y, BLOCK)
    put(O, 2, y - x, BLOCK)
    put(O, 3, ml.maximum(x, y), BLOCK)
    put(O, 4, ml.where(x < y, x, y), BLOCK)
    put(C, 0, (x < y).to(ml.int8), BLOCK)


BF16, E4M3, E5M2 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
PROMOTIONS = [   # (x, y, computation type) — Triton's rules, docs/semantics.md
    (np.int8, np.uint8, np.uint8), (np.int8, np.int16, np.int16),
    (np.int32, np.uint32, np.uint32), (np.uint8, np.int32, np.int32),
    (np.int64, np.uint32, np.int64), (np.uint64, np.int8, np.uint64),
    (np.bool_, np.int8, np.int8), (np.int32, np.float16, np.float16), (np.int64, BF16, np.float32),
    (np.float16, BF16, np.float16), (np.float16, np.float32, np.float32),
    (BF16, np.float64, np.float64), (np.uint16, np.float32, np.float32),
    (E4M3, E4M3, np.float16), (E5M2, np.int32, np.float16), (E4M3, np.float32, np.float32),
]


def to_ir(d):
    return T.scalar_from_numpy(np.dtype(d))


def moderate(dtype, rng):
    """Values every type in a pair holds exactly enough (|v| <= 100)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, N).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, 101, N).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-100, 101, N).astype(dtype)
    return (rng.standard_normal(N) * 10).astype(dtype)


@pytest.mark.parametrize("xd,yd,cd", PROMOTIONS,
                         ids=[f"{name(a)}-{name(b)}" for a, b, _ in PROMOTIONS])
def test_promotion(xd, yd, cd, rng, backend):
    """The result dtype of + * - maximum where (checked at compile time), and the values:
    both operands converted to the computation type, then one correctly rounded op (or
    wrap-around); the comparison is done in that type too (-1 < 5u8 is false)."""
    x, y = moderate(xd, rng), moderate(yd, rng)
    o, c = poison((5, N), cd), poison(N, np.int8)
    mixed_ops[GRID](x, y, o, c, BLOCK=TILE, backend=backend)
    cx = semantics.convert(x, to_ir(xd), to_ir(cd))
    cy = semantics.convert(y, to_ir(yd), to_ir(cd))
    if np.dtype(cd).kind in "iu":
        wants = [cx + cy, cx * cy, cy - cx, np.maximum(cx, cy), np.where(cx < cy, cx, cy)]
    else:
        x64, y64 = cx.astype(np.float64), cy.astype(np.float64)
        wants = [round_once(v, cd) for v in (x64 + y64, x64 * y64, y64 - x64)]
        wants += [np.maximum(cx, cy), np.where(x64 < y64, cx, cy)]
    for slot, want in enumerate(wants):
        assert_bits_equal(o[slot], np.asarray(want).astype(cd), f"slot {slot}")
    assert_bits_equal(c, (cx.astype(np.float64) < cy.astype(np.float64)).astype(np.int8)
                      if np.dtype(cd).kind == "f" else (cx < cy).astype(np.int8), "<")


def test_signed_unsigned_comparison_promotes_to_unsigned(backend):
    """-1 (int8) < 5 (uint8) is computed in uint8: 255 < 5 is false."""
    x = np.full(N, -1, np.int8)
    y = np.full(N, 5, np.uint8)
    o, c = poison((5, N), np.uint8), poison(N, np.int8)
    mixed_ops[GRID](x, y, o, c, BLOCK=TILE, backend=backend)
    assert (c == 0).all()
    assert (o[0] == 4).all() and (o[3] == 255).all()


@mutile.jit
def weak_scalar_ops(I8, U8, F16, BF16, I32, O8, OU8, O16, OB16, O32, OF, O64, BLOCK: ml.constexpr):
    """A Python number adopts the tile's dtype when it fits (Triton's weak scalars)."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    i8 = ml.load(I8 + offs)
    u8 = ml.load(U8 + offs)
    f16 = ml.load(F16 + offs)
    bf16 = ml.load(BF16 + offs)
    i32 = ml.load(I32 + offs)
    put(O8, 0, i8 + 3, BLOCK)           # int8 (wraps)
    put(O8, 1, 100 - i8, BLOCK)
    put(O32, 0, i8 + 1000, BLOCK)       # 1000 does not fit int8: int32
    put(OU8, 0, u8 - 1, BLOCK)          # uint8, wraps
    put(O16, 0, f16 * 2.0, BLOCK)       # float16
    put(O16, 1, f16 + 3, BLOCK)         # an int scalar on a float tile: float16
    put(OF, 0, f16 / 2.0, BLOCK)        # / on half computes in float32
    put(OB16, 0, bf16 + 1, BLOCK)       # bfloat16
    put(OF, 1, i32 + 2.5, BLOCK)        # a float scalar on an int tile: float32
    put(O64, 0, i32 * 2 ** 40, BLOCK)   # an int64 scalar widens int32


def test_weak_scalars(rng, backend):
    i8 = random_data(np.int8, N, rng)
    u8 = random_data(np.uint8, N, rng)
    f16 = random_data(np.float16, N, rng, specials=False)
    bf16 = random_data(ml_dtypes.bfloat16, N, rng, specials=False)
    i32 = rng.integers(-2 ** 20, 2 ** 20, N).astype(np.int32)
    outs = [poison((2, N), np.int8), poison((1, N), np.uint8), poison((2, N), np.float16),
            poison((1, N), ml_dtypes.bfloat16), poison((1, N), np.int32),
            poison((2, N), np.float32), poison((1, N), np.int64)]
    weak_scalar_ops[GRID](i8, u8, f16, bf16, i32, *outs, BLOCK=TILE, backend=backend)
    o8, ou8, o16, ob16, o32, of, o64 = outs
    w = i8.astype(np.int64)
    assert_bits_equal(o8[0], (w + 3).astype(np.int8), "i8 + 3")
    assert_bits_equal(o8[1], (100 - w).astype(np.int8), "100 - i8")
    assert_bits_equal(o32[0], (w + 1000).astype(np.int32), "i8 + 1000")
    assert_bits_equal(ou8[0], (u8.astype(np.int64) - 1).astype(np.uint8), "u8 - 1")
    f = f16.astype(np.float64)
    assert_bits_equal(o16[0], round_once(f * 2, np.float16), "f16 * 2.0")
    assert_bits_equal(o16[1], round_once(f + 3, np.float16), "f16 + 3")
    assert_bits_equal(of[0], (f / 2).astype(np.float32), "f16 / 2.0")
    assert_bits_equal(ob16[0], round_once(bf16.astype(np.float64) + 1, BF16), "bf16 + 1")
    assert_bits_equal(of[1], (i32.astype(np.float64) + 2.5).astype(np.float32), "i32 + 2.5")
    assert_bits_equal(o64[0], i32.astype(np.int64) * 2 ** 40, "i32 * 2**40")


@mutile.jit
def bool_plus_int(X, O, BLOCK: ml.constexpr):
    offs = ml.arange(0, BLOCK)
    m = ml.load(X + offs) > 0
    r = m + 1
    ml.static_assert(r.dtype == ml.int32, "bool tile + Python int must be int32")
    ml.store(O + offs, r)


def test_bool_tile_plus_python_int_is_int32(backend):
    x = np.array([1, -1, 2, -2] * 4, np.int32)
    o = poison(16, np.int32)
    bool_plus_int[(1,)](x, o, BLOCK=16, backend=backend)
    assert o.tolist() == [2, 1, 2, 1] * 4
