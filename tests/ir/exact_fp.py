"""An exact oracle of mutile's conversion rules (docs/semantics.md, "Conversions").

Independent of ml_dtypes' and numpy's casts and of ``mutile.ir.semantics``: a source
bit pattern is decoded to its exact value (a :class:`fractions.Fraction`), rounded once
to nearest even at the destination's precision by the textbook definition (the
quantum ``2**q`` of the value's binade, ``n = v / 2**q``, the nearer integer, ties to
the even one), then encoded with the destination's overflow and NaN rules. One Python
object per element: slow, so the tests feed it a few thousand values at a time.

Types are named as :mod:`mutile.ir.types` names them: f64 f32 f16 bf16 f8e4m3 f8e5m2
f8e4b8 f8e5b16 (the "fnuz" fp8: bias 8 / 16, no infinity, no -0, NaN only 0x80),
i8 .. i64, u8 .. u64, i1. Arrays hold host values (ml_dtypes dtypes serve as bit
containers only: the oracle reads and writes their bits).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class Fmt:
    """A binary float format: ``ieee`` (all-ones exponent = inf/NaN), the OCP FP8
    e4m3 "fn" encoding (no infinity; only S.1111.111 is NaN) or, with ``bias`` given,
    "fnuz" (no infinity, no -0: the pattern 1.0000.000 is the only NaN)."""
    ebits: int
    mbits: int
    ieee: bool
    fnuz_bias: int = 0

    @property
    def width(self):
        return 1 + self.ebits + self.mbits

    @property
    def fnuz(self):
        return self.fnuz_bias != 0

    @property
    def bias(self):
        return self.fnuz_bias or 2 ** (self.ebits - 1) - 1

    @property
    def emin(self):
        return 1 - self.bias

    @property
    def max_bits(self):
        """Bits of the largest finite magnitude."""
        top = (2 ** self.ebits - 1) << self.mbits
        if self.fnuz:
            return top | (2 ** self.mbits - 1)
        return top - 1 if self.ieee else top | (2 ** self.mbits - 2)

    @property
    def inf_bits(self):
        return (2 ** self.ebits - 1) << self.mbits


FLOATS = {"f64": Fmt(11, 52, True), "f32": Fmt(8, 23, True), "f16": Fmt(5, 10, True),
          "bf16": Fmt(8, 7, True), "f8e4m3": Fmt(4, 3, False), "f8e5m2": Fmt(5, 2, True),
          "f8e4b8": Fmt(4, 3, False, 8), "f8e5b16": Fmt(5, 2, False, 16)}
INTS = {"i8": (8, True), "i16": (16, True), "i32": (32, True), "i64": (64, True),
        "u8": (8, False), "u16": (16, False), "u32": (32, False), "u64": (64, False)}
NAMES = list(FLOATS) + list(INTS) + ["i1"]
DTYPE = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
         "f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
         "f8e4b8": ml_dtypes.float8_e4m3fnuz, "f8e5b16": ml_dtypes.float8_e5m2fnuz, "i1": np.bool_,
         **{n: np.dtype(f"{'i' if s else 'u'}{w // 8}").type for n, (w, s) in INTS.items()}}
FP8 = ("f8e4m3", "f8e5m2", "f8e4b8", "f8e5b16")
NARROW = ("bf16",) + FP8


def uint_of(name):
    """The unsigned container of a float type's bits."""
    return np.dtype(f"u{FLOATS[name].width // 8}")


# ---------------------------------------------------------------- decode / encode
def decode(name, bits):
    """("nan", sign, payload) | ("inf", sign) | ("num", sign, |value| as a Fraction)."""
    f = FLOATS[name]
    sign = bits >> (f.width - 1)
    mag = bits & ((1 << (f.width - 1)) - 1)
    e, m = mag >> f.mbits, mag & ((1 << f.mbits) - 1)
    if f.fnuz and bits == 1 << (f.width - 1):
        return ("nan", sign, m)
    if f.ieee and e == 2 ** f.ebits - 1:
        return ("inf", sign) if m == 0 else ("nan", sign, m)
    if not f.ieee and not f.fnuz and mag == (1 << (f.width - 1)) - 1:
        return ("nan", sign, m)
    if e == 0:
        return ("num", sign, m * pow2(f.emin - f.mbits))
    return ("num", sign, (m + 2 ** f.mbits) * pow2(e - f.bias - f.mbits))


def pow2(k: int) -> Fraction:
    """2**k exactly, for any integer k."""
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


def floor_log2(v: Fraction) -> int:
    """floor(log2(v)) for v > 0, exactly."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if pow2(e) <= v else e - 1


def round_to(name, sign, v: Fraction):
    """The bits of ``(-1)**sign * v`` rounded once, to nearest even, into ``name``.
    Overflow (a rounded magnitude above the largest finite one) gives inf, or NaN for
    the fp8 formats without infinity; a result rounding to zero keeps the sign (fnuz
    formats have no -0: +0 there)."""
    f = FLOATS[name]
    s = 0 if f.fnuz else sign << (f.width - 1)
    if v == 0:
        return s
    q = max(floor_log2(v), f.emin) - f.mbits          # the quantum of v's binade is 2**q
    n = v / pow2(q)
    k = math.floor(n)
    if n - k > Fraction(1, 2) or (n - k == Fraction(1, 2) and k % 2 == 1):
        k += 1
    if k == 0:
        return s
    r = k * pow2(q)                                   # the rounded magnitude
    e = floor_log2(r)
    if e < f.emin:                                    # subnormal: bits are the multiple
        mag = int(r / pow2(f.emin - f.mbits))
    else:
        mag = ((e + f.bias) << f.mbits) | int(r / pow2(e - f.mbits)) - 2 ** f.mbits
    if mag > f.max_bits:
        return s | (f.inf_bits if f.ieee else qnan(name))
    return (sign << (f.width - 1)) | mag


def qnan(name):
    """The canonical positive quiet NaN (fnuz: the only NaN, 0x80)."""
    f = FLOATS[name]
    if f.fnuz:
        return 1 << (f.width - 1)
    return f.inf_bits | 1 << (f.mbits - 1) if f.ieee else (1 << (f.width - 1)) - 1


def nan_to(src, dst, sign, payload):
    """The NaN that converting a NaN of ``src`` gives in ``dst`` (docs/semantics.md)."""
    S, D = FLOATS[src], FLOATS[dst]
    s = sign << (D.width - 1)
    if dst in NARROW or src in FP8 or (src, dst) == ("bf16", "f16"):
        return s | qnan(dst)
    p = payload << (D.mbits - S.mbits) if D.mbits > S.mbits else payload >> (S.mbits - D.mbits)
    if (src, dst) in (("f32", "f64"), ("bf16", "f64"), ("f64", "f32")):
        p |= 1 << (D.mbits - 1)                        # quieted
    elif D.mbits < S.mbits and p == 0:
        p = 1                                          # truncated, kept a NaN
    return s | D.inf_bits | p


# ---------------------------------------------------------------- one element
def convert_one(x, src, dst):
    """``x`` (the source's bits for a float type, else a Python int / bool) converted:
    the destination's bits for a float type, else a Python int / bool."""
    if src == dst:
        return x                                       # no conversion: bits unchanged
    if src == "i1":
        x, src = int(x), "u8"
    if src in FLOATS:
        d = decode(src, x)
        if dst == "i1":
            return d[0] != "num" or d[2] != 0
        if dst in FLOATS:
            if d[0] == "nan":
                return nan_to(src, dst, d[1], d[2])
            if d[0] == "inf":
                D = FLOATS[dst]
                return d[1] << (D.width - 1) | (D.inf_bits if D.ieee else qnan(dst))
            return round_to(dst, d[1], d[2])
        return float_to_int(d, dst)
    if dst == "i1":
        return x != 0
    if dst in FLOATS:
        return round_to(dst, int(x < 0), Fraction(abs(x)))
    w, signed = INTS[dst]
    v = x % 2 ** w                                     # two's complement wrap-around
    return v - 2 ** w if signed and v >= 2 ** (w - 1) else v


def float_to_int(d, dst):
    """Truncate toward zero; NaN gives 0; out of range (inf included) saturates."""
    w, signed = INTS[dst]
    lo, hi = (-2 ** (w - 1), 2 ** (w - 1) - 1) if signed else (0, 2 ** w - 1)
    if d[0] == "nan":
        return 0
    if d[0] == "inf":
        return lo if d[1] else hi
    t = math.trunc(d[2]) * (-1 if d[1] else 1)
    return min(max(t, lo), hi)


# ---------------------------------------------------------------- arrays
def convert(x, src, dst):
    """The oracle on an array of ``src`` host values: an array of ``dst`` host values."""
    x = np.asarray(x)
    if src in FLOATS:
        items = x.view(uint_of(src)).ravel().tolist()
    else:
        items = [int(v) for v in x.ravel().tolist()]
    out = [convert_one(v, src, dst) for v in items]
    if dst in FLOATS:
        return np.array(out, uint_of(dst)).view(DTYPE[dst]).reshape(x.shape)
    return np.array(out, dtype=object).astype(DTYPE[dst]).reshape(x.shape)


# ---------------------------------------------------------------- inputs
def midpoints(dst, rng, k=24):
    """Exact halfway points between neighbouring finite values of float type ``dst``
    (every one for fp8, ``k`` random ones otherwise), the boundaries always: half the
    smallest subnormal, the subnormal/normal boundary, the overflow threshold."""
    f = FLOATS[dst]
    top = f.max_bits
    picks = range(top) if f.width == 8 else \
        [0, (1 << f.mbits) - 1, top - 1] + rng.integers(0, top, k).tolist()
    out = []
    for lo in picks:
        a, b = decode(dst, lo)[2], decode(dst, lo + 1)[2]
        out.append((a + b) / 2)
    a = decode(dst, top)[2]
    return out + [a + (a - decode(dst, top - 1)[2]) / 2]


def specials(src):
    """Zeros, the extreme finite and subnormal values, infinities and NaNs with payloads
    that stay, are quieted or truncate to zero (both signs) of float type ``src``."""
    f = FLOATS[src]
    m = (1 << f.mbits) - 1
    one = f.bias << f.mbits
    pos = {0, 1, 2, m - 1, m, m + 1, f.max_bits, f.max_bits - 1, one, one + 1}
    if f.ieee:
        q = 1 << (f.mbits - 1)
        pos |= {f.inf_bits, f.inf_bits + 1, f.inf_bits + q, f.inf_bits + m, f.inf_bits + q - 1,
                f.inf_bits + (1 << max(f.mbits - 10, 0)), f.inf_bits + (q >> 1)}
    else:
        pos.add(qnan(src))
    return [b | s for b in sorted(pos) for s in (0, 1 << (f.width - 1))]


def samples(src, n, rng):
    """``n`` values of type ``src`` (host dtype): its special values, then values at,
    next to and (for f64, by up to 2**-24 relative) around the ties and thresholds of
    every float type and the integer limits, then random bit patterns."""
    if src == "i1":
        return rng.integers(0, 2, n).astype(bool)
    if src in INTS:
        return _int_samples(src, n, rng)
    f = FLOATS[src]
    edges = []
    for dst in FLOATS:
        if dst != src:
            edges += [round_to(src, 0, v) for v in midpoints(dst, rng)]
    for w, _ in INTS.values():                       # integer limits, truncation
        edges += [round_to(src, 0, Fraction(v)) for v in (2 ** (w - 1), 2 ** w)]
    edges += [round_to(src, 0, Fraction(v, 4)) for v in (2, 3, 5, 6, 10, 514, 1022)]
    deltas = [-1, 0, 1] + ([(1 << 28) - 1, 1 << 28, (1 << 28) + 1] if src == "f64" else [])
    near = {e + s * d for e in edges for d in deltas for s in (1, -1)
            if 0 <= e + s * d <= f.max_bits}
    near = [b | (int(rng.integers(2)) << (f.width - 1)) for b in sorted(near)]
    rng.shuffle(near)
    first = specials(src) + near
    u = uint_of(src)
    rand = rng.integers(0, 2 ** f.width, n, dtype=np.uint64, endpoint=False) \
        if f.width < 64 else rng.integers(0, 2 ** 64, n, dtype=np.uint64, endpoint=False)
    bits = np.concatenate([np.array(first[:n], np.uint64), rand[:max(0, n - len(first))]])
    return bits.astype(u).view(DTYPE[src])


def _int_samples(src, n, rng):
    """Limits, integers at and next to the ties of every float type, random ones."""
    w, signed = INTS[src]
    lo, hi = (-2 ** (w - 1), 2 ** (w - 1) - 1) if signed else (0, 2 ** w - 1)
    first = [0, 1, -1, 2, lo, hi, lo + 1, hi - 1]
    ties = []
    for dst in FLOATS:          # integer ties: (2**p + m + 1/2) * 2**(e - p), e in range
        p, top = FLOATS[dst].mbits, w - 1 if signed else w
        for e in (rng.integers(p + 1, top, 8).tolist() if p + 1 < top else []):
            m = int(rng.integers(0, 2 ** p))
            ties.append(((2 ** (p + 1) + 2 * m + 1) << (e - p)) >> 1)
        ties += [int(v) for v in midpoints(dst, rng) if v.denominator == 1 and v <= hi]
    near = [s * (t + d) for t in ties for d in (-1, 0, 1) for s in (1, -1)]
    near = [v for v in near if lo <= v <= hi]
    rng.shuffle(near)
    first = [v for v in first if lo <= v <= hi] + near
    rand = rng.integers(0, 2 ** 64, n, dtype=np.uint64, endpoint=False) >> np.uint64(64 - w)
    vals = np.array(first[:n], dtype=object).astype(np.int64 if signed else np.uint64)
    rand = rand.astype(np.dtype(f"u{w // 8}")).view(DTYPE[src])
    return np.concatenate([vals.astype(DTYPE[src]), rand[:max(0, n - len(vals))]])
