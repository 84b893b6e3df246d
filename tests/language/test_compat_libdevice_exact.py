"""``libdevice``'s exact functions, bit for bit on both backends, against oracles that do
not share mutile's methods: Python's ``decimal``/``fractions``/``math`` and numpy.

* rounding to integers (floor, ceil, trunc, rint, nearbyint, round, llrint, llround),
  saturatef, logb, ilogb, abs, the predicates (isnan, isinf, signbit, finitef,
  isfinited), copysign, nextafter, fdim, fmod, remainder, ldexp/scalbn, fma/fma_rn,
  div_rn and fast_dividef;
* directed rounding (add/sub/mul/div/sqrt/rcp with rn/rz/rd/ru) against the exact
  value (a Fraction) rounded by the mode, zeros' signs by IEEE 754 (6.3) included;
* every conversion (float2int_rd, double2float_rz, ull2double_ru...) the same way, and
  the bit reinterpretations;
* the integer functions (clz, popc, brev, ffs, byte_perm, mulhi, mul24, sad, hadd, rhadd)
  against Python integers.

Inputs mix random values over the whole range with ties, exact cases, overflow and
underflow, signed zeros, infinities and NaN; outputs are poisoned.
"""
from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import numpy as np
import pytest

from ..conftest import assert_bits_equal
from .libdevice_kit import BLOCK, round_directed, run

F = Fraction
MODES = ("rn", "rz", "rd", "ru")


def floats(dtype, rng, n=BLOCK, lo=None, hi=None):
    """Random magnitudes over the dtype's range (or 2**lo..2**hi), random signs, then
    ties, small integers, signed zeros, inf, NaN and a subnormal up front."""
    fi = np.finfo(dtype)
    lo = fi.minexp - fi.nmant if lo is None else lo
    hi = fi.maxexp - 1 if hi is None else hi
    v = np.exp2(rng.uniform(lo, hi, n)) * rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n)
    sp = [0.0, -0.0, np.inf, -np.inf, np.nan, 2.5, -2.5, 0.5, -1.5, 3.0, 1e30, -7.0,
          float(fi.smallest_subnormal) * 5, 4.5, -0.49999997, 2.0 ** 52 + 1]
    v[: len(sp)] = sp
    return v.astype(dtype)


def per_elem(fn, *arrays, dtype):
    return np.array([fn(*vals) for vals in zip(*arrays)], dtype=dtype)


# ------------------------------------------------------------------ float -> float, exact
def _round_away(v):
    if not math.isfinite(v) or abs(v) >= 2.0 ** 52:       # already an integer
        return v
    r = float(Decimal(v).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    return math.copysign(r, v)


def _logb(v):
    if math.isnan(v) or math.isinf(v):
        return abs(v)
    return -math.inf if v == 0 else float(math.frexp(v)[1] - 1)


UNARY_EXACT = {
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "round": lambda x: per_elem(_round_away, x.astype(np.float64), dtype=x.dtype),
    "saturatef": lambda x: np.where(x > 0, np.minimum(x, x.dtype.type(1)), x.dtype.type(0)),
    "logb": lambda x: per_elem(_logb, x.astype(np.float64), dtype=x.dtype),
    "abs": np.abs, "sqrt_rn": np.sqrt,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_unary_exact(dtype, rng, backend):
    names = list(UNARY_EXACT)
    x = np.stack([floats(dtype, rng) for _ in names])
    x[names.index("saturatef"), 16:24] = [0.25, 1.0, 1.5, -0.25, 0.999, -1e-30, 1e-30, 7.0]
    got = run(names, [x], dtype, backend)
    for k, name in enumerate(names):
        with np.errstate(all="ignore"):
            assert_bits_equal(got[k], UNARY_EXACT[name](x[k]), name)


def _ilogb(v):
    if math.isnan(v) or v == 0:
        return -2 ** 31
    return 2 ** 31 - 1 if math.isinf(v) else math.frexp(v)[1] - 1


def _to_int64(v, rounding):
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return 2 ** 63 - 1 if v > 0 else -2 ** 63
    return max(-2 ** 63, min(2 ** 63 - 1, rounding(v)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_predicates_and_integer_results(dtype, rng, backend):
    x = floats(dtype, rng)
    x[20:24] = [-np.nan, 2.0 ** 70, -2.0 ** 70, -0.5]
    x64 = x.astype(np.float64)
    got = run(["isnan", "isinf"], [np.stack([x] * 2)], np.bool_, backend)
    assert_bits_equal(got[0], np.isnan(x), "isnan")
    assert_bits_equal(got[1], np.isinf(x), "isinf")
    names = ["signbit", "finitef", "isfinited", "ilogb"]
    got = run(names, [np.stack([x] * 4)], np.int32, backend)
    assert_bits_equal(got[0], np.signbit(x).astype(np.int32), "signbit")
    assert_bits_equal(got[1], np.isfinite(x).astype(np.int32), "finitef")
    assert_bits_equal(got[2], np.isfinite(x).astype(np.int32), "isfinited")
    assert_bits_equal(got[3], per_elem(_ilogb, x64, dtype=np.int32), "ilogb")
    got = run(["llrint", "llround"], [np.stack([x] * 2)], np.int64, backend)
    assert_bits_equal(got[0], per_elem(lambda v: _to_int64(v, round), x64, dtype=np.int64),
                      "llrint")
    assert_bits_equal(got[1], per_elem(lambda v: _to_int64(v, lambda w: int(_round_away(w))),
                                       x64, dtype=np.int64), "llround")


def _remainder(a, b):
    try:
        return math.remainder(a, b)
    except ValueError:
        return math.nan


def _fdim(x, y):
    with np.errstate(all="ignore"):
        return np.where(np.isnan(x) | np.isnan(y), x + y, np.where(x > y, x - y, x.dtype.type(0)))


def _div_rn(x, y):
    def one(a, b):
        if not (math.isfinite(a) and math.isfinite(b)) or b == 0:
            with np.errstate(all="ignore"):
                return np.array(a, x.dtype) / np.array(b, x.dtype)
        return round_directed(F(a) / F(b), x.dtype, "rn", zero_sign=math.copysign(1, a) *
                              math.copysign(1, b))
    return per_elem(one, x.astype(np.float64), y.astype(np.float64), dtype=x.dtype)


BINARY_EXACT = {
    "copysign": np.copysign, "nextafter": np.nextafter, "fdim": _fdim, "fmod": np.fmod,
    "remainder": lambda x, y: per_elem(_remainder, x.astype(np.float64), y.astype(np.float64),
                                       dtype=x.dtype),
    "div_rn": _div_rn, "fast_dividef": _div_rn,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_binary_exact(dtype, rng, backend):
    names = list(BINARY_EXACT)
    x = np.stack([floats(dtype, rng) for _ in names])
    y = np.stack([floats(dtype, rng) for _ in names])
    # comparable magnitudes in half the lanes (fmod/remainder do real work there), and
    # remainder's ties: x = (n + 1/2) * y
    with np.errstate(over="ignore"):
        y[:, BLOCK // 2:] = (x[:, BLOCK // 2:] * np.exp2(rng.integers(-8, 8, (len(names),
                             BLOCK // 2)))).astype(dtype)
    r = names.index("remainder")
    x[r, 16:20], y[r, 16:20] = [2.5, 3.5, -7.5, 5.0], [1.0, 1.0, 3.0, 2.0]
    got = run(names, [x, y], dtype, backend)
    for k, name in enumerate(names):
        with np.errstate(all="ignore"):
            assert_bits_equal(got[k], BINARY_EXACT[name](x[k], y[k]), name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_ldexp_and_fma(dtype, rng, backend):
    """ldexp/scalbn over the whole exponent range (overflow, subnormal results, huge n) and
    fma rounded once (half the lanes cancel the product almost exactly)."""
    fi = np.finfo(dtype)
    x = floats(dtype, rng)
    n = rng.integers(-2 * fi.maxexp - 60, 2 * fi.maxexp + 60, BLOCK).astype(np.int32)
    n[:16] = [0, 1, -1, 5, -5, 2 ** 31 - 1, -2 ** 31, 200, -200, 3, -fi.maxexp - 60, 1, 2, 3,
              4, 5]
    got = run(["ldexp", "scalbn"], [np.stack([x] * 2), np.stack([n] * 2)], dtype, backend)
    with np.errstate(all="ignore"):
        want = np.ldexp(x, np.clip(n, -100000, 100000))
    assert_bits_equal(got[0], want, "ldexp")
    assert_bits_equal(got[1], want, "scalbn")
    a, b, c = floats(dtype, rng, lo=-60, hi=60), floats(dtype, rng, lo=-60, hi=60), \
        floats(dtype, rng, lo=-60, hi=60)
    c[BLOCK // 2:] = -(a[BLOCK // 2:].astype(np.float64) * b[BLOCK // 2:]).astype(dtype)

    def fma_ref(p, q, s):
        if not all(math.isfinite(v) for v in (p, q, s)):
            with np.errstate(all="ignore"):
                return np.float64(p) * np.float64(q) + np.float64(s)
        exact = F(p) * F(q) + F(s)
        # an exact zero is -0 only if the product and s are both zeros of negative sign
        prod_neg = math.copysign(1, p) * math.copysign(1, q) < 0
        zero_sign = -1.0 if (p == 0 or q == 0) and s == 0 and prod_neg and \
            math.copysign(1, s) < 0 else 1.0
        return round_directed(exact, dtype, "rn", zero_sign)
    want = per_elem(fma_ref, a.astype(np.float64), b.astype(np.float64), c.astype(np.float64),
                    dtype=dtype)
    got = run(["fma", "fma_rn"], [np.stack([a] * 2), np.stack([b] * 2), np.stack([c] * 2)],
              dtype, backend)
    assert_bits_equal(got[0], want, "fma")
    assert_bits_equal(got[1], want, "fma_rn")


# ------------------------------------------------------------------ directed rounding
def _exact_op(op, a, b, mode, dtype):
    """IEEE result of ``op`` on doubles ``a``, ``b`` rounded by ``mode`` into ``dtype``."""
    nt = np.dtype(dtype).type
    if op == "sqrt":
        if math.isnan(a) or a < 0:
            return nt(np.nan)
        if a == 0 or math.isinf(a):
            return nt(a)
        s = np.sqrt(nt(a))
        sq = F(float(s)) ** 2
        if sq == F(a):
            return s
        lo, hi = (s, np.nextafter(s, nt(np.inf))) if sq < F(a) else \
            (np.nextafter(s, nt(-np.inf)), s)
        return {"rn": s, "rz": lo, "rd": lo, "ru": hi}[mode]
    if op == "rcp":
        op, a, b = "div", 1.0, a
    if op == "sub":
        op, b = "add", -b
    if not (math.isfinite(a) and math.isfinite(b)) or (op == "div" and b == 0):
        with np.errstate(all="ignore"):
            x, y = np.array(a, dtype), np.array(b, dtype)
            return nt({"add": x + y, "mul": x * y, "div": x / y}[op])
    if op == "add":
        exact = F(a) + F(b)
        both_neg = math.copysign(1, a) < 0 and math.copysign(1, b) < 0
        both_pos = math.copysign(1, a) > 0 and math.copysign(1, b) > 0
        zero_sign = -1.0 if both_neg or (mode == "rd" and not both_pos) else 1.0
    else:
        exact = F(a) * F(b) if op == "mul" else F(a) / F(b)
        zero_sign = math.copysign(1, a) * math.copysign(1, b)
    return round_directed(exact, dtype, mode, zero_sign)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_directed_rounding(dtype, rng, backend):
    """add/sub/mul/div/sqrt/rcp in every mode, against the exact value rounded."""
    fi = np.finfo(dtype)
    lo, hi = fi.minexp - fi.nmant, fi.maxexp - 1
    ops = ["add", "sub", "mul", "div"]
    names = [f"{o}_{m}" for o in ops for m in MODES]
    x = np.stack([floats(dtype, rng, lo=lo // 2, hi=hi // 2) for _ in names])
    y = np.stack([floats(dtype, rng, lo=lo // 2, hi=hi // 2) for _ in names])
    # nearby magnitudes (cancellation), products/quotients that overflow or underflow
    q = BLOCK // 4
    y[:, q:2 * q] = (x[:, q:2 * q] * (1 + rng.uniform(-1e-3, 1e-3, (len(names), q)))).astype(dtype)
    x[:, 2 * q:3 * q] = floats(dtype, rng, q, lo=hi - 8, hi=hi)
    y[:, 2 * q:3 * q] = floats(dtype, rng, q, lo=lo + 4, hi=hi)
    x[:, 3 * q:] = floats(dtype, rng, q, lo=lo, hi=lo // 2)
    y[:, 3 * q:] = floats(dtype, rng, q, lo=lo // 2 - 30, hi=30)
    x[:, 16:20], y[:, 16:20] = [1.0, -0.0, 3.0, 5.0], [-1.0, -0.0, 3.0, -0.0]
    got = run(names, [x, y], dtype, backend)
    for k, name in enumerate(names):
        op, mode = name.split("_")
        want = np.array([_exact_op(op, float(a), float(b), mode, dtype)
                         for a, b in zip(x[k], y[k])], dtype)
        assert_bits_equal(got[k], want, name)
    names = [f"{o}_{m}" for o in ("sqrt", "rcp") for m in MODES]
    x = np.stack([floats(dtype, rng) for _ in names])
    x[:4, 16:20] = [4.0, 2.0, 0.25, -0.0]
    got = run(names, [x], dtype, backend)
    for k, name in enumerate(names):
        op, mode = name.split("_")
        want = np.array([_exact_op(op, float(a), 0.0, mode, dtype) for a in x[k]], dtype)
        assert_bits_equal(got[k], want, name)


# ------------------------------------------------------------------ conversions
SRC = {"float": np.float32, "double": np.float64, "int": np.int32, "uint": np.uint32,
       "ll": np.int64, "ull": np.uint64}
INT_RANGE = {"int": (-2 ** 31, 2 ** 31 - 1), "uint": (0, 2 ** 32 - 1),
             "ll": (-2 ** 63, 2 ** 63 - 1), "ull": (0, 2 ** 64 - 1)}
TO_INT = {"rn": round, "rz": math.trunc, "rd": math.floor, "ru": math.ceil}
# Triton's result types: unsigned results are held in int32 / int64
RESULT = {"float": np.float32, "double": np.float64, "int": np.int32, "uint": np.int32,
          "ll": np.int64, "ull": np.int64}
CONVERSIONS = [(s, d, m) for s, d in [("double", "float"), ("double", "int"), ("double", "uint"),
                                      ("float", "int"), ("float", "uint"), ("int", "float"),
                                      ("uint", "float"), ("float", "ll"), ("float", "ull"),
                                      ("double", "ll"), ("double", "ull"), ("ll", "float"),
                                      ("ull", "float"), ("ll", "double"), ("ull", "double")]
               for m in MODES] + [("int", "double", "rn"), ("uint", "double", "rn")]


def source_values(src, rng):
    t = SRC[src]
    if src in INT_RANGE:
        lo, hi = INT_RANGE[src]
        v = rng.integers(lo, hi, BLOCK, dtype=t, endpoint=True)
        v[:6] = [lo, hi, 0, 1, hi - 1, (1 << 24) + 1]      # 2**24 + 1: not a float32
        v[6:12] = v[6:12] >> rng.integers(0, 30, 6).astype(t)    # smaller magnitudes
        return v
    v = floats(t, rng, lo=-40, hi=70)
    v[16:28] = [0.5, 1.5, -0.5, -2.5, 2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** 32, 2.0 ** 63,
                -2.0 ** 64, 4294967295.5, 1e-40, -1e300 if t == np.float64 else -3e38]
    if t == np.float64:             # float32 ties and near-ties, and past float32's range
        base = rng.standard_normal(8).astype(np.float32).astype(np.float64)
        v[28:36] = base * (1 + 2.0 ** -24)
        v[36:40] = [3.5e38, -3.5e38, 2.0 ** -149 * 1.5, 2.0 ** -150]
    return v


def convert_ref(v, src, dst, mode):
    if dst in ("float", "double"):
        if isinstance(v, float) and not math.isfinite(v):
            return SRC[dst](v)
        return round_directed(F(int(v)) if src in INT_RANGE else F(float(v)), SRC[dst], mode,
                              zero_sign=math.copysign(1, float(v)))
    lo, hi = INT_RANGE[dst]
    if math.isnan(v):
        r = 0
    elif math.isinf(v):
        r = hi if v > 0 else lo
    else:
        r = max(lo, min(hi, TO_INT[mode](float(v))))
    held = {"int": np.int32, "uint": np.uint32, "ll": np.int64, "ull": np.uint64}[dst]
    return np.array(r, np.uint64 if dst == "ull" else np.int64).astype(held).view(RESULT[dst])


@pytest.mark.parametrize("src", list(SRC))
def test_conversions(src, rng, backend):
    convs = [c for c in CONVERSIONS if c[0] == src]
    for dst in dict.fromkeys(d for _, d, _ in convs):
        group = [c for c in convs if c[1] == dst]
        names = [f"{s}2{d}_{m}" for s, d, m in group]
        x = source_values(src, rng)
        got = run(names, [np.stack([x] * len(names))], RESULT[dst], backend)
        for k, (s, d, m) in enumerate(group):
            vals = [float(v) if src in ("float", "double") else int(v) for v in x]
            want = np.array([convert_ref(v, s, d, m) for v in vals], RESULT[dst])
            assert_bits_equal(got[k], want, names[k])


def test_bit_reinterpretations(rng, backend):
    f32, f64 = floats(np.float32, rng), floats(np.float64, rng)
    i32 = rng.integers(-2 ** 31, 2 ** 31, BLOCK, dtype=np.int32)
    u32 = rng.integers(0, 2 ** 32, BLOCK, dtype=np.uint32)
    i64 = rng.integers(-2 ** 63, 2 ** 63 - 1, BLOCK, dtype=np.int64)
    assert_bits_equal(run(["int_as_float"], [i32[None]], np.float32, backend)[0],
                      i32.view(np.float32), "int_as_float")
    assert_bits_equal(run(["uint_as_float"], [u32[None]], np.float32, backend)[0],
                      u32.view(np.float32), "uint_as_float")
    got = run(["float_as_int", "float_as_uint"], [np.stack([f32] * 2)], np.int32, backend)
    assert_bits_equal(got[0], f32.view(np.int32), "float_as_int")
    assert_bits_equal(got[1], f32.view(np.int32), "float_as_uint")
    assert_bits_equal(run(["longlong_as_double"], [i64[None]], np.float64, backend)[0],
                      i64.view(np.float64), "longlong_as_double")
    assert_bits_equal(run(["double_as_longlong"], [f64[None]], np.int64, backend)[0],
                      f64.view(np.int64), "double_as_longlong")
    got = run(["double2hiint", "double2loint"], [np.stack([f64] * 2)], np.int32, backend)
    assert_bits_equal(got[0], (f64.view(np.int64) >> 32).astype(np.int32), "double2hiint")
    assert_bits_equal(got[1], f64.view(np.int64).astype(np.int32), "double2loint")
    lo = rng.integers(-2 ** 31, 2 ** 31, BLOCK, dtype=np.int32)
    got = run(["hiloint2double"], [i32[None], lo[None]], np.float64, backend)[0]
    want = ((i32.astype(np.int64) << 32) | lo.view(np.uint32).astype(np.int64)).view(np.float64)
    assert_bits_equal(got, want, "hiloint2double")


# ------------------------------------------------------------------ integers
def ints(dtype, rng):
    info = np.iinfo(dtype)
    v = rng.integers(info.min, info.max, BLOCK, dtype=dtype, endpoint=True)
    v[:6] = [0, 1, info.max, info.min, 0x10 if info.bits == 32 else 1 << 40, 0xFF00]
    v[6:20] = (v[6:20] >> rng.integers(0, info.bits - 2, 14).astype(dtype)).astype(dtype)
    return v


def _bits(v, w):
    return int(v) & ((1 << w) - 1)


def _signed(v, w):
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["i32", "i64"])
def test_bit_counting(dtype, rng, backend):
    """clz, popc, ffs (int32 results), brev and integer abs (wrapping at the minimum)."""
    w = np.iinfo(dtype).bits
    x = ints(dtype, rng)
    got = run(["clz", "popc", "ffs"], [np.stack([x] * 3)], np.int32, backend)
    u = [_bits(v, w) for v in x]
    assert_bits_equal(got[0], np.array([w - b.bit_length() for b in u], np.int32), "clz")
    assert_bits_equal(got[1], np.array([bin(b).count("1") for b in u], np.int32), "popc")
    assert_bits_equal(got[2], np.array([(b & -b).bit_length() for b in u], np.int32), "ffs")
    got = run(["brev", "abs"], [np.stack([x] * 2)], dtype, backend)
    want = [_signed(int(format(b, f"0{w}b")[::-1], 2), w) for b in u]
    assert_bits_equal(got[0], np.array(want, dtype), "brev")
    assert_bits_equal(got[1], np.array([_signed(abs(int(v)), w) for v in x], dtype), "abs")


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64],
                         ids=["i32", "u32", "i64", "u64"])
def test_products_and_averages(dtype, rng, backend):
    info = np.iinfo(dtype)
    w, signed = info.bits, info.min < 0
    x, y = ints(dtype, rng), ints(dtype, rng)
    py = [(int(a), int(b)) for a, b in zip(x, y)]
    wrap = (lambda v: _signed(v, w)) if signed else (lambda v: v & ((1 << w) - 1))
    names = ["mulhi"] + (["mul24", "hadd", "rhadd"] if w == 32 else [])
    got = run(names, [np.stack([x] * len(names)), np.stack([y] * len(names))], dtype, backend)
    assert_bits_equal(got[0], np.array([wrap((a * b) >> w) for a, b in py], dtype), "mulhi")
    if w == 32:
        low24 = (lambda v: _signed(v, 24)) if signed else (lambda v: v & 0xFFFFFF)
        assert_bits_equal(got[1], np.array([wrap(low24(a) * low24(b)) for a, b in py], dtype),
                          "mul24")
        assert_bits_equal(got[2], np.array([(a + b) >> 1 for a, b in py], dtype), "hadd")
        assert_bits_equal(got[3], np.array([(a + b + 1) >> 1 for a, b in py], dtype), "rhadd")
        z = rng.integers(0, 2 ** 32, BLOCK, dtype=np.uint32)
        got = run(["sad"], [x[None], y[None], z[None]], dtype, backend)[0]
        want = [wrap(abs(a - b) + int(c)) for (a, b), c in zip(py, z)]
        assert_bits_equal(got, np.array(want, dtype), "sad")


def test_byte_perm(rng, backend):
    x, y = ints(np.int32, rng), ints(np.int32, rng)
    s = rng.integers(0, 2 ** 16, BLOCK, dtype=np.int32)
    s[:3] = [0x3210, 0x7654, 0x0123]
    got = run(["byte_perm"], [x[None], y[None], s[None]], np.int32, backend)[0]

    def ref(a, b, sel):
        v = _bits(b, 32) << 32 | _bits(a, 32)
        return _signed(sum(((v >> (8 * ((sel >> (4 * n)) & 7))) & 0xFF) << (8 * n)
                           for n in range(4)), 32)
    assert_bits_equal(got, np.array([ref(int(a), int(b), int(c)) for a, b, c in zip(x, y, s)],
                                    np.int32), "byte_perm")
