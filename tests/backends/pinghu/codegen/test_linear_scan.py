"""The linear scan's holes (backends/pinghu/codegen/linear_scan.py): a block dead
between its last read and the instruction that next writes all of it lends its
registers to a block living wholly inside that stretch. The attention forward that
issues the next block's Q K^T behind P V (kernels/attention_pinghu.py ``kv_loop``) fits
its registers only so: its score carrier is read at the loop's top and rewritten at
its bottom (test_register_pressure.py::test_the_attention_forward_does_not_spill)."""
from __future__ import annotations

import pytest

from mutile.backends.pinghu.codegen.linear_scan import Full, allocate_blocks, holes
from mutile.backends.pinghu.codegen.values import VP, VR, VIns, VReg
from mutile.backends.pinghu.isa import BY_MNEMONIC
from mutile.backends.pinghu.isa.operands import IntImm


def _ins(mnemonic, *ops, guard=None):
    return VIns(BY_MNEMONIC[mnemonic], ops, guard=guard)


def _run(v, start=0, count=None):
    return VR(v, start, v.nregs if count is None else count)


def _body(p, t, u):
    """``t = p * 2; u = t + 1; p = u * u`` on 8-register blocks, straight."""
    return [_ins("ALU.FMUL.F32", _run(t), _run(p), IntImm(2)),
            _ins("ALU.FADD.F32", _run(u), _run(t), IntImm(1)),
            _ins("ALU.FMUL.F32", _run(p), _run(u), _run(u))]


def test_a_block_is_dead_from_its_last_read_to_its_next_whole_write():
    p, t, u = VReg(1, 8), VReg(2, 8), VReg(3, 8)
    assert holes(_body(p, t, u)) == {p: [(0, 2)]}


@pytest.mark.parametrize("breaker", ["label", "branch", "guard", "part", "sqmma_read"])
def test_no_hole_across_control_flow_or_a_partial_write(breaker):
    """A label or branch between the read and the write, a guarded write, or a write of
    part of the block leaves no hole; nor does a read by an SQMMA (it reads its
    accumulator while it writes)."""
    p, t, u = VReg(1, 8), VReg(2, 8), VReg(3, 8)
    code = _body(p, t, u)
    if breaker == "label":
        code.insert(1, VIns(None, label="L"))
    elif breaker == "branch":
        code.insert(1, _ins("SYNC"))
    elif breaker == "guard":
        code[2] = _ins("ALU.FMUL.F32", _run(p), _run(u), _run(u),
                       guard=VP(VReg(9, 1, kind="P"), 0, 1))
    elif breaker == "part":
        code[2] = _ins("ALU.FMUL.F32", _run(p, 0, 4), _run(u, 0, 4), _run(u, 0, 4))
    else:
        code[0] = _ins("SQMMA.M128N32K16.F32.BF16.BF16", _run(t), VR(VReg(7, 1), 0, 1),
                       VR(VReg(8, 1), 0, 1), IntImm(1), IntImm(0), IntImm(0))
        code[0] = VIns(code[0].row, (_run(p),) + code[0].operands[1:])
    assert p not in holes(code)


def test_a_guest_takes_the_registers_of_a_dead_block():
    """Host ``p`` [0, 10] dead in (2, 8); ``g`` [3, 6] fits only in ``p``'s registers;
    without the hole the scan finds no room; a block outliving the hole gets none."""
    p, other, g, late = VReg(1, 8), VReg(2, 8), VReg(3, 8), VReg(4, 8)
    iv = {p: [0, 10], other: [1, 10], g: [3, 6]}
    where, _, _, top = allocate_blocks(iv, "R", 16, False, gaps={p: [(2, 8)]})
    assert where[g] == where[p] and top == 16
    with pytest.raises(Full):
        allocate_blocks(iv, "R", 16, False)
    with pytest.raises(Full):
        allocate_blocks({p: [0, 10], other: [1, 10], late: [3, 8]}, "R", 16, False,
                        gaps={p: [(2, 8)]})


def test_two_guests_of_one_hole_do_not_share_registers():
    p, a, b = VReg(1, 8), VReg(2, 4), VReg(3, 4)
    iv = {p: [0, 10], a: [3, 6], b: [4, 7]}
    where, _, _, top = allocate_blocks(iv, "R", 8, False, gaps={p: [(2, 8)]})
    assert {where[a], where[b]} == {0, 4} and top == 8
    with pytest.raises(Full):
        allocate_blocks({**iv, VReg(4, 4): [5, 6]}, "R", 8, False, gaps={p: [(2, 8)]})


def test_tiles_from_the_top_leave_the_bottom_to_scalars():
    """A 16-register tile placed first fit takes R0-15; a scalar born while it lives goes
    above it and one born after it to R0, so a second aligned tile has no room although
    18 of 32 registers are live. Placed from the top down (the allocation's second try
    without spills, regalloc._fit) the tiles keep R16-31 and the scalars R0, R1."""
    from mutile.backends.pinghu.codegen.regalloc import _fit
    t1, t2 = VReg(1, 16, 16), VReg(2, 16, 16)
    s1, s2 = VReg(3, 1), VReg(4, 1)
    iv = {t1: [0, 3], s1: [1, 10], s2: [4, 10], t2: [5, 10]}
    with pytest.raises(Full):
        allocate_blocks(iv, "R", 32, False)
    where, top = _fit(iv, 32, {}, {})
    assert where[t1] == where[t2] == 16 and sorted((where[s1], where[s2])) == [0, 1]
    assert top == 32
