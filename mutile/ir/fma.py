"""Exact fused multiply-add over numpy arrays: ``a * b + c`` rounded once, bit exact.

The one definition every part of mutile uses (the semantics table, the constant folder,
the Pinghu interpreter). f32: the product is exact in f64; where the f64 sum could
double-round (it lands exactly on an f32 midpoint, or in the f32 subnormal range) the
element is redone with *round-to-odd* (its two-sum error decides the last bit) and then
rounded to f32, which is correctly rounded for every result, subnormals included (f64
has more than 24 + 2 bits). f64: Boldo and Melquiond's emulation (exact product by
Dekker/Veltkamp, exact sum, round-to-odd of the low parts, one final rounding); elements
outside its proven range (huge or tiny operands) are computed exactly with fractions.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

_SPLIT = 134217729.0            # 2**27 + 1


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_to_odd(s, err):
    """s rounded to odd given the exact error ``err`` of s (s is the nearest f64)."""
    bits = s.view(np.int64)
    even = (bits & 1) == 0
    step = np.where((err > 0) == (s > 0), 1, -1)
    fix = (err != 0) & even & np.isfinite(s)
    return np.where(fix, bits + step, bits).view(np.float64)


def fma_f32(a, b, c):
    """``a * b + c`` of f32 arrays (broadcast together), rounded once to f32.

    The f64 sum of the exact product and c is usually the answer's only rounding that
    matters; it can double-round only where it lands exactly on an f32 midpoint, or in
    the f32 subnormal range. Those (rare) elements are redone with round-to-odd."""
    p = a.astype(np.float64)
    p = p * b if p.shape != np.broadcast_shapes(p.shape, np.shape(b)) else \
        np.multiply(p, b, out=p)
    s = p + c
    out = s.astype(np.float32)
    redo = (s.view(np.int64) & 0x1FFFFFFF) == 0x10000000
    tiny = np.abs(out) < np.float32(2.0 ** -126)
    if tiny.any():
        redo |= tiny & (s != 0)
    if redo.any():
        pp, cc = np.broadcast_to(p, s.shape)[redo], np.broadcast_to(c, s.shape)[redo]
        ss, err = _two_sum(pp, cc.astype(np.float64))
        out[redo] = _round_to_odd(ss, err).astype(np.float32)
    return out


def _split(a):
    t = _SPLIT * a
    hi = t - (t - a)
    return hi, a - hi


def fma_f64(a, b, c):
    """``a * b + c`` of f64 arrays (broadcast together), rounded once."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    return _fma_f64(*(np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(-1)
                      for x in (a, b, c))).reshape(shape)


def _fma_f64(a, b, c):
    uh = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl
    th, tl = _two_sum(c, uh)
    v, ve = _two_sum(tl, ul)
    out = th + _round_to_odd(np.ascontiguousarray(v), ve)
    # outside the algorithm's range: non-finite inputs, huge operands, tiny products
    fin_ab = np.isfinite(a) & np.isfinite(b)
    mag = np.maximum(np.abs(a), np.abs(b))
    safe = fin_ab & np.isfinite(c) & (mag < 2.0 ** 995) & (np.abs(c) < 2.0 ** 1020) \
        & ((np.abs(uh) > 2.0 ** -960) | (a == 0) | (b == 0)) & (np.abs(uh) < 2.0 ** 1020)
    if safe.all():
        return out
    out = np.where(fin_ab, np.where(np.isfinite(c), out, c), uh + c)
    for i in np.flatnonzero(~safe & fin_ab & np.isfinite(c)):
        out.flat[i] = _exact_fma(a.flat[i], b.flat[i], c.flat[i])
    return out


def _exact_fma(x: float, y: float, z: float) -> float:
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    if exact == 0:       # the sign of an exact zero: IEEE sums of x*y and z
        return (x * y) + z if x * y != 0 or z != 0 else (0.0 * np.sign(x) * np.sign(y)) + z
    try:
        return float(exact)
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")


# ---------------------------------------------------------------- erf (fdlibm s_erf.c)
