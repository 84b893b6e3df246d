"""broadcast, permute, reshape, expand_dims, splat and arange on 1-D/2-D/3-D tiles."""
from __future__ import annotations

import numpy as np
import pytest

from mutile.ir import types as T

from .conftest import KB, assert_same_bits, poisoned, ptr, tile


@pytest.mark.parametrize("t", [T.f32, T.f16, T.i64, T.u8, T.i1], ids=str)
def test_shape_ops_2d(t, rng):
    R, C = 8, 32
    kb = KB("shapes", [("x", ptr(t)), ("col", ptr(t)), ("tr", ptr(t)), ("bc", ptr(t)),
                       ("rs", ptr(t)), ("n", T.i32), ("m", T.i32)])
    x = kb.load2d(kb.a["x"], R, C, kb.a["n"])                        # (R, C)
    # permute -> (C, R), stored with row stride R
    kb.store2d(kb.a["tr"], kb("permute", x, order=[1, 0]), kb.a["m"])
    # a column (R,) -> expand_dims (R,1) -> broadcast (R,C), combined with x
    colv = kb.load(kb.ptrs(kb.a["col"], kb.arange(R)))
    colb = kb("broadcast", kb("expand_dims", colv, axis=1), type=tile((R, C), t))
    comb = kb("xor" if t.is_int() or t == T.i1 else "add", x, colb)
    kb.store2d(kb.a["bc"], comb, kb.a["n"])
    # reshape (R, C) -> (R*C/4, 4) -> (R*C,) stored flat in reversed 2-D form
    flat = kb("reshape", kb("reshape", x, type=tile((R * C // 4, 4), t)), type=tile((R * C,), t))
    kb.store(kb.ptrs(kb.a["rs"], kb.arange(R * C)), flat)
    k = kb.compile()
    xa = (rng.integers(0, 2, (R, C)).astype(bool) if t == T.i1 else
          rng.integers(0, 100, (R, C)).astype(t.to_numpy()))
    ca = (rng.integers(0, 2, R).astype(bool) if t == T.i1 else
          rng.integers(0, 100, R).astype(t.to_numpy()))
    tr, bc, rs = poisoned((C, R), t), poisoned((R, C), t), poisoned((R * C,), t)
    k.run([xa, ca, tr, bc, rs, C, R], (1,))
    assert_same_bits(tr, xa.T, t, "permute")
    want = (xa ^ ca[:, None]) if (t.is_int() or t == T.i1) else \
        (xa.astype(np.float32) + ca[:, None].astype(np.float32)).astype(t.to_numpy())
    assert_same_bits(bc, want, t, "broadcast")
    assert_same_bits(rs, xa.ravel(), t, "reshape")


def test_permute_3d_and_row_broadcast(rng):
    A, B, C = 4, 8, 16
    t = T.f32
    kb = KB("p3", [("x", ptr(t)), ("o", ptr(t)), ("r", ptr(t)), ("o2", ptr(t))])
    x = kb.load(kb.ptrs(kb.a["x"], kb.arange(A * B * C)))
    x3 = kb("reshape", x, type=tile((A, B, C), t))
    p = kb("permute", x3, order=[2, 0, 1])                              # (C, A, B)
    kb.store(kb.ptrs(kb.a["o"], kb.arange(A * B * C)), kb("reshape", p, type=tile((A * B * C,), t)))
    row = kb.load(kb.ptrs(kb.a["r"], kb.arange(C)))                     # (C,)
    rb = kb("broadcast", kb("expand_dims", row, axis=0), type=tile((B, C), t))
    x2 = kb.load(kb.ptrs(kb.a["x"], kb.arange(B * C)))
    s = kb("mul", rb, kb("reshape", x2, type=tile((B, C), t)))
    kb.store(kb.ptrs(kb.a["o2"], kb.arange(B * C)), kb("reshape", s, type=tile((B * C,), t)))
    k = kb.compile()
    xa = rng.standard_normal(A * B * C).astype(np.float32)
    ra = rng.standard_normal(C).astype(np.float32)
    o, o2 = poisoned((A * B * C,), t), poisoned((B * C,), t)
    k.run([xa, o, ra, o2], (1,))
    np.testing.assert_array_equal(o, xa.reshape(A, B, C).transpose(2, 0, 1).ravel())
    np.testing.assert_array_equal(o2, (ra[None, :] * xa[: B * C].reshape(B, C)).ravel())


def test_splat_arange_offsets_small_tiles(rng):
    """Tiles narrower than a chunk (2 and 1 columns) and 1-element tiles."""
    t = T.i32
    kb = KB("small", [("o", ptr(t)), ("o1", ptr(t)), ("v", T.i32)])
    a = kb.arange(4, start=3)                                          # [3..6]
    m = kb("mul", kb("broadcast", kb("expand_dims", a, axis=1), type=tile((4, 2), t)),
           kb("broadcast", kb("expand_dims", kb.arange(2), axis=0), type=tile((4, 2), t)))
    m = kb("add", m, kb.splat(kb.a["v"], (4, 2)))
    kb.store(kb.ptrs(kb.a["o"], kb("reshape", kb.grid2d(4, 2, kb.const(2, t)), type=tile((8,), t))),
             kb("reshape", m, type=tile((8,), t)))
    one = kb("reshape", kb.a["v"], type=tile((1,), t))
    kb.store(kb.ptrs(kb.a["o1"], kb.arange(1)), one)
    k = kb.compile()
    o, o1 = poisoned((8,), t), poisoned((1,), t)
    k.run([o, o1, 100], (1,))
    want = (np.arange(3, 7)[:, None] * np.arange(2)[None, :] + 100).ravel()
    np.testing.assert_array_equal(o, want)
    assert o1[0] == 100


@pytest.mark.parametrize("t,R,C", [(T.f32, 64, 32), (T.bf16, 16, 64), (T.i8, 8, 8),
                                   (T.f64, 4, 16)], ids=str)
def test_transpose_blocks(t, R, C, rng):
    """permute [1, 0] by 8x8 shuffle blocks (4x16 falls back to the index map)."""
    kb = KB("tr", [("x", ptr(t)), ("o", ptr(t))])
    x = kb.load2d(kb.a["x"], R, C, kb.const(C, T.i32))
    kb.store2d(kb.a["o"], kb("permute", x, order=[1, 0]), kb.const(R, T.i32))
    k = kb.compile()
    xa = rng.integers(-100, 100, (R, C)).astype(t.to_numpy())
    o = poisoned((C, R), t)
    k.run([xa, o], (1,))
    assert_same_bits(o, xa.T.copy(), t, "transpose")


@pytest.mark.parametrize("shape", [(1,), (2,), (4, 1), (1, 4), (2, 2)], ids=str)
def test_tiny_tiles(shape, rng):
    """Tiles narrower than a chunk: loads, fused math, broadcast, reduce, masked store."""
    t = T.f32
    n = int(np.prod(shape))
    kb = KB("tiny", [("x", ptr(t)), ("o", ptr(t)), ("s", ptr(t))])
    flat = kb.arange(n)
    x = kb.load(kb.ptrs(kb.a["x"], flat))
    x = kb("reshape", x, type=tile(shape, t)) if len(shape) > 1 else x
    y = kb("add", kb("mul", x, x), kb.const(1.0, tile(shape, t)))
    r = kb("reduce", y, axis=len(shape) - 1, kind="sum")
    if len(shape) > 1:
        rb = kb("broadcast", kb("expand_dims", r, axis=len(shape) - 1), type=tile(shape, t))
        y = kb("sub", y, rb)
        kb.store(kb.ptrs(kb.a["s"], kb.arange(shape[0])), r)
    else:
        kb.store(kb.a["s"], r)
    yf = kb("reshape", y, type=tile((n,), t)) if len(shape) > 1 else y
    keep = kb("cmp", flat, kb.const(n - 1, tile((n,), T.i32)), pred="lt")
    kb.store(kb.ptrs(kb.a["o"], flat), yf, keep)
    k = kb.compile()
    xa = rng.standard_normal(shape).astype(np.float32)
    o, s = poisoned((n,), t), poisoned((shape[0] if len(shape) > 1 else 1,), t)
    k.run([xa, o, s], (1,))
    y = xa * xa + np.float32(1)
    r = y.sum(axis=-1, dtype=np.float64)
    if len(shape) > 1:
        y = y - r.astype(np.float32)[:, None]
    np.testing.assert_allclose(s, np.atleast_1d(r), rtol=1e-6)
    np.testing.assert_allclose(o[:-1], y.ravel()[:-1], rtol=1e-6, atol=1e-6)
    assert np.isnan(o[-1])
