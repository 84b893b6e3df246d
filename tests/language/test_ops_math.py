"""Math builtins on float tiles (exp, exp2, log, log2, sqrt, rsqrt, sin, cos, abs,
sigmoid, erf, tanh, floor, ceil, fma, div_rn, fdiv, and the ``ml.math`` / tensor-method
spellings)
against float64 numpy, measured in ulps of the result type; and the integer ones
(abs, cdiv, umulhi) exactly.

Tolerances: sqrt, abs, floor, ceil and fma are exact (correctly rounded); the
approximations follow the CUDA/Triton accuracy contract for f32 — exp, exp2, log, log2,
sin, cos within 2 ulp, erf and tanh within 4, rsqrt within 2, and sigmoid (a composite
1 / (1 + exp(-x))) within 4. f16/bf16 compute in f32 and round once, so they are within
1 ulp of their own type. f64 gets the same ulp counts in f64 ulps. Special values
(NaN, +-inf, zeros) must come out exactly as IEEE/numpy says.
"""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml

from ..conftest import assert_bits_equal, poison, put, random_data

N = 512           # elements per test array
TILE = 64         # elements per program (compile time grows with the tile)
GRID = (N // TILE,)

UNARY = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "abs", "sigmoid", "erf",
         "tanh", "floor", "ceil"]
POSITIVE = {"log", "log2", "sqrt", "rsqrt"}       # fed |x| (plus specials)
_erf = np.vectorize(math.erf, otypes=[np.float64])
REF = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
       "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos, "abs": np.abs,
       "sigmoid": None, "erf": _erf, "tanh": np.tanh,
       "floor": np.floor, "ceil": np.ceil}
ULPS = {"exp": 2, "exp2": 2, "log": 2, "log2": 2, "sqrt": 0, "rsqrt": 2, "sin": 2, "cos": 2,
        "abs": 0, "sigmoid": 4, "erf": 4, "tanh": 4, "floor": 0, "ceil": 0}


@mutile.jit
def math_ops(X, P, Y, Z, O, S, BLOCK: ml.constexpr):
    """O[i] = f_i(x) (or of p = |x| for the log/sqrt family), in UNARY's order, then
    fma(x, y, z), and the same functions through ml.math and tensor methods. sigmoid
    goes to S: as in Triton it is ``1 / (1 + exp(-x))``, whose ``/`` computes f16 and
    bf16 in f32."""
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    p = ml.load(P + offs)
    y = ml.load(Y + offs)
    z = ml.load(Z + offs)
    put(O, 0, ml.exp(x), BLOCK)
    put(O, 1, ml.exp2(x), BLOCK)
    put(O, 2, ml.log(p), BLOCK)
    put(O, 3, ml.log2(p), BLOCK)
    put(O, 4, ml.sqrt(p), BLOCK)
    put(O, 5, ml.rsqrt(p), BLOCK)
    put(O, 6, ml.sin(x), BLOCK)
    put(O, 7, ml.cos(x), BLOCK)
    put(O, 8, ml.abs(x), BLOCK)
    put(S, 0, ml.sigmoid(x), BLOCK)
    put(O, 10, ml.erf(x), BLOCK)
    put(O, 11, ml.tanh(x), BLOCK)
    put(O, 12, ml.floor(x), BLOCK)
    put(O, 13, ml.ceil(x), BLOCK)
    put(O, 14, ml.fma(x, y, z), BLOCK)
    # the same operations under their other spellings
    put(O, 15, ml.math.exp(x), BLOCK)
    put(O, 16, x.exp2(), BLOCK)
    put(O, 17, p.log(), BLOCK)
    put(O, 18, p.log2(), BLOCK)
    put(O, 19, ml.math.sqrt_rn(p), BLOCK)
    put(O, 20, x.sin(), BLOCK)
    put(O, 21, x.cos(), BLOCK)
    put(O, 22, x.abs(), BLOCK)
    put(S, 1, x.sigmoid(), BLOCK)
    put(S, 2, ml.div_rn(x, y), BLOCK)       # / of f16/bf16 computes in f32, like sigmoid
    put(S, 3, ml.math.fdiv(x, y), BLOCK)
    put(O, 24, ml.math.fma(x, y, z), BLOCK)
    put(O, 25, p.sqrt(), BLOCK)
    put(O, 26, ml.math.floor(x), BLOCK)


ALIASES = {15: 0, 16: 1, 17: 2, 18: 3, 19: 4, 20: 6, 21: 7, 22: 8, 24: 14, 25: 4, 26: 12}


def ulp(r64, dtype):
    """The spacing of ``dtype`` at each |r| (the smallest subnormal near zero)."""
    fi = ml_dtypes.finfo(dtype)
    a = np.abs(r64)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, float(fi.minexp))
    return np.exp2(e - fi.nmant)


def exact_fma(x, y, z, dtype):
    """x * y + z with one rounding to ``dtype`` (Fractions; non-finite cases by IEEE)."""
    out = []
    for a, b, c in zip(x.astype(np.float64).tolist(), y.astype(np.float64).tolist(),
                       z.astype(np.float64).tolist()):
        if all(math.isfinite(v) for v in (a, b, c)):
            exact = Fraction(a) * Fraction(b) + Fraction(c)
            r = round_fraction(exact, dtype)
            if r == 0 and exact == 0:
                r = a * b + c       # the sign of an exact zero, per IEEE
            out.append(r)
        else:
            out.append(a * b + c)
    return np.array(out, np.float64).astype(dtype)


def round_fraction(q: Fraction, dtype) -> float:
    """``q`` rounded to nearest even in ``dtype`` (returned as a float)."""
    fi = ml_dtypes.finfo(dtype)
    if q == 0:
        return 0.0
    a = abs(q)
    e = max(math.floor(math.log2(a.numerator) - math.log2(a.denominator)), fi.minexp)
    while Fraction(2) ** e > a and e > fi.minexp:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    step = Fraction(2) ** (e - fi.nmant)
    n = a / step
    k = math.floor(n)
    rem = n - k
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2 == 1):
        k += 1
    v = float(k * step)
    if v > float(fi.max):
        v = math.inf
    return v if q > 0 else -v


def math_inputs(dtype, rng):
    x = random_data(dtype, N, rng)
    x[8:16] = np.array([0.5, -0.5, 2.5, -2.5, 1e-3, 3.0, -7.25, 10.0]).astype(dtype)
    p = np.abs(random_data(dtype, N, rng))
    p[:6] = np.array([0.0, -0.0, np.inf, np.nan, -1.0, 1.0]).astype(dtype)
    y = random_data(dtype, N, rng, specials=False)
    z = random_data(dtype, N, rng, specials=False)
    return x, p, y, z


def sigmoid_ref(x):
    """1 / (1 + exp(-x)) with exp(-x) in ``x``'s type (so it overflows to inf, and the
    result to 0, below about -88 for f32, as Triton's formula does), the rest in f64."""
    return 1 / (1 + np.exp(-x.astype(np.float64)).astype(x.dtype).astype(np.float64))


def check_unary(name, got, arg, dtype, tol=None, ulp_dtype=None):
    """``got`` (of ``dtype``) within ``tol`` ulps of ``ulp_dtype`` (default: ULPS, and
    1 ulp for types narrower than f32, which compute in f32 and round once)."""
    ulp_dtype = ulp_dtype or dtype
    with np.errstate(all="ignore"):
        want = REF[name](arg.astype(np.float64)) if name != "sigmoid" else sigmoid_ref(arg)
        wt = want.astype(np.float32).astype(dtype) if np.dtype(dtype).itemsize < 4 else \
            want.astype(dtype)
    g = got.astype(np.float64)
    finite = np.isfinite(want) & np.isfinite(wt.astype(np.float64))
    # specials (NaN, inf, and results that round to inf in dtype) must match exactly
    assert_bits_equal(got[~finite] + dtype(0) if name != "abs" else got[~finite],
                      wt[~finite] + dtype(0) if name != "abs" else wt[~finite], f"{name} specials")
    if tol is None:
        tol = ULPS[name] if np.dtype(dtype).itemsize >= 4 else min(ULPS[name], 1)
    err = np.abs(g[finite] - want[finite]) / ulp(want[finite], ulp_dtype)
    bad = ~(err <= max(tol, 0.5))
    if bad.any():
        i = np.flatnonzero(bad)[0]
        a = arg[finite][i]
        raise AssertionError(f"{np.dtype(dtype).name} {name}({a!r}) = {g[finite][i]!r}, want "
                             f"{want[finite][i]!r}: {err[i]:.2f} ulp > {tol} "
                             f"({int(bad.sum())} bad, max {err.max():.2f} ulp)")


@pytest.mark.parametrize("dtype", [np.float32, np.float64,
                                   pytest.param(np.float16, marks=pytest.mark.slow),
                                   pytest.param(ml_dtypes.bfloat16, marks=pytest.mark.slow)],
                         ids=lambda d: np.dtype(d).name)
def test_math(dtype, rng, backend):
    x, p, y, z = math_inputs(dtype, rng)
    sd = np.float32 if np.dtype(dtype).itemsize < 4 else dtype
    o, s = poison((27, N), dtype), poison((4, N), sd)
    math_ops[GRID](x, p, y, z, o, s, BLOCK=TILE, backend=backend)
    for slot, name in enumerate(UNARY):
        if name == "sigmoid":
            # f16/bf16: exp(-x) and 1 + exp(-x) round to the narrow type, then / in f32
            narrow = sd is not dtype
            check_unary(name, s[0], x, sd, tol=2 if narrow else None,
                        ulp_dtype=dtype if narrow else None)
            assert_bits_equal(s[1], s[0], "x.sigmoid()")
            continue
        check_unary(name, o[slot], p if name in POSITIVE else x, dtype)
    assert_bits_equal(o[14], exact_fma(x, y, z, dtype), "fma")
    with np.errstate(all="ignore"):
        quotient = (x.astype(np.float64) / y.astype(np.float64)).astype(sd)  # f64 holds 2p+2 bits
    assert_bits_equal(s[2], quotient, "div_rn")
    assert_bits_equal(s[3], quotient, "fdiv")
    for alias, slot in ALIASES.items():
        what = UNARY[slot] if slot < 14 else "fma"
        assert_bits_equal(o[alias], o[slot], f"slot {alias} (another spelling of {what})")


def test_fma_rounds_once(backend):
    """Cases where x*y+z rounded twice differs from the fused result."""
    e = 2.0 ** -23
    x = np.full(N, 1 + e, np.float32)
    y = np.full(N, 1 - e, np.float32)           # x*y = 1 - 2^-46: rounds to 1.0 alone
    z = np.full(N, -1.0, np.float32)
    o, s = poison((27, N), np.float32), poison((4, N), np.float32)
    math_ops[GRID](x, np.abs(x), y, z, o, s, BLOCK=TILE, backend=backend)
    assert (o[14] == np.float32(-2.0 ** -46)).all(), o[14][:4]


# ---------------------------------------------------------------- integers
@mutile.jit
def int_math(X, Y, O, H, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs)
    y = ml.load(Y + offs)
    put(O, 0, ml.abs(x), BLOCK)
    put(O, 1, ml.cdiv(x, y), BLOCK)
    put(O, 2, ml.cdiv(x, 16), BLOCK)
    put(H, 0, ml.umulhi(x.to(H.dtype.element_ty), y.to(H.dtype.element_ty)), BLOCK)
    put(H, 1, ml.math.umulhi(x.to(H.dtype.element_ty), 0x7E3779B9), BLOCK)


@pytest.mark.parametrize("dtype,hdt", [(np.int32, np.uint32), (np.uint32, np.int32),
                                       (np.int64, np.int32)], ids=["i32", "u32", "i64"])
def test_integer_math(dtype, hdt, rng, backend):
    """abs (wraps at INT_MIN; identity on unsigned), cdiv = (x + d - 1) // d with C
    division (positive operands), umulhi = high 32 bits of the unsigned 64-bit product of
    the 32-bit patterns (CUDA's __umulhi, as Triton), for uint32 and int32."""
    info = np.iinfo(dtype)
    x = random_data(dtype, N, rng)
    y = rng.integers(1, 1000, N).astype(dtype)
    xc = np.abs(x.astype(object)) % 10 ** 6           # cdiv needs x + d - 1 to not wrap
    o, h = poison((3, N), dtype), poison((2, N), hdt)
    x2 = x.copy()
    x2[N // 2:] = xc[N // 2:].astype(dtype)
    int_math[GRID](x2, y, o, h, BLOCK=TILE, backend=backend)
    xs, ys = [int(v) for v in x2], [int(v) for v in y]
    bits = info.bits
    absw = [((abs(a) + (1 << bits)) % (1 << bits)) for a in xs]
    absw = [v - (1 << bits) if info.min < 0 and v >= 1 << (bits - 1) else v for v in absw]
    assert_bits_equal(o[0], np.array(absw, dtype=object).astype(dtype), "abs")
    half = slice(N // 2, None)

    def cdiv(a, d):
        return -(-a // d)

    assert_bits_equal(o[1][half], np.array([cdiv(a, d) for a, d in zip(xs, ys)][N // 2:],
                                           dtype=object).astype(dtype), "cdiv(x, y)")
    assert_bits_equal(o[2][half], np.array([cdiv(a, 16) for a in xs][N // 2:],
                                           dtype=object).astype(dtype), "cdiv(x, 16)")
    u = [a & 0xFFFFFFFF for a in xs]
    hi = [(a * (b & 0xFFFFFFFF)) >> 32 for a, b in zip(u, ys)]
    hi2 = [(a * 0x7E3779B9) >> 32 for a in u]
    assert_bits_equal(h[0], np.array(hi, np.uint64).astype(np.uint32).view(hdt), "umulhi")
    assert_bits_equal(h[1], np.array(hi2, np.uint64).astype(np.uint32).view(hdt), "umulhi const")
