"""Float math functions for the elementwise emitters (f32/f64 scalars or vectors).

Every unary function comes from :mod:`mathlib` — the one implementation: vectorizable
in-IR approximations for f32, LLVM intrinsics / libm for f64; sqrt/floor/ceil/fabs
are the exact LLVM intrinsics and ``rsqrt(x)`` is ``1 / sqrt(x)`` (two roundings, as the
oracle). ``pow`` is the LLVM intrinsic.
"""
from __future__ import annotations

from . import mathlib


def unary(ctx, name: str, x):
    """``name(x)`` for float ``x`` (f32 or f64, scalar or vector)."""
    return mathlib.emit_unary(ctx.b, name, x)


def binary(ctx, name: str, x, y):
    """``name(x, y)`` (only ``pow``) for floats."""
    assert name == "pow", name
    return ctx.call_overloaded("pow", [x, y])
