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

import threading
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


_MIDPOINT = np.iinfo(np.int64).min      # (f64 bits << 35) of an f32 midpoint, as int64
_TINY = np.uint64((1023 - 126) << 53)   # (f64 bits << 1) of 2**-126: f32's normal range
_ONE, _35, _TOP = np.uint64(1), np.uint64(35), np.uint64(1 << 63)
_LIMIT = _TINY - _ONE


def fma_f32(a, b, c, out=None):
    """``a * b + c`` of f32 arrays (broadcast together), rounded once to f32; written
    into ``out`` (an f32 array of the broadcast shape; it may be one of the operands)
    when given.

    The f64 sum of the exact product and c is the answer's only rounding that matters,
    except where it lands exactly on an f32 midpoint or below f32's normal range: there
    rounding it to f32 can round twice, and those (rare) elements are redone with
    round-to-odd. Both cases are found from the sum's bits (two integer passes and a
    min-reduction each); the f64 temporaries are per-thread scratch, and ``out`` is
    written once every operand has been read."""
    a, b, c = (x if isinstance(x, np.ndarray) else np.asarray(x) for x in (a, b, c))
    if out is None:
        out = np.empty(np.broadcast_shapes(a.shape, b.shape, c.shape), np.float32)
    if not out.size:
        return out
    s, t = _work(out.size)
    s = s.reshape(out.shape)
    np.multiply(a, b, out=s, dtype=np.float64)             # exact
    np.add(s, c, out=s)
    redo = _double_rounding(s, t)
    if redo is not None:
        at = np.unravel_index(redo, s.shape) if s.ndim else ()
        a, b, c = (np.broadcast_to(x, s.shape)[at].astype(np.float64) for x in (a, b, c))
        s.reshape(-1)[redo] = _round_to_odd(*_two_sum(a * b, c))
    np.copyto(out, s, casting="same_kind")
    return out


_scratch = threading.local()


def _work(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two scratch arrays of ``n`` float64 / uint64 (per thread, kept: no allocation and
    no page faults per call)."""
    w = getattr(_scratch, "w", None)
    if w is None or w.size < 2 * n:
        w = _scratch.w = np.empty(2 * max(n, 1 << 16), np.float64)
    return w[:n], w[n:2 * n].view(np.uint64)


def _double_rounding(s: np.ndarray, t: np.ndarray):
    """Flat indices of the elements of the (non-empty, contiguous) f64 array ``s`` (exact
    values rounded once) whose rounding to f32 could round twice, or None when there are
    none; ``t``: uint64 scratch of ``s``'s size."""
    bits = s.reshape(-1).view(np.uint64)
    np.left_shift(bits, _35, out=t)             # the low 29 bits; a midpoint's: 1 << 63
    redo = None
    if np.minimum.reduce(t.view(np.int64)) == _MIDPOINT:
        redo = t == _TOP
    np.left_shift(bits, _ONE, out=t)            # drop the sign
    np.subtract(t, _ONE, out=t)                 # zeros wrap to the top
    if np.minimum.reduce(t) < _LIMIT:           # 0 < |s| < 2**-126
        tiny = t < _LIMIT
        redo = tiny if redo is None else redo | tiny
    return None if redo is None else np.flatnonzero(redo)


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
