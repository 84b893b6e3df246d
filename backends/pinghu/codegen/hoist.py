"""Loop-invariant code motion on the virtual instructions, before register allocation.

The lowerings recompute what they need where they need it (index runs from the thread
id, fragment addresses, offsets), which inside a loop repeats every iteration. An
instruction is hoisted to just before its loop when it is pure (ALU, SFU, CVT, S2R),
unguarded, the only definition of its destinations, and reads only values defined
outside the loop (or by instructions already hoisted). Hoisting is speculative only for
such pure instructions, which cannot fault. Hoisted values stay live across the loop, so
at most :data:`BUDGET` registers are hoisted per loop (more would spill inside it).
"""
from __future__ import annotations

from .values import VP, VR, VIns, VMem

BUDGET = 48
_PURE = {"ALU", "SFU", "CVT", "S2R"}


def _reads(ins: VIns):
    for spec, o in zip(ins.row.operands, ins.operands):
        if isinstance(o, VMem) and o.base is not None:
            yield o.base.v
        elif isinstance(o, (VR, VP)) and not spec.dst:
            yield o.v
    if ins.guard is not None:
        yield ins.guard.v


def _writes(ins: VIns):
    return [o.v for spec, o in zip(ins.row.operands, ins.operands)
            if spec.dst and isinstance(o, (VR, VP))]


def hoist(code: list[VIns]) -> list[VIns]:
    """``code`` with loop-invariant instructions moved out of their loops (innermost
    first; repeated until nothing moves)."""
    code = list(code)
    left: dict = {}                 # loop id -> registers it may still hoist
    moved = True
    while moved:
        moved = False
        defs: dict = {}
        for ins in code:
            if ins.row is not None:
                for v in _writes(ins):
                    defs[v] = defs.get(v, 0) + 1
        for begin, end in loop_spans(code):
            inside = code[begin + 1:end]
            defined_in = {v for ins in inside if ins.row is not None for v in _writes(ins)}
            ident = code[begin].loop[1]
            out, keep, budget = [], [], left.get(ident, BUDGET)
            for ins in inside:
                w = _writes(ins) if ins.row is not None else []
                if (ins.row is not None and ins.row.unit in _PURE and ins.guard is None
                        and w and all(defs[v] == 1 for v in w)
                        and not any(v in defined_in for v in _reads(ins))
                        and sum(v.nregs for v in w if v.kind == "R") <= budget):
                    out.append(ins)
                    budget -= sum(v.nregs for v in w if v.kind == "R")
                    defined_in -= set(w)
                else:
                    keep.append(ins)
            left[ident] = budget
            if out:
                code[begin:end] = out + [code[begin]] + keep
                moved = True
                break
    return code


def loop_spans(code: list[VIns]) -> list[tuple[int, int]]:
    """(begin, end) marker positions of every loop, innermost first."""
    stack, out = [], []
    for pos, ins in enumerate(code):
        if ins.loop is not None:
            if ins.loop[0] == "begin":
                stack.append(pos)
            else:
                out.append((stack.pop(), pos))
    return out
