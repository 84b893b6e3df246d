"""Rounding: to integers (rint, round, trunc), the directed-rounding arithmetic of
libdevice (``div_rz``, ``add_ru``, ``sqrt_rd``...) and its rounding conversions
(``float2int_rd``, ``double2float_rz``, ``ll2float_ru``...).

mutile's arithmetic rounds to nearest even. A directed result is the nearest one moved by
one ulp when the exact value lies on the wrong side of it; the side is the sign of the
exact error, which each operation recovers exactly: TwoSum for + and -, ``fma`` for the
product's error, the division's remainder ``a - q*b`` and the square root's ``x - s*s``
(where a residue could underflow, the operands are first scaled by a power of two, and a
product that rounded to zero takes its sign from the operands). Defined for float32 and
float64, as libdevice's are. A result that overflowed to infinity from finite operands
counts as just past the largest float, so round-toward-zero gives the largest finite value,
as IEEE says; an exact zero sum rounded down is -0 (IEEE 754, 6.3).
"""
from __future__ import annotations

from ...ir import types as T
from ._emit import Emit

MODES = ("rn", "rz", "rd", "ru")


# ------------------------------------------------------------ to integral values
def trunc(e: Emit, x):
    """Round toward zero (-0.5 gives -0.0)."""
    return e.where(e.lt(x, 0), e.fn("ceil", x), e.fn("floor", x))


def rint(e: Emit, x):
    """Round to the nearest integer, ties to even: below 2**mantissa, adding and taking
    away 2**mantissa rounds |x| in the float unit itself; the sign is put back on the bits."""
    mbits = Emit.layout(x.dtype)[0]
    big = 2.0 ** mbits
    a = e.abs(x)
    r = e.sub(e.add(a, big), big)
    return e.where(e.lt(a, big), e.copysign(r, x), x)


def round_half_away(e: Emit, x):
    """Round to the nearest integer, ties away from zero (libdevice's ``round``)."""
    t = trunc(e, x)
    frac = e.abs(e.sub(x, t))                  # exact: x and trunc(x) share the binade
    step = e.copysign(e.const(1.0, x.dtype), x)
    r = e.where(e.ge(frac, 0.5), e.add(t, step), t)
    return e.copysign(r, x)


TO_INTEGRAL = {"rn": rint, "rz": trunc, "rd": lambda e, x: e.fn("floor", x),
               "ru": lambda e, x: e.fn("ceil", x)}


# ------------------------------------------------------------ directed rounding
def directed(e: Emit, q, side, mode: str):
    """``q`` (the round-to-nearest result) moved to rounding ``mode`` given ``side``: a
    tile that is > 0 where the exact value is above ``q``, < 0 where below, 0 where ``q``
    is exact (an integer or float tile; only its sign is read)."""
    if mode == "rn":
        return q
    above, below = e.gt(side, 0), e.lt(side, 0)
    if mode == "rd":
        return e.where(below, e.next_down(q), q)
    if mode == "ru":
        return e.where(above, e.next_up(q), q)
    toward = e.any(e.all(e.gt(q, 0), below), e.all(e.lt(q, 0), above))
    return e.where(e.lt(q, 0), e.where(toward, e.next_up(q), q),
                   e.where(toward, e.next_down(q), q))


def _overflowed(e: Emit, q, *operands):
    """Where ``q`` is infinite although every operand is finite."""
    return e.all(e.isinf(q), *[e.isfinite(v) for v in operands])


def _with_overflow(e: Emit, side, q, *operands, exact=None):
    """``side`` with overflowed results marked as lying beyond the exact value (not where
    ``exact`` says the infinity is exact, as for x / 0)."""
    past = e.where(e.gt(q, 0), e.const(-1.0, q.dtype), e.const(1.0, q.dtype))
    over = _overflowed(e, q, *operands)
    if exact is not None:
        over = e.all(over, e.not_(exact))
    return e.where(over, past, e.where(e.isnan(side), 0.0, side))


def _tiny(x):
    """A magnitude below which residues may underflow, and the power of two that lifts
    them: 2**(emin + 2*mbits + 4) and 2**(2*mbits + 4)."""
    mbits, _, emin, _ = Emit.layout(x.dtype)
    return 2.0 ** (emin + 2 * mbits + 4), 2.0 ** (2 * mbits + 4)


def add(e: Emit, x, y, mode):
    s = e.add(x, y)
    bp = e.sub(s, x)
    err = e.add(e.sub(x, e.sub(s, bp)), e.sub(y, bp))      # TwoSum: x + y = s + err
    out = directed(e, s, _with_overflow(e, err, s, x, y), mode)
    if mode != "rd":
        return out
    # an exact zero sum rounds down to -0, unless both operands are +0 (IEEE 754 6.3)
    both_plus = e.all(e.eq(e.bits(x), 0), e.eq(e.bits(y), 0))
    zero = e.where(both_plus, e.const(0.0, s.dtype), e.const(-0.0, s.dtype))
    return e.where(e.eq(s, 0), zero, out)


def sub(e: Emit, x, y, mode):
    return add(e, x, e.neg(y), mode)


def mul(e: Emit, x, y, mode):
    p = e.mul(x, y)
    limit, lift = _tiny(p)
    small = e.lt(e.abs(p), limit)
    # scale the smaller operand (it is tiny when the product is) and p alike
    xs = e.lt(e.abs(x), e.abs(y))
    x2 = e.where(e.all(small, xs), e.mul(x, lift), x)
    y2 = e.where(e.all(small, e.not_(xs)), e.mul(y, lift), y)
    p2 = e.where(small, e.mul(p, lift), p)
    err = e.fma(x2, y2, e.neg(p2))                          # x*y - p, exactly
    # a product that rounded to zero: the exact one has the operands' signs
    signs = e.where(e.ne(e.signbit(x), e.signbit(y)), -1.0, 1.0)
    err = e.where(e.eq(p, 0), e.where(e.any(e.eq(x, 0), e.eq(y, 0)), 0.0, signs), err)
    return directed(e, p, _with_overflow(e, err, p, x, y), mode)


def div(e: Emit, x, y, mode):
    q = e.div(x, y)
    limit, lift = _tiny(q)
    small = e.lt(e.abs(x), limit)
    big_q = e.ge(e.abs(q), 1.0)
    q2 = e.where(e.all(small, e.not_(big_q)), e.mul(q, lift), q)
    y2 = e.where(e.all(small, big_q), e.mul(y, lift), y)
    x2 = e.where(small, e.mul(x, lift), x)
    r = e.fma(e.neg(q2), y2, x2)                           # x - q*y, exactly (scaled)
    side = e.where(e.lt(y, 0), e.neg(r), r)                # x/y - q has r's sign times y's
    by_zero = e.eq(y, 0)
    side = e.where(e.any(e.isinf(y), by_zero), 0.0, side)
    return directed(e, q, _with_overflow(e, side, q, x, y, exact=by_zero), mode)


def sqrt(e: Emit, x, mode):
    s = e.fn("sqrt", x)
    limit, lift = _tiny(s)                                 # lift is an even power of 2
    small = e.lt(x, limit)
    x2 = e.where(small, e.mul(x, lift), x)
    s2 = e.where(small, e.mul(s, lift ** 0.5), s)
    r = e.fma(e.neg(s2), s2, x2)                           # x - s*s
    r = e.where(e.any(e.isinf(x), e.eq(x, 0)), 0.0, r)
    return directed(e, s, r, mode)


def rcp(e: Emit, x, mode):
    return div(e, e.const(1.0, x.dtype), x, mode)


# ------------------------------------------------------------ conversions
def to_float(e: Emit, x, t: T.ScalarType, mode: str):
    """``x`` (an integer or a wider float) converted to float ``t`` with ``mode``: the
    nearest result, moved where converting it back shows it on the wrong side."""
    f = e.cast(x, t)
    if mode == "rn":
        return f
    src = x.dtype
    if src.is_floating():
        return directed(e, f, exact_side(e, x, e.cast(f, src)), mode)   # back: exact
    # integers: compare in 64-bit integers; a result of 2**63 (2**64) lies above any
    # int64 (uint64), where converting it back would saturate
    wide = T.i64 if src.is_int_signed() else T.u64
    xi = e.cast(x, wide)
    side = exact_side(e, xi, e.cast(f, wide))
    top = 2.0 ** (wide.bits - (1 if wide.is_int_signed() else 0))
    side = e.where(e.ge(e.cast(f, T.f64), top), -1, side)
    return directed(e, f, side, mode)


def to_int(e: Emit, x, t: T.ScalarType, mode: str):
    """Float ``x`` to integer type ``t``, rounded by ``mode`` (NaN gives 0, out of range
    saturates)."""
    return e.cast(TO_INTEGRAL[mode](e, x), t)


def exact_side(e: Emit, x, y):
    """-1, 0, 1 as ``x`` is below, equal to or above ``y`` (int32)."""
    return e.where(e.gt(x, y), 1, e.where(e.lt(x, y), -1, 0))


__all__ = ["MODES", "trunc", "rint", "round_half_away", "directed", "add", "sub", "mul", "div",
           "sqrt", "rcp", "to_float", "to_int", "exact_side"]
