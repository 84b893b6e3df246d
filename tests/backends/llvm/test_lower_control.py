"""for (scalar, tile and pointer-tile iter_args; swaps), if with results, while."""
from __future__ import annotations

import numpy as np

from mutile.ir import Block, Builder
from mutile.ir import types as T

from .conftest import KB, poisoned, ptr, tile


def _for(kb, lb, ub, step, inits, body):
    """Append a ``for``; ``body(b, i, *args)`` builds the region and returns the yields."""
    blk = Block([lb.type] + [v.type for v in inits])
    inner = Builder(blk, kb.b.loc)
    outer, kb.b = kb.b, inner
    ys = body(kb, *blk.args)
    kb.b = outer
    inner.create("yield", ys)
    return kb.b.create("for", [lb, ub, step, *inits], regions=[blk]).results


def test_for_tile_and_pointer_iter_args(rng):
    """acc += x[i*BK : (i+1)*BK] with the pointer tile advanced by a uniform step."""
    t, BK, n_iter = T.f32, 32, 5
    kb = KB("loop", [("x", ptr(t)), ("o", ptr(t)), ("n", T.i32)])
    p0 = kb.ptrs(kb.a["x"], kb.arange(BK))
    acc0 = kb.const(0.0, tile((BK,), t))
    zero, one = kb.const(0, T.i32), kb.const(1, T.i32)

    def body(kb, i, acc, p):
        v = kb.load(p)
        acc2 = kb("add", acc, v)
        return [acc2, kb("addptr", p, kb.const(BK, tile((BK,), T.i32)))]

    acc, _ = _for(kb, zero, kb.a["n"], one, [acc0, p0], body)
    kb.store(kb.ptrs(kb.a["o"], kb.arange(BK)), acc)
    k = kb.compile()
    x = rng.standard_normal(BK * n_iter).astype(np.float32)
    o = poisoned((BK,), t)
    k.run([x, o, n_iter], (1,))
    want = np.zeros(BK, np.float32)
    for i in range(n_iter):
        want = want + x[i * BK:(i + 1) * BK]
    np.testing.assert_array_equal(o, want)
    o = poisoned((BK,), t)
    k.run([x, o, 0], (1,))                         # zero trips: the init flows out
    np.testing.assert_array_equal(o, np.zeros(BK, np.float32))


def test_for_swap_and_scalar_carry():
    """yield (b, a + 1, s + i): the swap must read the old values."""
    t = T.i32
    kb = KB("swap", [("o", ptr(t)), ("s_out", ptr(t))])
    a0 = kb.arange(16)
    b0 = kb("mul", kb.arange(16), kb.const(10, tile((16,), t)))
    s0 = kb.const(0, t)

    def body(kb, i, a, b, s):
        return [b, kb("add", a, kb.const(1, tile((16,), t))), kb("add", s, i)]

    a, b, s = _for(kb, kb.const(0, t), kb.const(5, t), kb.const(1, t), [a0, b0, s0], body)
    kb.store(kb.ptrs(kb.a["o"], kb.arange(16)), a)
    kb.store(kb.ptrs(kb.a["o"], kb.arange(16, start=16)), b)
    kb.store(kb.a["s_out"], s)
    k = kb.compile()
    o, so = poisoned((32,), t), poisoned((1,), t)
    k.run([o, so], (1,))
    a, b = np.arange(16), np.arange(16) * 10
    for _ in range(5):
        a, b = b, a + 1
    np.testing.assert_array_equal(o, np.concatenate([a, b]))
    assert so[0] == 0 + 1 + 2 + 3 + 4


def test_for_negative_step_and_nested(rng):
    t = T.i32
    kb = KB("nest", [("o", ptr(t))])

    def inner(kb, j, acc):
        return [kb("add", acc, kb.splat(j, (8,)))]

    def outer(kb, i, acc):
        acc2, = _for(kb, kb.const(0, t), i, kb.const(1, t), [acc], inner)
        return [kb("mul", acc2, kb.const(2, tile((8,), t)))]

    r, = _for(kb, kb.const(4, t), kb.const(0, t), kb.const(-1, t), [kb.arange(8)], outer)
    kb.store(kb.ptrs(kb.a["o"], kb.arange(8)), r)
    k = kb.compile()
    o = poisoned((8,), t)
    k.run([o], (1,))
    want = np.arange(8)
    for i in (4, 3, 2, 1):
        want = (want + sum(range(i))) * 2
    np.testing.assert_array_equal(o, want)


def test_if_with_results(rng):
    t = T.f32
    kb = KB("ifr", [("x", ptr(t)), ("o", ptr(t)), ("flag", T.i32)])
    x = kb.load(kb.ptrs(kb.a["x"], kb.arange(32)))
    cond = kb("cmp", kb.a["flag"], kb.const(0, T.i32), pred="ne")
    then, other = Block(), Block()
    for blk, f in ((then, 2.0), (other, -1.0)):
        bb = Builder(blk, kb.b.loc)
        c = bb("constant", type=tile((32,), t), value=f)
        s = bb("constant", type=T.i32, value=int(f))
        bb.create("yield", [bb("mul", x, c), s])
    r, s = kb.b.create("if", [cond], [x.type, T.i32], regions=[then, other]).results
    kb.store(kb.ptrs(kb.a["o"], kb.arange(32)), kb("add", r, kb("cast", kb.splat(s, (32,)), to=t)))
    k = kb.compile()
    xa = rng.standard_normal(32).astype(np.float32)
    for flag, f in ((1, 2.0), (0, -1.0)):
        o = poisoned((32,), t)
        k.run([xa, o, flag], (1,))
        np.testing.assert_array_equal(o, xa * np.float32(f) + np.float32(int(f)))


def test_while_loop():
    """while (s < limit) { s = s * 2 + 1; v = v + s }  (tile carried too)."""
    t = T.i32
    kb = KB("wh", [("o", ptr(t)), ("limit", t)])
    before = Block([t, tile((8,), t)])
    bb = Builder(before, kb.b.loc)
    c = bb("cmp", before.args[0], kb.a["limit"], pred="lt")
    bb.create("condition", [c, before.args[0], before.args[1]])
    after = Block([t, tile((8,), t)])
    ab = Builder(after, kb.b.loc)
    s2 = ab("add", ab("mul", after.args[0], ab("constant", type=t, value=2)),
            ab("constant", type=t, value=1))
    v2 = ab("add", after.args[1], ab("splat", s2, type=tile((8,), t)))
    ab.create("yield", [s2, v2])
    s, v = kb.b.create("while", [kb.const(0, t), kb.arange(8)], [t, tile((8,), t)],
                       regions=[before, after]).results
    kb.store(kb.ptrs(kb.a["o"], kb.arange(8)), v)
    kb.store(kb("addptr", kb.a["o"], kb.const(8, t)), s)
    k = kb.compile()
    o = poisoned((9,), t)
    k.run([o, 100], (1,))
    s, v = 0, np.arange(8)
    while s < 100:
        s = s * 2 + 1
        v = v + s
    np.testing.assert_array_equal(o, np.concatenate([v, [s]]))
