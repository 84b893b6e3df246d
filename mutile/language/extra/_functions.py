"""libdevice's elementary functions that mutile has no single op for, composed from its
exp, log, sqrt, sin, cos, pow and arithmetic in the argument's own precision.

The compositions avoid the cancellations of the textbook formulas: ``log1p`` and
``expm1`` use Goldberg's and Kahan's corrections (the error of ``1 + x`` / ``exp(x)`` is
divided out), the hyperbolic functions go through them near zero, ``sinpi``/``cospi``
reduce the argument exactly before multiplying by pi, ``exp10`` carries the rounding error
of ``x * log2(10)`` as a correction, norms scale by the largest component, ``ldexp`` builds
its powers of two from bits and rounds once. Accuracies are stated and checked in
``tests/language/test_compat_libdevice.py``.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np

from ...ir import types as T
from ._emit import INT_OF, Emit
from ._rounding import rint, round_half_away

INF = float("inf")
LN2 = math.log(2.0)


def _split(value: Decimal, t: T.ScalarType):
    """``value`` as hi + lo with hi its rounding to ``t`` (numbers for constants of t)."""
    hi = float(value) if t == T.f64 else float(np.float32(float(value)))
    return hi, float(value - Decimal(hi))


with localcontext() as _ctx:
    _ctx.prec = 60
    _LOG2_10 = Decimal(10).ln() / Decimal(2).ln()


def log1p(e: Emit, x):
    u = e.add(x, 1.0)
    d = e.sub(u, 1.0)
    r = e.mul(e.fn("log", u), e.div(x, d))       # log(u) * x / (u - 1): u's error cancels
    r = e.where(e.eq(d, 0), x, r)
    return e.where(e.eq(x, INF), x, r)


def expm1(e: Emit, x):
    u = e.fn("exp", x)
    d = e.sub(u, 1.0)
    r = e.mul(d, e.div(x, e.fn("log", u)))       # (u - 1) * x / log(u)
    r = e.where(e.eq(u, 1.0), x, r)
    r = e.where(e.eq(d, -1.0), -1.0, r)
    return e.where(e.eq(u, INF), u, r)


def _exp_parts(e: Emit, a):
    """exp(a) for a >= 0 and the overflow-free (exp(a/2) / 2) * exp(a/2) above the
    threshold where exp itself overflows."""
    emax = Emit.layout(a.dtype)[3]
    big = e.ge(a, emax * LN2 - 1.0)
    ea = e.fn("exp", a)
    h = e.fn("exp", e.mul(a, 0.5))
    return big, ea, e.mul(e.mul(h, 0.5), h)


def sinh(e: Emit, x):
    a = e.abs(x)
    t = expm1(e, a)
    near0 = e.mul(e.add(t, e.div(t, e.add(t, 1.0))), 0.5)      # (e^a - e^-a) / 2 via expm1
    big, ea, huge = _exp_parts(e, a)
    far = e.where(big, huge, e.sub(e.mul(ea, 0.5), e.div(0.5, ea)))
    return e.copysign(e.where(e.lt(a, 1.0), near0, far), x)


def cosh(e: Emit, x):
    a = e.abs(x)
    big, ea, huge = _exp_parts(e, a)
    return e.where(big, huge, e.add(e.mul(ea, 0.5), e.div(0.5, ea)))


def _big(t: T.ScalarType) -> float:
    """Above this, sqrt(1 + x*x) is |x| to the precision of ``t``."""
    return 2.0 ** ((Emit.layout(t)[0] + 1) // 2 + 1)


def asinh(e: Emit, x):
    a = e.abs(x)
    aa = e.mul(a, a)
    mid = log1p(e, e.add(a, e.div(aa, e.add(1.0, e.fn("sqrt", e.add(1.0, aa))))))
    far = e.add(e.fn("log", a), LN2)
    return e.copysign(e.where(e.gt(a, _big(x.dtype)), far, mid), x)


def acosh(e: Emit, x):
    t = e.sub(x, 1.0)
    mid = log1p(e, e.add(t, e.fn("sqrt", e.add(e.mul(t, 2.0), e.mul(t, t)))))
    far = e.add(e.fn("log", x), LN2)
    return e.where(e.gt(x, _big(x.dtype)), far, mid)


def atanh(e: Emit, x):
    a = e.abs(x)
    r = e.mul(log1p(e, e.div(e.mul(a, 2.0), e.sub(1.0, a))), 0.5)
    return e.copysign(r, x)


def exp10(e: Emit, x):
    hi_c, lo_c = _split(_LOG2_10, x.dtype)
    hi = e.mul(x, hi_c)
    lo = e.add(e.fma(x, hi_c, e.neg(hi)), e.mul(x, lo_c))      # x*log2(10) - hi
    lo = e.where(e.isfinite(hi), lo, 0.0)
    p = e.fn("exp2", hi)
    return e.where(e.isfinite(p), e.fma(p, e.mul(lo, LN2), p), p)


def log10(e: Emit, x):
    return e.mul(e.fn("log2", x), math.log10(2.0))


def _reduce_pi(e: Emit, x):
    """x - 2*rint(x/2), in [-1, 1], exactly."""
    return e.sub(x, e.mul(rint(e, e.mul(x, 0.5)), 2.0))


def sinpi(e: Emit, x):
    r = _reduce_pi(e, x)
    a = e.abs(r)
    b = e.where(e.gt(a, 0.5), e.sub(1.0, a), a)                # exact for a in [1/2, 1]
    s = e.fn("sin", e.mul(b, math.pi))
    zero = e.copysign(e.const(0.0, x.dtype), x)
    return e.where(e.eq(s, 0), zero, e.copysign(s, r))


def cospi(e: Emit, x):
    a = e.abs(_reduce_pi(e, x))
    flip = e.gt(a, 0.5)
    c = e.where(flip, e.sub(1.0, a), a)                        # cos(pi a) = -cos(pi (1-a))
    v = e.where(e.lt(c, 0.25), e.fn("cos", e.mul(c, math.pi)),
                e.fn("sin", e.mul(e.sub(0.5, c), math.pi)))    # 0.5 - c exact there
    return e.where(flip, e.neg(v), v)


def tan(e: Emit, x):
    return e.div(e.fn("sin", x), e.fn("cos", x))


def cbrt(e: Emit, x):
    a = e.abs(x)
    y = e.pow(a, 1.0 / 3.0)
    y = e.add(y, e.div(e.sub(e.div(a, e.mul(y, y)), y), 3.0))   # one Newton step
    y = e.where(e.any(e.eq(a, 0), e.isinf(a)), a, y)
    return e.copysign(y, x)


def norm(e: Emit, *xs):
    """sqrt(sum of squares), scaled by the largest |x|: inf if any is inf, else NaN if
    any is NaN."""
    a = [e.abs(v) for v in xs]
    m = a[0]
    for v in a[1:]:
        m = e.max(m, v)
    total = None
    for v in a:
        q = e.div(v, m)
        total = e.mul(q, q) if total is None else e.fma(q, q, total)
    r = e.mul(m, e.fn("sqrt", total))
    r = e.where(e.eq(m, 0), m, r)
    r = e.where(e.any(*[e.isnan(v) for v in xs]), e.add(m, float("nan")), r)
    return e.where(e.any(*[e.isinf(v) for v in xs]), INF, r)


def fdim(e: Emit, x, y):
    return e.where(e.gt(x, y), e.sub(x, y), e.where(e.le(x, y), 0.0, e.add(x, y)))


def remainder(e: Emit, x, y):
    """IEEE remainder x - n*y, n = x/y rounded to nearest even, exactly: fmod by 2|y|,
    then at most two subtractions of |y| (fdlibm's scheme)."""
    t = x.dtype
    p = e.abs(y)
    maxf = float(2.0 ** Emit.layout(t)[3]) * (2 - 2.0 ** -Emit.layout(t)[0])
    r = e.where(e.le(p, maxf / 2), e.rem(x, e.mul(p, 2.0)), x)
    r = e.abs(r)
    small = e.lt(p, 2.0 ** (Emit.layout(t)[2] + 1))
    half = e.mul(p, 0.5)
    first = e.where(small, e.gt(e.add(r, r), p), e.gt(r, half))
    r1 = e.where(first, e.sub(r, p), r)
    second = e.all(first, e.where(small, e.ge(e.add(r1, r1), p), e.ge(r1, half)))
    r2 = e.where(second, e.sub(r1, p), r1)
    out = e.where(e.signbit(x), e.neg(r2), r2)
    return e.where(e.any(e.isinf(x), e.eq(y, 0), e.isnan(y)), e.add(e.sub(x, x), e.div(y, 0.0)),
                   out)


def ldexp(e: Emit, x, n):
    """x * 2**n rounded once (n an integer tile or number)."""
    t = x.dtype
    mbits, _, emin, emax = Emit.layout(t)
    sub = e.lt(e.abs(x), 2.0 ** emin)
    xs = e.where(sub, e.mul(x, 2.0 ** (mbits + 1)), x)         # normal, exactly
    ex = e.exponent(xs)
    keep = e.const(-(1 << (t.bits - 1)) | ((1 << mbits) - 1), INT_OF[t.bits])
    m = e.from_bits(e.or_(e.and_(e.bits(xs), keep), (Emit.layout(t)[1]) << mbits), t)  # [1, 2)
    if isinstance(n, int):
        k = max(min(n, 4096), -4096)
    else:
        k = e.cast(e.max(e.min(n, 4096), -4096), T.i32)
    total = e.add(e.sub(ex, e.where(sub, mbits + 1, 0)), k)
    total = e.max(e.min(total, emax + 1), emin - mbits - 2)
    lo, hi = e.lt(total, emin), e.gt(total, emax)
    ta = e.where(lo, e.add(total, mbits + 2), e.where(hi, emax, total))
    tb = e.where(lo, -(mbits + 2), e.where(hi, 1, 0))
    r = e.mul(e.mul(m, e.pow2(ta, t)), e.pow2(tb, t))
    return e.where(e.any(e.eq(x, 0), e.not_(e.isfinite(x))), x, r)


def ilogb(e: Emit, x):
    r = e.exponent(x)
    r = e.where(e.isinf(x), 2 ** 31 - 1, r)
    return e.where(e.any(e.eq(x, 0), e.isnan(x)), -2 ** 31, r)


def logb(e: Emit, x):
    r = e.cast(e.exponent(x), x.dtype)
    r = e.where(e.isinf(x), INF, r)
    r = e.where(e.eq(x, 0), -INF, r)
    return e.where(e.isnan(x), x, r)


def nextafter(e: Emit, x, y):
    r = e.where(e.lt(x, y), e.next_up(x), e.where(e.gt(x, y), e.next_down(x), y))
    return e.where(e.any(e.isnan(x), e.isnan(y)), e.add(x, y), r)


# ------------------------------------------------------------ inverse trigonometry
with localcontext() as _ctx:
    _ctx.prec = 60
    _SQRT3 = Decimal(3).sqrt()
    _PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")


def _pi(t, num: int, den: int):
    """(hi, lo): pi * num / den split for type ``t``."""
    with localcontext() as ctx:
        ctx.prec = 60
        return _split(_PI * num / den, t)


def _atan01(e: Emit, z):
    """atan(z) for z in [0, 1]: above tan(pi/12), atan(z) = pi/6 + atan(w) with
    w = (z sqrt3 - 1) / (z + sqrt3); then the odd series of atan(w), |w| <= 0.268."""
    t = z.dtype
    s_hi, s_lo = _split(_SQRT3, t)
    far = e.gt(z, 2 - math.sqrt(3))
    num = e.add(e.fma(z, s_hi, -1.0), e.mul(z, s_lo))
    w = e.where(far, e.div(num, e.add(z, s_hi)), z)
    w2 = e.mul(w, w)
    n = 8 if t.bits <= 32 else 16
    p = e.const((-1) ** n / (2 * n + 1), t)
    for k in range(n - 1, 0, -1):
        p = e.fma(p, w2, (-1) ** k / (2 * k + 1))
    r = e.fma(e.mul(w, w2), p, w)
    hi, lo = _pi(t, 1, 6)
    return e.where(far, e.add(e.add(r, lo), hi), r)


def _from_half_pi(e: Emit, r, times=1):
    """pi/2 - times * r, with pi/2 in two parts."""
    hi, lo = _pi(r.dtype, 1, 2)
    return e.add(e.sub(hi, e.mul(r, float(times))), lo)


def atan(e: Emit, x):
    a = e.abs(x)
    inv = e.gt(a, 1.0)
    r = _atan01(e, e.where(inv, e.div(1.0, a), a))
    return e.copysign(e.where(inv, _from_half_pi(e, r), r), x)


def atan2(e: Emit, y, x):
    ay, ax = e.abs(y), e.abs(x)
    steep = e.gt(ay, ax)
    r = _atan01(e, e.where(steep, e.div(ax, ay), e.div(ay, ax)))
    r = e.where(steep, _from_half_pi(e, r), r)
    pi_hi, pi_lo = _pi(x.dtype, 1, 1)
    r = e.where(e.signbit(x), e.add(e.sub(pi_hi, r), pi_lo), r)        # x < 0 or x = -0
    t = x.dtype
    zeros = e.all(e.eq(ay, 0), e.eq(ax, 0))
    r = e.where(zeros, e.where(e.signbit(x), e.const(pi_hi, t), e.const(0.0, t)), r)
    infs = e.all(e.isinf(ay), e.isinf(ax))
    quarter, three = e.const(_pi(t, 1, 4)[0], t), e.const(_pi(t, 3, 4)[0], t)
    r = e.where(infs, e.where(e.gt(x, 0), quarter, three), r)
    return e.copysign(r, y)


def _asin_half(e: Emit, a):
    """asin(a) for a in [0, 1/2]: atan(a / sqrt((1 - a)(1 + a)))."""
    return _atan01(e, e.div(a, e.fn("sqrt", e.mul(e.sub(1.0, a), e.add(1.0, a)))))


def asin(e: Emit, x):
    a = e.abs(x)
    b = e.fn("sqrt", e.mul(e.sub(1.0, a), 0.5))                   # exact 1 - a for a >= 1/2
    big = _from_half_pi(e, _asin_half(e, b), 2)                   # pi/2 - 2 asin(b)
    return e.copysign(e.where(e.gt(a, 0.5), big, _asin_half(e, a)), x)


def acos(e: Emit, x):
    a = e.abs(x)
    mid = _from_half_pi(e, e.copysign(_asin_half(e, a), x))         # pi/2 - asin(x)
    b = e.fn("sqrt", e.mul(e.sub(1.0, a), 0.5))
    twice = e.mul(_asin_half(e, b), 2.0)                             # acos(|x|) for |x| > 1/2
    pi_hi, pi_lo = _pi(x.dtype, 1, 1)
    neg = e.add(e.sub(pi_hi, twice), pi_lo)
    return e.where(e.gt(a, 0.5), e.where(e.lt(x, 0), neg, twice), mid)


def saturate(e: Emit, x):
    return e.min(e.max(x, 0.0), 1.0)            # a NaN loses to 0 (maximumNumber)


__all__ = ["log1p", "expm1", "sinh", "cosh", "asinh", "acosh", "atanh", "exp10", "log10",
           "sinpi", "cospi", "tan", "cbrt", "norm", "fdim", "remainder", "ldexp", "ilogb",
           "logb", "nextafter", "saturate", "round_half_away", "atan", "atan2", "asin", "acos"]
