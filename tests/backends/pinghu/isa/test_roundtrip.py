"""text -> Program -> bytes -> Program -> text reproduces the canonical text: for random
valid instructions of every row (generated from the table, so a new row is covered
automatically), for random whole programs (hypothesis), and for hand-written listings with
guards, runs, labels, branches and comments."""
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mutile.backends.pinghu import (INSTRS, assemble, decode, disassemble, encode,
    format_instruction, listing)
from mutile.backends.pinghu.isa.disasm import label_names
from mutile.backends.pinghu.isa.operands import Comment, Label, Pred, PredRun, Run
from mutile.errors import Loc

from ..gen import Draw, every_row_program, program

HYP = settings(max_examples=30, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow])


def shape(p):
    return [(i.op, i.operands, i.guard) for i in p.instructions]


def check_round_trip(text: str):
    """Assemble, encode, decode and disassemble ``text``; every step must agree."""
    p1 = assemble(text)
    assert disassemble(p1) == text
    data = encode(p1)
    p2 = decode(data)
    assert p2 == p1
    assert disassemble(p2) == text
    assert encode(p2) == data
    return p1


@pytest.mark.parametrize("row", INSTRS, ids=lambda r: r.mnemonic)
def test_every_row_round_trips(row):
    for seed in range(5):
        p0 = program(Draw.rng(1000 * seed + row.opcode), [row], comments=False)
        p1 = check_round_trip(disassemble(p0))
        assert shape(p1) == shape(p0)


@pytest.mark.parametrize("seed", range(4))
def test_shuffled_programs_of_every_row_round_trip(seed):
    rows = list(INSTRS)
    random.Random(seed).shuffle(rows)
    p0 = program(Draw.rng(seed), rows)
    p1 = check_round_trip(disassemble(p0))
    assert shape(p1) == shape(p0)


@HYP
@given(data=st.data())
def test_random_programs_round_trip(data):
    d = Draw.hyp(data)
    rows = [d.choice(INSTRS) for _ in range(d.integers(1, 25))]
    p0 = program(d, rows)
    p1 = check_round_trip(disassemble(p0))
    assert shape(p1) == shape(p0)


def test_a_program_with_every_instruction():
    p0 = every_row_program(seed=3)
    p1 = check_round_trip(disassemble(p0))
    assert [i.op for i in p1.instructions] == INSTRS
    assert shape(p1) == shape(p0)


HAND = """\
// header comment
.kernel softmax_row
.param X ptr c[0x0]
.param Y ptr c[0x8]
.param n s32 c[0x10]
.param scale f32 c[0x14]
.threads 128
.regs 120
.shared 512
.local 16

        // softmax.py:7  row = ml.program_id(0)
        S2R R0, SR_CTAID.X
        S2R R1, SR_TID.X
        S2R R2, SR_LANEID
        // softmax.py:8  cols = ml.arange(0, BLOCK)
        ALU.IMAD.S32 R3, R0, c[0x10], R1
        ALU.ISETP.LT.S32 P[0:4], R[4:8], c[0x10]
        ALU.IMAD.WIDE.S32 R[8:16], R[4:8], 4, c[0x0]
        @P[0:4] LSU.LD.GLOBAL.B32 R[16:20], [R[8:16]+0x10]
        @!P[0:4] ALU.MOV.IMM R[16:20], -inf
        ALU.FMNMX.MAX.F32 R20, R16, R17
        SHFL.BFLY.B32 R21, R20, 16
        SHFL.IDX.B32 R21, R20, R2
        ALU.FMUL.F32 R[16:20], R[16:20], 1.442695
        SFU.EX2.F32 R[16:20], R[16:20]
        ALU.FFMA.F32 R22, R16, -0.0, c[0x14]
        CVT.F16.F32 R[24:28], R[16:20]
        ALU.PACK.B16 R28, R24, R25
        CVT.F64.F32 R[30:38], R[16:20]
        ALU.FADD.F64 R[30:38], R[30:38], c[0x8]
        LSU.ST.SHARED.B128 [R1+0x100], R16
        BAR.SYNC 0
        LSU.LD.SHARED.B64 R40, [0x100]
        LSU.ST.LOCAL.B32 [0x4], R40
        WMMA.M16N8K16.F32.F16.F16 R[44:60], R64, R[68:76], R[44:60]
        ALU.MOV.IMM R76, 0f7FC00001
        ALU.MOV.IMM R77, 0xdeadbeef
        ALU.LOP.AND.B32 R78, R77, -16
        ALU.P2R.B32 R79, !P3
        ALU.PLOP.AND P5, !P1, PT
        // softmax.py:12  for k in range(0, n, BLOCK):
        ALU.MOV.B32 R80, RZ
        SSY L_exit
L_head:
        ALU.ISETP.GE.S32 P6, R80, c[0x10]  // k >= n
        @P6 SYNC
        ALU.IADD.S32 R80, R80, 128
        BRA L_head
L_exit:
L_alias:
        @P0 BRA L_exit
        EXIT
        // trailing
L_end:
"""


def test_hand_written_listing():
    p = check_round_trip(HAND)
    assert p.name == "softmax_row" and (p.threads, p.regs, p.shared, p.local) == \
        (128, 120, 512, 16)
    assert [q.name for q in p.params] == ["X", "Y", "n", "scale"]
    labels = p.labels()
    assert labels == {"L_head": 30, "L_exit": 34, "L_alias": 34, "L_end": 36}
    assert p.instructions[30].comment == "k >= n"
    assert p.header_comments == ("header comment",)
    assert p.epilogue == (Comment("trailing"), Label("L_end"))
    lsu = p.instructions[6]
    assert lsu.guard == PredRun(0, 4) and lsu.count == 4
    assert lsu.operands[1].base == Run(8, 16)
    assert p.instructions[7].guard == PredRun(0, 4, neg=True)
    assert p.instructions[31].guard == Pred(6)


def test_source_locations_follow_the_comments():
    p = assemble(HAND)
    locs = [i.loc for i in p.instructions]
    assert locs[0] == locs[2] == Loc("softmax.py", 7, 0)
    assert locs[3] == Loc("softmax.py", 8, 0)
    assert locs[27] == Loc("softmax.py", 8, 0)
    assert locs[28] == Loc("softmax.py", 12, 0) == locs[-1]
    assert decode(encode(p)).instructions[3].loc == Loc("softmax.py", 8, 0)


def test_listing_lines_point_at_instructions():
    p = assemble(HAND)
    text, lines = listing(p)
    rows = text.splitlines()
    names = label_names(p)[0]
    for ins, n in zip(p.instructions, lines):
        assert rows[n - 1].strip() == format_instruction(ins, names)
    assert [i.line for i in p.instructions] == lines


def test_text_is_made_canonical():
    sloppy = (".kernel k // kernel\n.param X ptr c[16]\n\n  L1: ALU.IADD.S32 R1,R2,0x10//hi\n"
              "ALU.FADD.F32 R3, R4, 2   \n\tLSU.LD.GLOBAL.B32 R5, [ R6 + 16 ]\n"
              "ALU.MOV.IMM R7, 4096\nALU.MOV.IMM R7, 4097\nBRA L1\n")
    canon = disassemble(assemble(sloppy))
    assert canon == """\
// kernel
.kernel k
.param X ptr c[0x10]
.threads 128
.regs 8
.shared 0
.local 0

L1:
        ALU.IADD.S32 R1, R2, 16  // hi
        ALU.FADD.F32 R3, R4, 2.0
        LSU.LD.GLOBAL.B32 R5, [R6+0x10]
        ALU.MOV.IMM R7, 4096
        ALU.MOV.IMM R7, 0x1001
        BRA L1
"""
    check_round_trip(canon)


def test_two_labels_on_one_pc_branch_by_the_first():
    text = ".kernel k\nA:\nB:\n        BRA B\n"
    assert disassemble(assemble(text)).endswith("A:\nB:\n        BRA A\n")


def test_a_branch_target_without_a_label_gets_one():
    p = assemble(".kernel k\n        NOP\nL_x:\n        BRA L_x\n")
    p.instructions[1].prelude = ()
    p.instructions[0].prelude = (Label("L1"),)
    text = disassemble(p)
    assert "L1:\n        NOP\nL1_1:\n        BRA L1_1\n" in text
    check_round_trip(text)
