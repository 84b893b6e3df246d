"""Kernels given as IR text (``mutile.ir.parse``), and what the lowering makes of
address structure: contiguous rows become vector loads, hints are trusted."""
from __future__ import annotations

import numpy as np

from mutile.backends import llvm as L
from mutile.ir import parse, verify
from mutile.ir import types as T

from .conftest import KB, poisoned, ptr

SOFTMAX = """\
#0 = "softmax.py"
kernel @softmax(%x: ptr<f32>, %y: ptr<f32>, %n: i32) -> () loc(#0:1:0) {
  %row = program_id {axis = 0} : i32 loc(#0:2:4)
  %base = mul %row, %n : i32 loc(#0:3:4)
  %cols = arange {end = 128, start = 0} : tile<128xi32> loc(#0:4:4)
  %b = splat %base : tile<128xi32> loc(#0:5:4)
  %offs = add %b, %cols : tile<128xi32> loc(#0:5:4)
  %nn = splat %n : tile<128xi32> loc(#0:6:4)
  %mask = cmp %cols, %nn {pred = "lt"} : tile<128xi1> loc(#0:6:4)
  %xb = splat %x : tile<128xptr<f32>> loc(#0:7:4)
  %xp = addptr %xb, %offs : tile<128xptr<f32>> loc(#0:7:4)
  %ninf = constant {value = -inf} : tile<128xf32> loc(#0:7:4)
  %v = load %xp, %mask, %ninf : tile<128xf32> loc(#0:7:4)
  %m = reduce %v {axis = 0, kind = "max"} : f32 loc(#0:8:4)
  %ms = splat %m : tile<128xf32> loc(#0:9:4)
  %d = sub %v, %ms : tile<128xf32> loc(#0:9:4)
  %e = exp %d : tile<128xf32> loc(#0:9:4)
  %s = reduce %e {axis = 0, kind = "sum"} : f32 loc(#0:10:4)
  %ss = splat %s : tile<128xf32> loc(#0:11:4)
  %out = div %e, %ss : tile<128xf32> loc(#0:11:4)
  %yb = splat %y : tile<128xptr<f32>> loc(#0:12:4)
  %yp = addptr %yb, %offs : tile<128xptr<f32>> loc(#0:12:4)
  store %yp, %out, %mask loc(#0:12:4)
  return loc(#0:13:0)
}
"""


def test_softmax_from_ir_text(rng):
    k = L.compile(verify(parse(SOFTMAX)), {"check_bounds": True})
    R, n = 37, 100
    x = rng.standard_normal((R, n)).astype(np.float32)
    y = poisoned((R, n), T.f32)
    k.run([x, y, n], (R,))
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    ll = k.asm["llir_unoptimized"]
    assert "masked.load" in ll and "masked.gather" not in ll     # rows, not gathers
    assert "vfmadd" in k.asm["asm"] or "vmul" in k.asm["asm"]


def test_max_contiguous_hint_makes_rows(rng):
    """offs = (start + arange) % n is not provably contiguous; the hint says it is."""
    kb = KB("hint", [("x", ptr(T.f32)), ("o", ptr(T.f32)), ("n", T.i32), ("start", T.i32)])
    offs = kb("rem", kb("add", kb.splat(kb.a["start"], (64,)), kb.arange(64)),
              kb.splat(kb.a["n"], (64,)))
    hinted = kb("hint", offs, max_contiguous=[64], multiple_of=[64])
    kb.store(kb.ptrs(kb.a["o"], kb.arange(64)), kb.load(kb.ptrs(kb.a["x"], hinted)))
    k = kb.compile()
    assert "masked.gather" not in k.asm["llir_unoptimized"]
    x = rng.standard_normal(256).astype(np.float32)
    o = poisoned((64,), T.f32)
    k.run([x, o, 256, 64], (1,))
    np.testing.assert_array_equal(o, x[64:128])


def test_matmul_loop_keeps_row_loads():
    """The pointer tiles carried by the K loop stay structured: no gathers in the loop
    except the versioned fallback for runtime strides != 1."""
    from .ir_kernels import matmul
    k = matmul(32, 32, 16).compile()
    ll = k.asm["llir_unoptimized"]
    assert ll.count("llvm.masked.load.v16f32") >= 2
