"""Loop-invariant code motion on the virtual instructions, before register allocation.

The lowerings recompute what they need where they need it (index runs from the thread
id, fragment addresses, offsets), which inside a loop repeats every iteration. An
instruction is hoisted to just before its loop when it is pure (ALU, SFU, CVT, S2R),
unguarded, the only definition of its destinations, and reads only values defined
outside the loop (or by instructions already hoisted); out of a loop with loops inside,
only what the loop's own level needs (a value only a nested loop reads stays just before
that loop, computed once per iteration of this one). Hoisting is speculative only for
such pure instructions, which cannot fault. Hoisted values stay live across the loop, so
at most :data:`BUDGET` registers are hoisted across any loop (more would spill inside
it): a value hoisted out of an outer loop is live across every loop nested in it too,
and counts against each of theirs (once: a value hoisted out of an inner loop, then out
of the loop around it, counts once against the inner one).
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
    across: dict = {}               # hoisted block -> the loops it is live across
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
            loops = [code[begin].loop[1]] + [i.loop[1] for i in inside
                                             if i.loop is not None and i.loop[0] == "begin"]
            wanted = _wanted(inside, defs, defined_in)
            out, keep = [], []
            for ins in inside:
                w = _writes(ins) if ins.row is not None else []
                if (id(ins) in wanted and not any(v in defined_in for v in _reads(ins))
                        and _charge(w, loops, left, across)):
                    out.append(ins)
                    defined_in -= set(w)
                else:
                    keep.append(ins)
            if out:
                code[begin:end] = out + [code[begin]] + keep
                moved = True
                break
    return code


def _pure(ins: VIns, defs: dict) -> bool:
    w = _writes(ins)
    return (ins.row.unit in _PURE and ins.guard is None and bool(w)
            and all(defs[v] == 1 for v in w))


def _wanted(inside: list[VIns], defs: dict, defined_in: set) -> set:
    """ids of the instructions of a loop body worth hoisting: pure ones of the body's
    own level (a nested loop hoisted its invariants to just before it already) whose
    values the body's own level reads, and what they read. A value that only a nested
    loop reads is computed once per iteration of this loop before that loop; hoisting it
    out of this one too would save nothing but keep it live across this whole loop."""
    depth, level = 0, []
    for ins in inside:
        if ins.loop is not None:
            depth += 1 if ins.loop[0] == "begin" else -1
        elif ins.row is not None and depth == 0:
            level.append(ins)
    cand = {v: ins for ins in level if _pure(ins, defs) for v in _writes(ins)}
    stay = [ins for ins in level if not _pure(ins, defs)]
    todo = [cand[v] for ins in stay for v in _reads(ins) if v in cand]
    wanted: set = set()
    while todo:
        ins = todo.pop()
        if id(ins) not in wanted:
            wanted.add(id(ins))
            todo.extend(cand[v] for v in _reads(ins) if v in cand)
    return wanted


def _charge(w: list, loops: list, left: dict, across: dict) -> bool:
    """Whether the blocks ``w`` fit the budgets of ``loops`` (a loop and those nested in
    it), each loop charged only for the blocks not yet live across it; charges them."""
    regs = [v for v in w if v.kind == "R"]
    new = {ident: sum(v.nregs for v in regs if ident not in across.get(v, ()))
           for ident in loops}
    if any(n > left.get(ident, BUDGET) for ident, n in new.items()):
        return False
    for ident, n in new.items():
        left[ident] = left.get(ident, BUDGET) - n
    for v in regs:
        across.setdefault(v, set()).update(loops)
    return True


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
