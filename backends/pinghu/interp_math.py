"""Exact and fast vectorized arithmetic the interpreter needs beyond numpy's ufuncs.

* :func:`fma_f32`, :func:`fma_f64`: ``a * b + c`` rounded once, bit exact, as vector code.
  f32: the product is exact in f64; where the f64 sum could double-round, it is made
  *round-to-odd* (its error from a two-sum decides the last bit) and then rounded to f32,
  which is correctly rounded for every result, subnormals included (f64 has more than
  24 + 2 bits). f64: Boldo and
  Melquiond's emulation (exact product by Dekker/Veltkamp, exact sum, round-to-odd of
  the low parts, one final rounding). Elements outside its proven range (huge or tiny
  operands, where a split would overflow or a product error underflow) are computed
  exactly with fractions, one by one; there are normally none.
* :func:`erf_f64`: fdlibm's ``s_erf.c`` (the algorithm glibc's ``erf`` uses) written
  over arrays; within 1 ulp of ``math.erf``, and in practice equal to it.
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
    a, b, c = (np.ascontiguousarray(x) for x in np.broadcast_arrays(
        np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64)))
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
_EFX, _EFX8, _ERX = 1.28379167095512586316e-01, 1.02703333676410069053e+00, \
    8.45062911510467529297e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
       5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
       7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02,
       1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)


def _poly(coeffs, z):
    """c0 + z*(c1 + z*(c2 + ...)) in fdlibm's evaluation order."""
    acc = coeffs[-1]
    for c in coeffs[-2::-1]:
        acc = c + z * acc
    return acc


def erf_f64(x):
    """erf of an f64 array, evaluated as fdlibm does, branch by branch over the array."""
    with np.errstate(all="ignore"):
        return _erf(np.asarray(x, np.float64))


def _erf(x):
    ix = (x.view(np.uint64) >> np.uint64(32)).astype(np.int64) & 0x7FFFFFFF
    neg = np.signbit(x)
    ax = np.abs(x)
    # |x| < 0.84375
    z = x * x
    small = x + x * (_poly(_PP, z) / _poly(_QQ, z))
    small = np.where(ix < 0x3E300000, np.where(ix < 0x00800000, 0.125 * (8.0 * x + _EFX8 * x),
                                               x + _EFX * x), small)
    # 0.84375 <= |x| < 1.25
    s = ax - 1.0
    pq = _poly(_PA, s) / _poly(_QA, s)
    mid = np.where(neg, -_ERX - pq, _ERX + pq)
    # 1.25 <= |x| < 6
    s = 1.0 / (ax * ax)
    lo_rs = _poly(_RA, s) / _poly(_SA, s)
    hi_rs = _poly(_RB, s) / _poly(_SB, s)
    rs = np.where(ix < 0x4006DB6E, lo_rs, hi_rs)
    zz = (ax.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
    r = np.exp(-zz * zz - 0.5625) * np.exp((zz - ax) * (zz + ax) + rs)
    tail = np.where(neg, r / ax - 1.0, 1.0 - r / ax)
    out = np.where(ix < 0x3FEB0000, small, np.where(ix < 0x3FF40000, mid, tail))
    out = np.where(ix >= 0x40180000, np.where(neg, -1.0, 1.0), out)
    return np.where(np.isnan(x), x, out)
