"""Float math functions for the elementwise emitters (f32/f64 scalars or vectors).

f32 transcendentals come from :mod:`mathlib` (vectorizable in-IR approximations);
f64 ones, and f32 ones mathlib lacks, use LLVM intrinsics or libm, called lane by
lane (the JIT resolves libm from the process). sqrt/floor/ceil/fabs are always the
exact LLVM intrinsics; ``rsqrt(x)`` is ``1 / sqrt(x)`` (two roundings, as the oracle).
"""
from __future__ import annotations

from llvmlite import ir

_INTRINSIC = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sin": "sin",
              "cos": "cos", "sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "tanh": "tanh",
              "abs": "fabs", "pow": "pow"}
_EXACT = ("sqrt", "floor", "ceil", "abs")
_LIBM = {"erf": ("erff", "erf")}


def _elem(x):
    return x.type.element if isinstance(x.type, ir.VectorType) else x.type


def _mathlib_unary(ctx, name, x):
    try:
        from . import mathlib
    except ImportError:
        return None
    emit = getattr(mathlib, "emit_unary", None)
    if emit is None:
        return None
    try:
        return emit(ctx.b, name, x)
    except (KeyError, ValueError, NotImplementedError, TypeError):
        return None


def unary(ctx, name: str, x):
    """``name(x)`` for float ``x`` (f32 or f64, scalar or vector)."""
    b = ctx.b
    if name == "rsqrt":
        one = ctx.splat(ir.Constant(_elem(x), 1.0),
                        x.type.count if isinstance(x.type, ir.VectorType) else 1)
        return b.fdiv(one, unary(ctx, "sqrt", x))
    if name in _EXACT:
        return ctx.call_overloaded(_INTRINSIC[name], [x])
    if isinstance(_elem(x), ir.FloatType) and ctx.options.get("fast_math_lib", True):
        y = _mathlib_unary(ctx, name, x)
        if y is not None:
            return y
    if name in _LIBM:
        return _per_lane(ctx, _LIBM[name][0 if isinstance(_elem(x), ir.FloatType) else 1], [x])
    return ctx.call_overloaded(_INTRINSIC[name], [x])


def binary(ctx, name: str, x, y):
    """``name(x, y)`` (pow) for floats."""
    return ctx.call_overloaded(_INTRINSIC[name], [x, y])


def _per_lane(ctx, cname: str, xs):
    """Call libm ``cname`` on each lane of the vectors ``xs`` (or once on scalars)."""
    b = ctx.b
    ty = _elem(xs[0])
    fn = ctx.declare_c(cname, ty, [ty] * len(xs))
    if not isinstance(xs[0].type, ir.VectorType):
        return b.call(fn, xs)
    out = ir.Constant(xs[0].type, ir.Undefined)
    for i in range(xs[0].type.count):
        k = ir.Constant(ir.IntType(32), i)
        out = b.insert_element(out, b.call(fn, [b.extract_element(x, k) for x in xs]), k)
    return out
