"""One table of scalar semantics: what each elementwise op computes, in numpy.

The constant folder, the backends' test oracle and (later) the Pinghu interpreter all
evaluate elementwise ops through :func:`evaluate`, so they cannot disagree. Floats
narrower than f32 (f16, bf16, fp8) compute in f32 and round once to their type, which
is exactly the correctly rounded result for + - * / and sqrt. Integer semantics are
those of C on two's-complement machines without undefined behaviour:
wrap-around, truncating division, ``x / 0 == -1``, ``x % 0 == x``, shifts by >= the
width give 0 (or the sign fill for arithmetic right shifts).

``EXACT`` lists the ops whose results here are bit-exact on every backend (the folder
only folds those); transcendental ops are approximations, checked with a tolerance.
"""
from __future__ import annotations

import math

import numpy as np

from .types import ScalarType, f64, u8

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
    ct = _compute_dtype(operand) if name != "select" else _compute_dtype(result)
    with np.errstate(all="ignore"):
        conv = [np.asarray(x) if (name == "select" and i == 0) else np.asarray(x).astype(ct)
                for i, x in enumerate(args)]
        out = ELEMENTWISE[name](conv, operand if name != "select" else result, attrs)
        return np.asarray(out).astype(result.to_numpy())


def convert(x, src: ScalarType, dst: ScalarType):
    """Numeric conversion with mutile's rules (ml_dtypes rounding; float->int truncates;
    NaN -> 0 and out-of-range saturates for float->int; to i1 is x != 0)."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if dst.name == "i1":
            return x != 0
        if dst.is_floating():
            if src.is_floating() and src.bits < 32 and dst.bits < 32 and src != dst:
                # ml_dtypes converts narrow floats directly; f32 is exact for all of them
                return x.astype(np.float32).astype(dst.to_numpy())
            return x.astype(dst.to_numpy())
        if src.is_floating():
            info = np.iinfo(dst.to_numpy())
            w = x.astype(np.float64)
            w = np.trunc(np.where(np.isnan(w), 0, w))
            w = np.clip(w, info.min, info.max)
            # f64 cannot hold 2**63-1 / 2**64-1: clip in float, fix the top end exactly
            top = w >= float(info.max)
            out = w.astype(np.float64)
            res = np.where(top, 0, out).astype(dst.to_numpy())
            return np.where(top, np.array(info.max, dst.to_numpy()), res)
        return x.astype(dst.to_numpy())
