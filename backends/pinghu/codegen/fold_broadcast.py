"""Broadcast moves folded into their readers (pass ``fold-broadcasts``), before allocation.

A row statistic broadcast over the row a thread holds (``alpha[:, None]`` with one row per
thread, :func:`.lowering.shape.own_rows`) is ``ALU.MOV.B32 %b[0:n], %r``: ``n`` registers
holding one value. An elementwise instruction broadcasts a plain register operand by
itself (docs/isa.md, "Runs"), so a reader ``ALU.FMUL.F32 %d[0:n], %acc[0:n], %b[0:n]``
may read ``%r`` instead, and the move and its ``n`` registers go. Folded when the move
is ``%b``'s only write, every other mention of ``%b`` is a whole-run source of a
synchronous elementwise instruction of ``n`` elements after it, not writing ``%r``,
with no write of ``%r`` and no loop boundary in between.
"""
from __future__ import annotations

from dataclasses import replace

from .values import VR, VIns, VMem

_UNITS = {"ALU", "SFU", "CVT"}


def fold_broadcasts(code: list[VIns]) -> list[VIns]:
    """``code`` with foldable broadcast moves dropped and their readers reading the
    broadcast register."""
    code = list(code)
    uses: dict = {}
    for pos, ins in enumerate(code):
        if ins.row is None:
            continue
        for k, (spec, o) in enumerate(zip(ins.row.operands, ins.operands)):
            base = o.base if isinstance(o, VMem) else o
            if isinstance(base, VR):
                uses.setdefault(base.v, []).append((pos, k, spec.dst or isinstance(o, VMem)))
        if ins.guard is not None:
            uses.setdefault(ins.guard.v, []).append((pos, -1, True))
    drop, subst = set(), {}
    for p, ins in enumerate(code):
        if ins.row is None or ins.row.mnemonic != "ALU.MOV.B32" or ins.guard is not None:
            continue
        d, r = ins.operands
        if not isinstance(r, VR) or r.count != 1 or d.start or d.count != d.v.nregs or \
                d.count < 2 or r.v is d.v or r.v in subst or d.v in subst:
            continue
        readers = [u for u in uses[d.v] if u[0] != p]
        if not readers or any(u[0] < p or u[2] for u in readers) or \
                not all(_reads_whole(code[q], k, d.count) for q, k, _ in readers) or \
                not _stable(code, uses.get(r.v, []), p, max(q for q, _, _ in readers)):
            continue
        drop.add(p)
        subst[d.v] = r
        for q, k, _ in readers:
            ops = list(code[q].operands)
            ops[k] = r
            code[q] = replace(code[q], operands=tuple(ops))
    return [ins for pos, ins in enumerate(code) if pos not in drop]


def _reads_whole(ins: VIns, k: int, n: int) -> bool:
    """Whether operand ``k`` of ``ins`` is a whole 32-bit source run of ``n`` elements of
    a synchronous elementwise instruction with a destination run of ``n`` elements."""
    row = ins.row
    if row.unit not in _UNITS or row.family == "ALU.IOTA" or row.operands[k].width != 1:
        return False
    o = ins.operands[k]
    if o.start or o.count != n:
        return False
    return any(spec.dst and isinstance(x, VR) and x.count == n * spec.width
               for spec, x in zip(row.operands, ins.operands))


def _stable(code: list[VIns], r_uses: list, p: int, last: int) -> bool:
    """No write of the broadcast register and no loop marker after ``p`` up to ``last``."""
    if any(p < pos <= last and dst for pos, _, dst in r_uses):
        return False
    return not any(code[pos].loop is not None for pos in range(p + 1, last))
