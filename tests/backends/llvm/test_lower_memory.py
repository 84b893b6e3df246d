"""load/store: contiguous rows, runtime strides, gathers/scatters, masks and ``other``,
scalar accesses, every element type."""
from __future__ import annotations

import numpy as np
import pytest

from mutile.ir import types as T

from .conftest import KB, assert_same_bits, poisoned, ptr, random_values, tile


@pytest.mark.parametrize("t", [T.f32, T.f16, T.bf16, T.f8e4m3, T.i8, T.i64, T.u16, T.i1],
                         ids=str)
def test_masked_rows_and_other(t, rng):
    """x[r, c] for c < n (else other), stored where c < n; a runtime row stride."""
    R, C = 4, 64
    kb = KB("mrows", [("x", ptr(t)), ("o", ptr(t)), ("stride", T.i32), ("n", T.i32),
                      ("other", t)])
    offs = kb.grid2d(R, C, kb.a["stride"])
    cols = kb("broadcast", kb("expand_dims", kb.arange(C), axis=0), type=tile((R, C), T.i32))
    mask = kb("cmp", cols, kb.splat(kb.a["n"], (R, C)), pred="lt")
    v = kb.load(kb.ptrs(kb.a["x"], offs), mask, kb.splat(kb.a["other"], (R, C)))
    kb.store(kb.ptrs(kb.a["o"], kb.grid2d(R, C, kb.const(C, T.i32))), v)          # every element
    k = kb.compile()
    stride, n = 80, 37
    x = random_values(t, R * stride, rng).reshape(R, stride)
    other = np.array(1, t.to_numpy()) if t != T.i1 else np.array(True)
    o = poisoned((R, C), t)
    k.run([x, o, stride, n, other.item() if t.is_floating() or t == T.i1 else int(other)], (1,))
    want = np.where(np.arange(C)[None, :] < n, np.pad(x, ((0, 0), (0, max(0, C - stride))))[:, :C],
                    other)
    assert_same_bits(o, want.astype(t.to_numpy()), t, "masked rows")


@pytest.mark.parametrize("t", [T.f32, T.f16, T.i32, T.u8], ids=str)
def test_gather_scatter_with_masks(t, rng):
    """Pointer tiles from loaded indices (unknown structure): masked gather, masked
    scatter; masked-off lanes point far outside the arrays and must not be touched."""
    n = 32
    kb = KB("gat", [("x", ptr(t)), ("idx", ptr(T.i32)), ("o", ptr(t)), ("dst", ptr(T.i32))])
    offs = kb.arange(n)
    idx = kb.load(kb.ptrs(kb.a["idx"], offs))
    mask = kb("cmp", idx, kb.const(0, tile((n,), T.i32)), pred="ge")
    safe = kb("select", mask, idx, kb.const(1 << 30, tile((n,), T.i32)))   # wild when masked
    v = kb.load(kb.ptrs(kb.a["x"], safe), mask, kb.const(7, tile((n,), t)) if t.is_int() else
                kb.const(7.0, tile((n,), t)))
    kb.store(kb.ptrs(kb.a["o"], offs), v)
    dst = kb.load(kb.ptrs(kb.a["dst"], offs))
    kb.store(kb.ptrs(kb.a["o"], kb("select", mask, dst, kb.const(-(1 << 30), tile((n,), T.i32)))),
             v, mask)
    k = kb.compile()
    x = random_values(t, 100, rng, "finite" if t.is_floating() else "any")
    idx = rng.integers(0, 100, n).astype(np.int32)
    idx[::3] = -1
    dst = (np.arange(n) + 32).astype(np.int32)                        # scatter into o[32:64]
    o = poisoned((64,), t)
    k.run([x, idx, o, dst], (1,))
    m = idx >= 0
    want_lo = np.where(m, x[np.where(m, idx, 0)], 7).astype(t.to_numpy())
    assert_same_bits(o[:32], want_lo, t, "gather")
    want_hi = poisoned((32,), t)
    want_hi[m] = x[idx[m]]
    assert_same_bits(o[32:], want_hi, t, "scatter")


def test_column_and_strided_access(rng):
    """A transposed read (column stride 1 along rows) and a constant stride of 3."""
    t = T.f32
    kb = KB("cols", [("x", ptr(t)), ("o", ptr(t)), ("o3", ptr(t))])
    R, C = 16, 8
    r = kb("broadcast", kb("expand_dims", kb.arange(R), axis=1), type=tile((R, C), T.i32))
    c = kb("broadcast", kb("expand_dims", kb.arange(C), axis=0), type=tile((R, C), T.i32))
    offs = kb("add", r, kb("mul", c, kb.const(R, tile((R, C), T.i32))))     # x.T[r, c]
    v = kb.load(kb.ptrs(kb.a["x"], offs))
    kb.store2d(kb.a["o"], v, kb.const(C, T.i32))
    s3 = kb("mul", kb.arange(16), kb.const(3, tile((16,), T.i32)))
    kb.store(kb.ptrs(kb.a["o3"], kb.arange(16)), kb.load(kb.ptrs(kb.a["x"], s3)))
    k = kb.compile()
    x = rng.standard_normal(C * R).astype(np.float32)
    o, o3 = poisoned((R, C), t), poisoned((16,), t)
    k.run([x, o, o3], (1,))
    np.testing.assert_array_equal(o, x.reshape(C, R).T)
    np.testing.assert_array_equal(o3, x[0:48:3])


def test_scalar_masked_load_store():
    t = T.f32
    kb = KB("sc", [("x", ptr(t)), ("o", ptr(t)), ("flag", T.i1)])
    v = kb.load(kb.a["x"], kb.a["flag"], kb.const(-5.0, t))
    kb.store(kb("addptr", kb.a["o"], kb.const(1, T.i32)), v)
    kb.store(kb.a["o"], v, kb.a["flag"])
    k = kb.compile(check_bounds=True)
    x = np.array([3.5], np.float32)
    o = poisoned((2,), t)
    k.run([x, o, True], (1,))
    assert list(o) == [3.5, 3.5]
    o = poisoned((2,), t)
    k.run([np.zeros(0, np.float32), o, False], (1,))        # nothing read, nothing stored
    assert np.isnan(o[0]) and o[1] == -5.0


def test_runtime_stride_versioning(rng):
    """A last-dim stride known only at run time: 1 (vector rows) and 2 (gathers)."""
    t = T.f32
    kb = KB("rs", [("x", ptr(t)), ("o", ptr(t)), ("s", T.i32)])
    offs = kb("mul", kb.arange(32), kb.splat(kb.a["s"], (32,)))
    kb.store(kb.ptrs(kb.a["o"], kb.arange(32)), kb.load(kb.ptrs(kb.a["x"], offs)))
    k = kb.compile()
    x = rng.standard_normal(64).astype(np.float32)
    for s in (1, 2):
        o = poisoned((32,), t)
        k.run([x, o, s], (1,))
        np.testing.assert_array_equal(o, x[: 32 * s: s])
