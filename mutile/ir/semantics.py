"""One table of scalar semantics: what each elementwise op computes, in numpy.

The constant folder, the backends' test oracle and (later) the Pinghu interpreter all
evaluate elementwise ops through :func:`evaluate`, so they cannot disagree. Floats
narrower than f32 (f16, bf16, fp8) compute in f32 and round once to their type, which
is exactly the correctly rounded result for + - * / and sqrt. Conversions
(:func:`convert`) round once from the exact value; those through a narrow float are
computed here on the bits, independent of the installed ml_dtypes. Integer semantics are
those of C on two's-complement machines without undefined behaviour:
wrap-around, truncating division, ``x / 0 == -1``, ``x % 0 == x``, shifts by >= the
width give 0 (or the sign fill for arithmetic right shifts).

``EXACT`` lists the ops whose results here are bit-exact on every backend (the folder
only folds those); transcendental ops are approximations, checked with a tolerance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .types import FP8, ScalarType, f32, f64, scalar_from_numpy, u8

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _compute_dtype(t: ScalarType):
    if t.is_floating():
        return np.float64 if t == f64 else np.float32
    return t.to_numpy()


def _div(a, b, t):
    if t.is_floating():
        return a / b
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    if t.is_int_signed():
        # floor division (wraps for INT_MIN / -1), then step toward zero when inexact
        q = np.floor_divide(a, safe)
        inexact = np.fmod(a, safe) != 0
        q = np.where(inexact & ((a < 0) != (safe < 0)), q + np.array(1, a.dtype), q)
    else:
        q = a // safe
    return np.where(b == 0, np.array(-1).astype(a.dtype) if t.is_int_signed() else
                    np.array(np.iinfo(a.dtype).max, a.dtype), q).astype(a.dtype)


def _rem(a, b, t):
    if t.is_floating():
        return np.fmod(a, b)
    safe = np.where(b == 0, 1, b).astype(a.dtype)
    r = np.fmod(a, safe) if t.is_int_signed() else a % safe
    return np.where(b == 0, a, r).astype(a.dtype)


def _shift(a, b, t, left):
    width = a.dtype.itemsize * 8
    bb = b.astype(np.uint64)
    big = bb >= width
    s = np.where(big, 0, bb).astype(a.dtype)
    if left:
        return np.where(big, 0, np.left_shift(a, s)).astype(a.dtype)
    fill = np.where(a < 0, -1, 0).astype(a.dtype) if t.is_int_signed() else 0
    return np.where(big, fill, np.right_shift(a, s)).astype(a.dtype)


def float_minmax(a, b, is_max: bool):
    """IEEE 754-2019 minimumNumber/maximumNumber: a NaN loses to a number, and -0 < +0
    (equal operands otherwise are the same number). Every backend computes this."""
    out = np.fmax(a, b) if is_max else np.fmin(a, b)
    a, b = np.asarray(a), np.asarray(b)
    eq = a == b
    if np.any(eq):      # +-0: max takes +0 if either is (bitwise and), min -0 (bitwise or)
        u = np.dtype(f"u{a.dtype.itemsize}")
        bits = (a.view(u) & b.view(u)) if is_max else (a.view(u) | b.view(u))
        out = np.where(eq, bits.view(a.dtype), out)
    return out


def _cmp(a, b, t, pred):
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}[pred](a, b)


def _abs(x, t):
    return np.abs(x) if t.is_floating() or t.is_int_signed() else x


def _rsqrt(x):
    return (1 / np.sqrt(x)).astype(x.dtype)


# op name -> f(args (numpy arrays in the compute dtype), scalar type, attrs) -> array
ELEMENTWISE = {
    "add": lambda a, t, at: a[0] + a[1],
    "sub": lambda a, t, at: a[0] - a[1],
    "mul": lambda a, t, at: a[0] * a[1],
    "div": lambda a, t, at: _div(a[0], a[1], t),
    "rem": lambda a, t, at: _rem(a[0], a[1], t),
    "min": lambda a, t, at: float_minmax(a[0], a[1], False) if t.is_floating() else
    np.minimum(a[0], a[1]),
    "max": lambda a, t, at: float_minmax(a[0], a[1], True) if t.is_floating() else
    np.maximum(a[0], a[1]),
    "and": lambda a, t, at: a[0] & a[1],
    "or": lambda a, t, at: a[0] | a[1],
    "xor": lambda a, t, at: a[0] ^ a[1],
    "shl": lambda a, t, at: _shift(a[0], a[1], t, True),
    "shr": lambda a, t, at: _shift(a[0], a[1], t, False),
    "pow": lambda a, t, at: np.power(a[0], a[1]),
    "cmp": lambda a, t, at: _cmp(a[0], a[1], t, at["pred"]),
    "neg": lambda a, t, at: -a[0],
    "abs": lambda a, t, at: _abs(a[0], t),
    "not": lambda a, t, at: ~a[0],
    "exp": lambda a, t, at: np.exp(a[0]),
    "exp2": lambda a, t, at: np.exp2(a[0]),
    "log": lambda a, t, at: np.log(a[0]),
    "log2": lambda a, t, at: np.log2(a[0]),
    "sqrt": lambda a, t, at: np.sqrt(a[0]),
    "rsqrt": lambda a, t, at: _rsqrt(a[0]),
    "sin": lambda a, t, at: np.sin(a[0]),
    "cos": lambda a, t, at: np.cos(a[0]),
    "tanh": lambda a, t, at: np.tanh(a[0]),
    "erf": lambda a, t, at: _erf(a[0]).astype(a[0].dtype),
    "floor": lambda a, t, at: np.floor(a[0]),
    "ceil": lambda a, t, at: np.ceil(a[0]),
    "fma": lambda a, t, at: _fma(a[0], a[1], a[2]),
    "select": lambda a, t, at: np.where(a[0], a[1], a[2]),
}

EXACT = frozenset({"add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl",
                   "shr", "cmp", "neg", "abs", "not", "sqrt", "floor", "ceil", "select", "cast",
                   "bitcast", "fma"})


def _fma(a, b, c):
    """a*b+c rounded once (:mod:`mutile.ir.fma`: exact for f32 and f64)."""
    from .fma import fma_f32, fma_f64
    return fma_f32(a, b, c) if a.dtype == np.float32 else fma_f64(a, b, c)


def evaluate(name: str, attrs: dict, args: list, result: ScalarType, operand: ScalarType):
    """Evaluate elementwise op ``name`` on numpy arrays of the operands' host dtype.

    Returns an array of ``result``'s host dtype (same broadcast shape as the args).
    """
    if name == "cast":
        return convert(args[0], operand, result)
    if name == "bitcast":
        x = np.asarray(args[0])  # ascontiguousarray would make a 0-d array 1-d
        return np.ascontiguousarray(x).view(result.to_numpy()).reshape(x.shape)
    if operand.is_bool() and name not in ("cmp", "select"):
        # i1 is a 1-bit unsigned integer (add is xor, -x is x): compute in u8, keep bit 0
        wide = evaluate(name, attrs, [np.asarray(x).astype(np.uint8) for x in args], u8, u8)
        return (wide & 1).astype(np.bool_)
    t = operand if name != "select" else result
    ct = _compute_dtype(t)
    with np.errstate(all="ignore"):
        conv = [np.asarray(x) if (name == "select" and i == 0) else _to_compute(x, t, ct)
                for i, x in enumerate(args)]
        out = np.asarray(ELEMENTWISE[name](conv, t, attrs))
        if _narrow_float(result):
            return convert(out, scalar_from_numpy(out.dtype), result)   # rounded once
        return out.astype(result.to_numpy())


def _narrow_float(t: ScalarType) -> bool:
    return t.is_floating() and t.bits < 32


def _to_compute(x, t: ScalarType, ct):
    """Operand ``x`` of type ``t`` in its compute dtype ``ct`` (narrow floats exactly
    to f32)."""
    return convert(x, t, f32) if _narrow_float(t) else np.asarray(x).astype(ct)


# ---------------------------------------------------------------- conversions
# mutile's rules (docs/semantics.md, "Conversions"): every conversion rounds once, to
# nearest even, from the exact source value. :func:`convert_exact` computes any
# conversion to a float on the bits; :func:`convert` uses it where numpy's / ml_dtypes'
# casts differ from the rules in some version, and those (faster) casts elsewhere.
@dataclass(frozen=True)
class FloatFormat:
    """A binary float format. ``ieee``: the all-ones exponent encodes inf/NaN; otherwise
    (OCP FP8 e4m3 "fn") there is no infinity and only the all-ones pattern is NaN.
    ``fnuz`` (finite, unsigned zero: fp8 e4m3fnuz / e5m2fnuz): no infinity, no -0, the
    one NaN is the sign bit alone (its ``qnan``, sign included), every other pattern a
    number; a result rounding to zero is +0. ``exp_bias`` overrides the IEEE bias."""

    name: str
    ebits: int
    mbits: int
    ieee: bool
    fnuz: bool = False
    exp_bias: int | None = None

    @property
    def width(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1 if self.exp_bias is None else self.exp_bias

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)

    @property
    def abs_mask(self) -> int:
        return self.sign_bit - 1

    @property
    def mant_mask(self) -> int:
        return (1 << self.mbits) - 1

    @property
    def inf_bits(self) -> int:
        """Bits of +inf (IEEE) or of the all-ones exponent (non-IEEE)."""
        return ((1 << self.ebits) - 1) << self.mbits

    @property
    def quiet_bit(self) -> int:
        return 1 << (self.mbits - 1)

    @property
    def max_finite(self) -> int:
        if self.fnuz:
            return self.abs_mask
        return self.inf_bits - 1 if self.ieee else self.abs_mask - 1

    @property
    def qnan(self) -> int:
        """Canonical positive quiet NaN (fnuz: the only NaN, the sign bit alone)."""
        if self.fnuz:
            return self.sign_bit
        return self.inf_bits | self.quiet_bit if self.ieee else self.abs_mask

    @property
    def uint(self) -> np.dtype:
        return np.dtype(f"u{self.width // 8}")


FLOAT_FORMATS = {f.name: f for f in (
    FloatFormat("f64", 11, 52, True), FloatFormat("f32", 8, 23, True),
    FloatFormat("f16", 5, 10, True), FloatFormat("bf16", 8, 7, True),
    FloatFormat("f8e4m3", 4, 3, False), FloatFormat("f8e5m2", 5, 2, True),
    FloatFormat("f8e4b8", 4, 3, False, True, 8), FloatFormat("f8e5b16", 5, 2, False, True, 16))}

# What converting a NaN keeps (the sign always): CANONICAL gives the destination's
# canonical quiet NaN; KEEP shifts the payload (narrowing: truncates it, and a payload
# truncated to 0 becomes 1 so the result stays a NaN); QUIET shifts it and sets the
# quiet bit.
CANONICAL, KEEP, QUIET = "canonical", "keep", "quiet"


def nan_policy(src: str, dst: str) -> str:
    """The NaN rule of a float -> float conversion (format names)."""
    if dst == "bf16" or dst in FP8 or src in FP8 \
            or (src, dst) == ("bf16", "f16"):
        return CANONICAL
    if (src, dst) in (("f32", "f64"), ("bf16", "f64"), ("f64", "f32")):
        return QUIET
    return KEEP


_U64 = np.uint64


def _bit_length(v):
    """Bits needed for each uint64 ``v`` (0 for 0), as int64."""
    n = np.zeros(v.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = v >= _U64(1 << s)
        n += np.where(big, s, 0)
        v = np.where(big, v >> _U64(s), v)
    return n + (v != 0)


def _decode(x, src: ScalarType):
    """(negative, significand uint64, exponent int64) with |x| = sig * 2**exp exactly,
    and the NaN / infinity masks (all False for integers)."""
    if src.is_int():
        w = np.asarray(x).astype(np.int64 if src.is_int_signed() else np.uint64)
        neg = w < 0
        u = w.astype(np.int64).view(_U64) if src.is_int_signed() else w
        sig = np.where(neg, ~u + _U64(1), u)            # |INT64_MIN| = 2**63 fits
        false = np.zeros(sig.shape, bool)
        return neg, sig, np.zeros(sig.shape, np.int64), false, false
    f = FLOAT_FORMATS[src.name]
    bits = np.ascontiguousarray(x).view(f.uint).astype(_U64)
    neg = (bits >> _U64(f.width - 1)) != 0
    a = bits & _U64(f.abs_mask)
    e = (a >> _U64(f.mbits)).astype(np.int64)
    m = a & _U64(f.mant_mask)
    sig = np.where(e == 0, m, m | _U64(1 << f.mbits))
    exp = np.maximum(e, 1) - (f.bias + f.mbits)
    if f.ieee:
        return neg, sig, exp, a > _U64(f.inf_bits), a == _U64(f.inf_bits)
    if f.fnuz:
        return neg, sig, exp, bits == _U64(f.sign_bit), np.zeros(a.shape, bool)
    return neg, sig, exp, a == _U64(f.abs_mask), np.zeros(a.shape, bool)


def _round_bits(sig, exp, d: FloatFormat):
    """|bits| of ``sig * 2**exp`` rounded once to nearest even into ``d`` (uint64); a
    magnitude above the largest finite one gives inf, or NaN without infinities."""
    lead = _bit_length(sig) - 1 + exp                   # exponent of the leading bit
    q = np.maximum(lead, 1 - d.bias) - d.mbits          # the quantum: 2**q
    s = q - exp                                         # bits dropped (<= 0: exact)
    exact = sig << np.clip(-s, 0, 63).astype(_U64)
    sc = np.clip(s, 1, 64).astype(_U64)
    keep = (sig >> (sc - _U64(1))) >> _U64(1)           # two shifts: sc may be 64
    rest = sig - ((keep << (sc - _U64(1))) << _U64(1))
    half = _U64(1) << (sc - _U64(1))
    up = ((rest > half) | ((rest == half) & ((keep & _U64(1)) == 1))) & (s <= 64)
    n = np.where(s <= 0, exact, keep + up.astype(_U64))
    carry = (n >> _U64(d.mbits + 1)) != 0               # rounded up to the next binade
    n = np.where(carry, n >> _U64(1), n)
    q = q + carry
    normal = (n >> _U64(d.mbits)) != 0
    biased = np.where(normal, q + d.mbits + d.bias, 0)
    over = biased > (1 << d.ebits) - 1
    mag = (np.minimum(biased, (1 << d.ebits) - 1).astype(_U64) << _U64(d.mbits)) \
        | (n & _U64(d.mant_mask))
    over |= mag > _U64(d.max_finite)
    return np.where(over, _U64(d.inf_bits if d.ieee else d.qnan), mag)


def _nan_bits(x, s: FloatFormat, d: FloatFormat):
    """|bits| of the NaN each NaN of ``x`` (format ``s``) converts to in ``d``."""
    policy = nan_policy(s.name, d.name)
    if policy == CANONICAL:
        return _U64(d.qnan)
    m = np.ascontiguousarray(x).view(s.uint).astype(_U64) & _U64(s.mant_mask)
    p = m << _U64(d.mbits - s.mbits) if d.mbits > s.mbits else m >> _U64(s.mbits - d.mbits)
    if policy == QUIET:
        p = p | _U64(d.quiet_bit)
    else:
        p = np.where(p == 0, _U64(1), p)                # only narrowing can truncate to 0
    return p | _U64(d.inf_bits)


def convert_exact(x, src: ScalarType, dst: ScalarType):
    """``x`` (numbers of type ``src``) converted to float type ``dst`` by mutile's rules,
    computed on the bits (no numpy or ml_dtypes cast involved)."""
    x = _typed(x, src)
    shape = x.shape
    x = x.reshape(-1)
    if src.is_bool():
        x, src = x.astype(np.uint8), u8
    d = FLOAT_FORMATS[dst.name]
    with np.errstate(all="ignore"):
        neg, sig, exp, nan, inf = _decode(x, src)
        mag = _round_bits(sig, exp, d)
        mag = np.where(inf, _U64(d.inf_bits if d.ieee else d.qnan), mag)
        if src.is_floating():
            mag = np.where(nan, _nan_bits(x, FLOAT_FORMATS[src.name], d), mag)
        bits = mag | np.where(neg, _U64(d.sign_bit), _U64(0))
        if d.fnuz:                                      # no -0: a zero result is +0
            bits = np.where(mag == 0, _U64(0), bits)
    return bits.astype(d.uint).view(dst.to_numpy()).reshape(shape)


def _host_cast_agrees(src: ScalarType, dst: ScalarType) -> bool:
    """Whether numpy's / ml_dtypes' own cast to float ``dst`` follows mutile's rules on
    every supported version (tests/ir/test_convert.py checks it against the exact
    oracle): IEEE casts to f32/f64 from f32, f64 and integers; float -> float except f64
    -> bf16/fp8, which ml_dtypes before 0.7 rounds twice (through f32), and the fnuz fp8
    formats (f8e4b8, f8e5b16) either way. The host cast is
    used there only because it is much faster."""
    if src.is_int():
        return dst.name in ("f32", "f64")
    if FLOAT_FORMATS[src.name].fnuz or FLOAT_FORMATS[dst.name].fnuz:
        return False        # not checked on ml_dtypes < 0.7: always the bit path
    return not (src == f64 and (dst.name == "bf16" or dst.name in FP8))


def convert(x, src: ScalarType, dst: ScalarType):
    """Numeric conversion with mutile's rules (docs/semantics.md): to a float, round
    once to nearest even from the exact value (overflow gives inf, or NaN in the fp8
    formats without infinity: f8e4m3, f8e4b8, f8e5b16);
    float -> int truncates toward zero, NaN gives 0 and out of range saturates; int ->
    int wraps; to i1 is ``x != 0``. Returns an array of ``dst``'s host dtype."""
    x = _typed(x, src)
    with np.errstate(all="ignore"):
        return _convert(x.reshape(-1), src, dst).reshape(x.shape)


def _typed(x, src: ScalarType):
    """``x`` as an array of ``src``'s host dtype (Python numbers converted exactly)."""
    x = np.asarray(x)
    if x.dtype == src.to_numpy():
        return x
    t = scalar_from_numpy(x.dtype)
    with np.errstate(all="ignore"):
        if t is None:
            return x.astype(src.to_numpy())
        return _convert(x.reshape(-1), t, src).reshape(x.shape)


def _convert(x, src: ScalarType, dst: ScalarType):
    if dst.is_bool():
        return x != 0
    if src.is_bool():
        x, src = x.astype(np.uint8), u8
    if src == dst:
        return x.copy()
    if dst.is_floating():
        if _host_cast_agrees(src, dst):
            return x.astype(dst.to_numpy())
        return convert_exact(x, src, dst)
    if src.is_floating():
        return _float_to_int(x.astype(np.float64), dst)      # exact widening first
    return x.astype(dst.to_numpy())


def _float_to_int(x, dst: ScalarType):
    """Truncate toward zero, NaN -> 0, saturate out of range (f32/f64 ``x``)."""
    info = np.iinfo(dst.to_numpy())
    w = x.astype(np.float64)
    w = np.trunc(np.where(np.isnan(w), 0, w))
    w = np.clip(w, info.min, info.max)
    # f64 cannot hold 2**63-1 / 2**64-1: clip in float, fix the top end exactly
    top = w >= float(info.max)
    res = np.where(top, 0, w).astype(dst.to_numpy())
    return np.where(top, np.array(info.max, dst.to_numpy()), res)
