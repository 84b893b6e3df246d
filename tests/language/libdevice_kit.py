"""Shared by the libdevice tests: one kernel that applies a list of libdevice functions
(named by a constexpr tuple) to rows of inputs, and exact oracles (directed rounding of
a Fraction, ulp distances against long-double references)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import mutile
import mutile.language as ml
from mutile.language.extra import libdevice

from ..conftest import poison

BLOCK = 128            # elements per function


@mutile.jit
def apply_all(X0, X1, X2, X3, O, NAMES: ml.constexpr, NARGS: ml.constexpr,
              BLOCK: ml.constexpr):
    """O[k] = libdevice.NAMES[k](X0[k], X1[k], ...) for every k, with the result dtype
    checked against O's."""
    i = ml.arange(0, BLOCK)
    for k in ml.static_range(len(NAMES)):
        f = getattr(libdevice, NAMES[k])
        row = k * BLOCK + i
        a = ml.load(X0 + row)
        if NARGS == 1:
            r = f(a)
        elif NARGS == 2:
            r = f(a, ml.load(X1 + row))
        elif NARGS == 3:
            r = f(a, ml.load(X1 + row), ml.load(X2 + row))
        else:
            r = f(a, ml.load(X1 + row), ml.load(X2 + row), ml.load(X3 + row))
        ml.static_assert(r.dtype == O.dtype.element_ty, "result dtype differs from Triton's")
        ml.store(O + row, r)


def run(names, args, out_dtype, backend):
    """Apply ``names`` to ``args`` (one (len(names), BLOCK) array per argument); returns
    the (len(names), BLOCK) results, from a poisoned output."""
    names = tuple(names)
    args = [np.ascontiguousarray(a) for a in args]
    pad = args + [args[0]] * (4 - len(args))
    out = poison((len(names), BLOCK), out_dtype)
    apply_all[(1,)](*pad, out, NAMES=names, NARGS=len(args), BLOCK=BLOCK, backend=backend)
    return out


# ------------------------------------------------------------------ exact oracles
def _next(v, dtype, up: bool):
    return np.nextafter(dtype(v), dtype(np.inf if up else -np.inf))


def round_directed(q, dtype, mode: str, zero_sign: float = 1.0):
    """The exact value ``q`` (a Fraction, or +-inf) rounded to ``dtype`` by ``mode``
    ("rn" to nearest even, "rz" toward zero, "rd" down, "ru" up). An exact zero gets the
    sign of ``zero_sign``."""
    dtype = np.dtype(dtype).type
    if isinstance(q, float):                       # inf
        return dtype(q)
    if q == 0:
        return dtype(math.copysign(0.0, zero_sign))
    top = Fraction(float(np.finfo(dtype).max))
    if q > top or q < -top:
        big, inf = np.finfo(dtype).max, np.inf
        if q > 0:
            lo, hi = dtype(big), dtype(inf)
        else:
            lo, hi = dtype(-inf), dtype(-big)
        if mode == "rn":                           # beyond max + half an ulp: inf
            edge = top + Fraction(float(big - _next(big, dtype, False))) / 2
            sign = 1.0 if q > 0 else -1.0
            return dtype(sign * inf) if abs(q) >= edge else dtype(sign * big)
    else:
        c = dtype(float(q))
        if not np.isfinite(c):
            c = dtype(np.copysign(np.finfo(dtype).max, float(q)))
        while Fraction(float(c)) > q:
            c = _next(c, dtype, False)
        while np.isfinite(_next(c, dtype, True)) and Fraction(float(_next(c, dtype, True))) <= q:
            c = _next(c, dtype, True)
        lo = c
        hi = c if Fraction(float(c)) == q else _next(c, dtype, True)
    if lo == hi:
        r = lo
    elif mode == "rd":
        r = lo
    elif mode == "ru":
        r = hi
    elif mode == "rz":
        r = lo if q > 0 else hi
    else:
        dl, dh = q - Fraction(float(lo)), Fraction(float(hi)) - q
        even = lo if int(np.array(lo).view(f"u{np.dtype(dtype).itemsize}")) % 2 == 0 else hi
        r = lo if dl < dh else hi if dh < dl else even
    if r == 0:                                     # a tiny value rounded to zero
        r = dtype(0.0 if q > 0 else -0.0)
    return dtype(r)


def ulp_error(got, ref, dtype):
    """|got - ref| in ulps of ``dtype`` at ``ref`` (a long-double array)."""
    fi = np.finfo(dtype)
    a = np.abs(ref.astype(np.float64))
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, float(fi.minexp))
    step = np.exp2(e - fi.nmant).astype(np.longdouble)
    return (np.abs(got.astype(np.longdouble) - ref) / step).astype(np.float64)


def assert_within(name, got, ref, dtype, tol, arg):
    """Finite references within ``tol`` ulps; non-finite ones (and results that
    overflow ``dtype``) exactly."""
    with np.errstate(all="ignore"):
        rt = ref.astype(dtype)
        finite = np.isfinite(rt)
        g64, r64 = got.astype(np.float64), rt.astype(np.float64)
        same = (g64 == r64) | (np.isnan(g64) & np.isnan(r64))
        bad_special = ~finite & ~same
        assert not bad_special.any(), (
            f"{name}({arg[~finite & ~same][:4]}) = {got[bad_special][:4]}, want "
            f"{rt[bad_special][:4]}")
        err = ulp_error(got[finite], ref[finite], dtype)
    bad = ~(err <= max(tol, 0.5))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AssertionError(f"{np.dtype(dtype).name} {name}({arg[finite][i]!r}) = "
                             f"{got[finite][i]!r}, want {float(ref[finite][i])!r}: "
                             f"{err[i]:.2f} ulp > {tol} ({int(bad.sum())} bad, max "
                             f"{err.max():.2f})")
