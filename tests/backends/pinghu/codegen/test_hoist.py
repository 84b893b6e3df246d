"""Loop-invariant hoisting (backends/pinghu/codegen/hoist.py) around nested loops: out of
an outer loop only what that loop's own level reads, and every hoisted register counted
against each loop it is then live across. (The attention forward's persistent item loop
around its key loops spilled 4688 bytes a thread before both rules.)"""
from __future__ import annotations

from mutile.backends.pinghu.codegen.hoist import BUDGET, hoist
from mutile.backends.pinghu.codegen.values import VP, VR, VIns, VReg
from mutile.backends.pinghu.isa import BY_MNEMONIC
from mutile.backends.pinghu.isa.operands import IntImm

P = VP(VReg(99, 1, kind="P"), 0, 1)     # a guard: guarded instructions stay in their loop


def _ins(mnemonic, *ops, guard=None):
    return VIns(BY_MNEMONIC[mnemonic], ops, guard=guard)


def _loop(kind, ident):
    return VIns(None, loop=(kind, ident))


def _const(v, value):
    return _ins("ALU.MOV.IMM", VR(v, 0, v.nregs), IntImm(value))


def _add(dst, src):
    return _ins("ALU.IADD.S32", VR(dst, 0, dst.nregs), VR(dst, 0, dst.nregs),
                VR(src, 0, src.nregs), guard=P)


def _where(code, ins):
    """(index of ``ins`` in ``code``, the loops open there, innermost last)."""
    open_ = []
    for pos, x in enumerate(code):
        if x is ins:
            return pos, list(open_)
        if x.loop is not None:
            if x.loop[0] == "begin":
                open_.append(x.loop[1])
            else:
                open_.pop()
    raise AssertionError("instruction not found")


def test_a_value_only_a_nested_loop_reads_stays_inside_the_outer_loop():
    a, u = VReg(1, 1), VReg(2, 1)
    ca = _const(a, 5)
    code = [_loop("begin", 1), _loop("begin", 2), ca, _add(u, a), _loop("end", 2),
            _loop("end", 1)]
    out = hoist(code)
    pos, loops = _where(out, ca)
    assert loops == [1]                         # out of the key loop, not the item loop
    assert out[pos + 1].loop == ("begin", 2)


def test_a_value_the_outer_level_reads_leaves_both_loops():
    b, u, w = VReg(1, 1), VReg(2, 1), VReg(3, 1)
    cb = _const(b, 3)
    code = [_loop("begin", 1), cb, _add(u, b), _loop("begin", 2), _add(w, u),
            _loop("end", 2), _loop("end", 1)]
    out = hoist(code)
    assert _where(out, cb) == (0, [])


def test_hoisting_out_of_an_outer_loop_counts_against_the_nested_ones():
    """A 40-register tile hoisted out of the key loop leaves it 8 of its 48; a second
    40-register tile read at the item loop's level would be live across the key loop too,
    so it stays (before: each loop had its own 48, and 80 hoisted registers sat across
    the key loop)."""
    t1, t2 = VReg(1, 40), VReg(2, 40)
    x, y = VReg(3, 40), VReg(4, 40)
    c1, c2 = _const(t1, 1), _const(t2, 2)
    code = [_loop("begin", 1), c1, _add(x, t1), _loop("begin", 2), c2, _add(y, t2),
            _loop("end", 2), _loop("end", 1)]
    assert 2 * 40 > BUDGET >= 40
    out = hoist(code)
    assert _where(out, c2)[1] == [1]
    assert _where(out, c1)[1] == [1]
    alone = [_loop("begin", 1), c1, _add(x, t1), _loop("end", 1)]
    assert _where(hoist(alone), c1) == (0, [])  # with no nested loop it is hoisted
