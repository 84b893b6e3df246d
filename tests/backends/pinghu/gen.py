"""Random *valid* instructions and programs, built from the instruction table alone, so a
new row is covered by the round-trip tests without anyone listing it.

``Draw`` adapts either hypothesis (``Draw.hyp(data)``) or ``random.Random`` (``Draw.rng``)
to the three choices the generators need.
"""
from __future__ import annotations

import random

from mutile.backends.pinghu.isa import INSTRS
from mutile.backends.pinghu.isa.operands import (MAX_PRED, MAX_REG, PT, RZ, SPECIAL_REGS, CBank,
    Comment, FloatImm, IntImm, Label, Mem, Pred, PredRun, Reg, Run, SReg, Target)
from mutile.backends.pinghu.isa.program import Instruction, Param, Program

# eight 64-bit parameters: c[0x0] .. c[0x38]
PARAMS = tuple(Param(f"p{i}", "u64", 8 * i) for i in range(8))
PARAM_BYTES = 64


class Draw:
    """integers(lo, hi) inclusive, choice(seq), boolean()."""

    def __init__(self, integers, choice):
        self.integers, self.choice = integers, choice

    def boolean(self) -> bool:
        return bool(self.integers(0, 1))

    @staticmethod
    def hyp(data) -> "Draw":
        from hypothesis import strategies as st
        return Draw(lambda lo, hi: data.draw(st.integers(lo, hi)),
                    lambda seq: data.draw(st.sampled_from(list(seq))))

    @staticmethod
    def rng(seed: int) -> "Draw":
        r = random.Random(seed)
        return Draw(r.randint, r.choice)


def _edge_int(d: Draw, lo: int, hi: int) -> int:
    """Mostly the range's edges and small values, sometimes anything in range."""
    picks = [lo, hi, max(lo, min(hi, 0)), max(lo, min(hi, 1)), max(lo, min(hi, -1))]
    return d.choice(picks) if d.boolean() else d.integers(lo, hi)


def _aligned(d: Draw, width: int, top: int) -> int:
    """A register number divisible by ``width`` whose last register is <= ``top``."""
    return width * d.integers(0, (top - width + 1) // width)


def _reg(d, width, count, allow_run):
    if allow_run and count:
        s = width * d.integers(0, (MAX_REG + 1 - count * width) // width)
        return Run(s, s + count * width)
    return Reg(RZ) if d.integers(0, 7) == 0 else Reg(_aligned(d, width, MAX_REG))


def _pred(d, dst, count, allow_run):
    neg = (not dst) and d.boolean()
    if allow_run and count:
        s = d.integers(0, MAX_PRED + 1 - count)
        return PredRun(s, s + count, neg)
    return Pred(PT if d.integers(0, 7) == 0 else d.integers(0, MAX_PRED), neg)


def _float(d) -> FloatImm:
    special = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
               0x7F800001, 0x7FBFFFFF, 0x00000001, 0x7F7FFFFF, 0x3F800000, 0xBDCCCCCD]
    return FloatImm(d.choice(special) if d.boolean() else d.integers(0, 2**32 - 1))


def operand(d: Draw, spec, count: int, n_instrs: int, runs_ok: bool):
    """A valid value for slot ``spec`` of an instruction whose runs have ``count``
    elements (0: none); destinations are runs exactly when count > 0."""
    if spec.group:                       # a register group: exactly spec.group registers
        if spec.group == 1 and d.boolean():
            return Reg(d.integers(0, MAX_REG))
        s = d.integers(0, MAX_REG + 1 - spec.group)
        return Run(s, s + spec.group)
    kinds = list(spec.accepts)
    if spec.dst and count:
        kinds = [k for k in kinds if k in (Run, PredRun)]
    elif spec.dst or not (runs_ok and count):
        kinds = [k for k in kinds if k not in (Run, PredRun)]
    k = d.choice(kinds)
    if k in (Reg, Run):
        return _reg(d, spec.width, count, k is Run)
    if k in (Pred, PredRun):
        return _pred(d, spec.dst, count, k is PredRun)
    if k is SReg:
        return SReg(d.choice(list(SPECIAL_REGS)))
    if k is IntImm:
        kind = spec.int_kind
        return IntImm(kind.normalize(_edge_int(d, kind.lo, kind.hi)))
    if k is FloatImm:
        return _float(d)
    if k is CBank:
        size = 4 * spec.width
        return CBank(size * d.integers(0, PARAM_BYTES // size - 1))
    if k is Mem:
        bw = spec.base_width
        base = _reg(d, bw, count, runs_ok and count > 0 and d.boolean())
        return Mem(base, _edge_int(d, -2**31, 2**31 - 1))
    return Target(d.integers(0, n_instrs))


def instruction(d: Draw, row, n_instrs: int = 1) -> Instruction:
    """A random valid instruction of ``row`` in a program of ``n_instrs`` instructions."""
    count = d.integers(1, 8) if row.runs and d.boolean() else 0
    ops = tuple(operand(d, s, count, n_instrs, row.runs) for s in row.operands)
    guard = None
    if row.guardable and d.boolean():
        guard = _pred(d, False, count, row.runs and count > 0 and d.boolean())
    ins = Instruction(row, ops, guard)
    ins.count  # the row's own check: raises if the generator made something invalid
    return ins


def program(d: Draw, rows, comments: bool = True) -> Program:
    """A program with one random instruction per row of ``rows``, random labels and
    comments around them."""
    n = len(rows)
    insts = []
    for i, row in enumerate(rows):
        ins = instruction(d, row, n)
        pre = []
        if comments and d.integers(0, 3) == 0:
            pre.append(Comment(d.choice(["", "note", "k.py:12  x = ml.load(X + offs)",
                                         "a // b", "ünïcode"])))
        if d.integers(0, 3) == 0:
            pre.append(Label(f"L_{i}"))
        ins.prelude = tuple(pre)
        if comments and d.integers(0, 4) == 0:
            ins.comment = d.choice(["", "trailing", "x  y"])
        insts.append(ins)
    return Program("k", PARAMS, 32 * d.integers(1, 32), 255, 4 * d.integers(0, 1000),
                   4 * d.integers(0, 100), insts)


def every_row_program(seed: int = 0) -> Program:
    """One instruction of every row, in table order."""
    return program(Draw.rng(seed), INSTRS)
