"""Tensor descriptors: blocks inside, across and outside the edges; runtime strides."""
from __future__ import annotations

import numpy as np
import pytest

from mutile.ir import types as T

from .conftest import KB, poisoned, ptr, tile


def _kernel(t, BM, BN):
    kb = KB("desc", [("x", ptr(t)), ("y", ptr(t)), ("M", T.i32), ("N", T.i32), ("sx", T.i32),
                     ("one", T.i32), ("sy", T.i32), ("by", T.i32)])
    pm, pn = kb("program_id", axis=0), kb("program_id", axis=1)
    om = kb("mul", pm, kb.const(BM, T.i32))
    on = kb("sub", kb("mul", pn, kb.const(BN, T.i32)), kb.const(3, T.i32))   # shifted: edges
    dx = kb("make_desc", kb.a["x"], kb.a["M"], kb.a["N"], kb.a["sx"], kb.a["one"],
            block=[BM, BN])
    dy = kb("make_desc", kb.a["y"], kb.a["M"], kb.a["N"], kb.a["sy"], kb.a["by"], block=[BM, BN])
    blk = kb("desc_load", dx, om, on)
    two = kb.const(2.0, tile((BM, BN), t))
    kb.op("desc_store", [dy, om, on, kb("mul", blk, two)])
    return kb.compile()


@pytest.mark.parametrize("t", [T.f32, T.f16], ids=str)
def test_desc_load_store_edges(t, rng):
    BM, BN, M, N = 8, 16, 21, 37
    k = _kernel(t, BM, BN)
    x = rng.standard_normal((M, N)).astype(t.to_numpy())
    for transposed in (False, True):
        if transposed:        # y viewed with strides (1, M): a column-major target
            y = poisoned((N, M), t)
            sy, by = 1, M
        else:
            y = poisoned((M, N), t)
            sy, by = N, 1
        gm, gn = -(-M // BM), -(-(N + 3) // BN)
        k.run([x, y, M, N, N, 1, sy, by], (gm, gn))
        got = y.T if transposed else y
        np.testing.assert_array_equal(got, (x.astype(np.float32) * 2).astype(t.to_numpy()))


def test_desc_out_of_range_reads_zero(rng):
    t = T.f32
    kb = KB("dz", [("x", ptr(t)), ("o", ptr(t)), ("M", T.i32), ("N", T.i32), ("om", T.i32),
                   ("on", T.i32)])
    d = kb("make_desc", kb.a["x"], kb.a["M"], kb.a["N"], kb.a["N"], kb.const(1, T.i32),
           block=[4, 8])
    kb.store2d(kb.a["o"], kb("desc_load", d, kb.a["om"], kb.a["on"]), kb.const(8, T.i32))
    k = kb.compile(check_bounds=True)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    for om, on in ((-2, -3), (3, 2), (10, 0), (0, 0)):
        o = poisoned((4, 8), t)
        k.run([x, o, 5, 6, om, on], (1,))
        want = np.zeros((4, 8), np.float32)
        for i in range(4):
            for j in range(8):
                r, c = om + i, on + j
                if 0 <= r < 5 and 0 <= c < 6:
                    want[i, j] = x[r, c]
        np.testing.assert_array_equal(o, want)


def test_desc_3d_and_1d(rng):
    t = T.f32
    kb = KB("d3", [("x", ptr(t)), ("o", ptr(t)), ("o1", ptr(t))])
    c = lambda v: kb.const(v, T.i32)  # noqa: E731
    d3 = kb("make_desc", kb.a["x"], c(3, ), c(5), c(6), c(30), c(6), c(1), block=[2, 4, 8])
    blk = kb("desc_load", d3, c(2), c(3), c(1))                  # rows 2..3, 3..6, 1..8
    kb.store(kb.ptrs(kb.a["o"], kb.arange(64)), kb("reshape", blk, type=tile((64,), t)))
    d1 = kb("make_desc", kb.a["x"], c(90), c(1), block=[16])
    kb.store(kb.ptrs(kb.a["o1"], kb.arange(16)), kb("desc_load", d1, c(80)))
    k = kb.compile(check_bounds=True)
    x = rng.standard_normal(90).astype(np.float32)
    o, o1 = poisoned((64,), t), poisoned((16,), t)
    k.run([x, o, o1], (1,))
    x3 = np.zeros((4, 7, 9), np.float32)
    x3[:3, :5, :6] = x.reshape(3, 5, 6)
    np.testing.assert_array_equal(o.reshape(2, 4, 8), x3[2:4, 3:7, 1:9])
    np.testing.assert_array_equal(o1, np.concatenate([x[80:], np.zeros(6, np.float32)]))


def test_desc_bounds_fault():
    """A descriptor claiming more rows than the array has: caught, named, located."""
    from mutile.errors import DeviceFault
    t = T.f32
    kb = KB("dbad", [("x", ptr(t)), ("rows", T.i32)])
    d = kb("make_desc", kb.a["x"], kb.a["rows"], kb.const(8, T.i32), kb.const(8, T.i32),
           kb.const(1, T.i32), block=[4, 8])
    kb.at(42)
    kb.op("desc_store", [d, kb.const(4, T.i32), kb.const(0, T.i32), kb.const(1.0, tile((4, 8), t))])
    k = kb.compile(check_bounds=True)
    x = np.zeros((6, 8), np.float32)
    k.run([x, 4], (1,))                                  # rows 4..7 all out of the descriptor
    assert not x.any()
    with pytest.raises(DeviceFault) as ei:
        k.run([x, 8], (1,))                              # the descriptor lies: 8 rows
    assert ei.value.param == "x" and ei.value.index == 48 and ei.value.loc.line == 42
    assert not x.any()                                   # nothing was written before the fault
