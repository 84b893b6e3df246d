"""reduce (every kind) and scan along each axis of 1-D and 2-D tiles, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from mutile.ir import types as T

from .conftest import KB, poisoned, ptr, tile

FLOAT_KINDS = ["sum", "prod", "max", "min", "argmax", "argmin"]
INT_KINDS = FLOAT_KINDS + ["xor", "or", "and"]
BOOL_KINDS = ["max", "min", "or", "and", "xor", "sum"]


def _kinds(t):
    return BOOL_KINDS if t == T.i1 else INT_KINDS if t.is_int() else FLOAT_KINDS


def _data(t, shape, rng, kind):
    if t == T.i1:
        return rng.integers(0, 2, shape).astype(bool)
    if t.is_int():
        hi = 4 if kind == "prod" else 100
        x = rng.integers(0 if not t.is_int_signed() else -hi, hi, shape)
        return x.astype(t.to_numpy())
    if kind == "prod":
        return rng.uniform(0.8, 1.25, shape).astype(t.to_numpy())
    x = rng.standard_normal(shape).astype(t.to_numpy())
    if kind in ("argmax", "argmin", "max", "min"):
        x.ravel()[3::17] = x.ravel()[5]              # ties: the first index must win
    return x


def _expected(kind, x, axis, t):
    if kind in ("argmax", "argmin"):
        return getattr(np, kind)(x, axis=axis).astype(np.int32)
    if t == T.i1:
        f = {"max": np.any, "min": np.all, "or": np.any, "and": np.all,
             "xor": lambda a, axis: np.logical_xor.reduce(a, axis=axis),
             "sum": lambda a, axis: np.logical_xor.reduce(a, axis=axis)}[kind]
        return f(x, axis=axis)
    if t.is_int():
        f = {"sum": lambda a, axis: np.sum(a, axis=axis, dtype=a.dtype),
             "prod": lambda a, axis: np.prod(a, axis=axis, dtype=a.dtype),
             "max": np.max, "min": np.min,
             "xor": np.bitwise_xor.reduce, "or": np.bitwise_or.reduce,
             "and": np.bitwise_and.reduce}[kind]
        return f(x, axis=axis)
    w = x.astype(np.float64)
    return {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[kind](w, axis=axis)


def _compare(got, want, kind, t, what):
    if kind in ("sum", "prod") and t.is_floating():
        tol = {T.f32: 1e-5, T.f64: 1e-12, T.f16: 2e-3, T.bf16: 1.6e-2}[t]
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 8,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype), err_msg=what)


SHAPES = [(8, 32), (16, 4), (64,), (8,)]
REDUCE_CASES = ([(t, s) for t in (T.f32, T.i32, T.i1) for s in SHAPES] +
                [(t, (8, 32)) for t in (T.f16, T.bf16, T.f64, T.u8, T.i64)])


@pytest.mark.parametrize("t,shape", REDUCE_CASES, ids=str)
def test_reduce(t, shape, rng):
    kinds = _kinds(t)
    axes = list(range(len(shape)))
    cases = [(k, a) for k in kinds for a in axes]
    params = [(f"x{i}", ptr(t)) for i in range(len(kinds))]
    for j, (kind, axis) in enumerate(cases):
        rt = T.i32 if kind.startswith("arg") else t
        params.append((f"o{j}", ptr(rt)))
    kb = KB("red", params)
    offs = kb.arange(int(np.prod(shape)))
    loaded = [kb("reshape", kb.load(kb.ptrs(kb.a[f"x{i}"], offs)), type=tile(shape, t))
              if len(shape) > 1 else kb.load(kb.ptrs(kb.a[f"x{i}"], offs))
              for i in range(len(kinds))]
    for j, (kind, axis) in enumerate(cases):
        r = kb("reduce", loaded[kinds.index(kind)], axis=axis, kind=kind)
        if r.type.is_tile():
            kb.store(kb.ptrs(kb.a[f"o{j}"], kb.arange(r.type.numel)), r)
        else:
            kb.store(kb.a[f"o{j}"], r)
    k = kb.compile()
    xs = [_data(t, shape, rng, kind) for kind in kinds]
    outs = []
    for kind, axis in cases:
        rt = T.i32 if kind.startswith("arg") else t
        n = int(np.prod(shape)) // shape[axis]
        outs.append(poisoned((n,), rt))
    k.run([*xs, *outs], (1,))
    for (kind, axis), got in zip(cases, outs):
        want = _expected(kind, xs[kinds.index(kind)], axis, t)
        _compare(got, np.asarray(want).ravel(), kind, t, f"{kind} axis {axis} of {shape} {t}")


def test_argmax_nan_rules():
    """NaNs are ignored unless all are NaN; max/min let a number win over NaN."""
    t = T.f32
    kb = KB("nan", [("x", ptr(t)), ("o", ptr(T.i32)), ("m", ptr(t))])
    x = kb("reshape", kb.load(kb.ptrs(kb.a["x"], kb.arange(4 * 32))), type=tile((4, 32), t))
    kb.store(kb.ptrs(kb.a["o"], kb.arange(4)), kb("reduce", x, axis=1, kind="argmax"))
    kb.store(kb.ptrs(kb.a["m"], kb.arange(4)), kb("reduce", x, axis=1, kind="max"))
    k = kb.compile()
    xa = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    xa[0, 0] = np.nan                      # NaN first: ignored
    xa[1, :] = np.nan                      # all NaN: index 0
    xa[2, 7] = 50.0
    xa[2, 20] = 50.0                       # tie: first
    xa[3, 31] = np.nan
    o, m = poisoned((4,), T.i32), poisoned((4,), t)
    k.run([xa, o, m], (1,))
    assert o[0] == np.nanargmax(xa[0]) and o[1] == 0 and o[2] == 7
    assert o[3] == np.nanargmax(xa[3])
    assert m[0] == np.nanmax(xa[0]) and np.isnan(m[1]) and m[3] == np.nanmax(xa[3])


SCAN_CASES = ([(T.f32, s) for s in ((8, 32), (32, 8), (64,))] +
              [(t, (8, 32)) for t in (T.f16, T.i32, T.u8)])


@pytest.mark.parametrize("t,shape", SCAN_CASES, ids=str)
def test_scan(t, shape, rng):
    kinds = ["sum", "prod", "max", "min"]
    cases = [(k, a) for k in kinds for a in range(len(shape))]
    n = int(np.prod(shape))
    params = [(f"x{i}", ptr(t)) for i in range(len(kinds))]
    params += [(f"o{j}", ptr(t)) for j in range(len(cases))]
    kb = KB("scan", params)
    offs = kb.arange(n)
    loaded = [kb("reshape", kb.load(kb.ptrs(kb.a[f"x{i}"], offs)), type=tile(shape, t))
              if len(shape) > 1 else kb.load(kb.ptrs(kb.a[f"x{i}"], offs))
              for i in range(len(kinds))]
    for j, (kind, axis) in enumerate(cases):
        r = kb("scan", loaded[kinds.index(kind)], axis=axis, kind=kind)
        kb.store(kb.ptrs(kb.a[f"o{j}"], offs), kb("reshape", r, type=tile((n,), t))
                 if len(shape) > 1 else r)
    k = kb.compile()
    xs = [_data(t, shape, rng, kind) for kind in kinds]
    outs = [poisoned((n,), t) for _ in cases]
    k.run([*xs, *outs], (1,))
    for (kind, axis), got in zip(cases, outs):
        x = xs[kinds.index(kind)]
        if t.is_int():
            f = {"sum": np.cumsum, "prod": np.cumprod}.get(kind)
            want = f(x, axis=axis, dtype=x.dtype) if f else \
                {"max": np.maximum, "min": np.minimum}[kind].accumulate(x, axis=axis)
            np.testing.assert_array_equal(got, want.ravel(), err_msg=f"{kind} {axis}")
        else:
            w = x.astype(np.float64)
            want = {"sum": np.cumsum, "prod": np.cumprod}[kind](w, axis=axis) if kind in \
                ("sum", "prod") else {"max": np.maximum, "min": np.minimum}[kind].accumulate(
                    w, axis=axis)
            tol = 1e-5 if t == T.f32 else 2e-3
            np.testing.assert_allclose(got.astype(np.float64), want.ravel(), rtol=tol,
                                       atol=tol * 8, err_msg=f"{kind} {axis}")
