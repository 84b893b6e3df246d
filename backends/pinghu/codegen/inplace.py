"""Which blocks an instruction may write in place of a source it reads last
(``in-place`` analysis for :mod:`.regalloc`).

``ALU.FMUL.F32 %b[0:64], %a[0:64], x`` where ``%a`` dies: ``%b`` may take ``%a``'s
registers, since an instruction reads all its elements before writing any, and split
into element chunks (for spilled operands) chunk ``i`` reads and writes element ``i``
only. The allocator grants it only when ``%a``'s interval ends at that instruction.
Only synchronous units qualify (an SQMMA's destination is written until its wait), only
an instruction with one register destination, the whole first mention of its block, and
only a source of the same size that the instruction reads as whole runs alone.
"""
from __future__ import annotations

from .values import VR, VIns, VMem

_SYNC_UNITS = {"ALU", "SFU", "CVT"}


def in_place(code: list[VIns]) -> dict:
    """VReg ``b`` -> the blocks ``a`` whose registers ``b`` may take at its definition."""
    first: dict = {}
    out: dict = {}
    for pos, ins in enumerate(code):
        if ins.row is None:
            continue
        mentioned = [o.base.v if isinstance(o, VMem) else o.v for o in ins.operands
                     if isinstance(o, VR) or (isinstance(o, VMem) and o.base is not None)]
        new = [v for v in mentioned if v not in first]
        for v in mentioned:
            first.setdefault(v, pos)
        if ins.row.unit not in _SYNC_UNITS or ins.row.family == "ALU.IOTA":
            continue
        dsts = [o for spec, o in zip(ins.row.operands, ins.operands)
                if spec.dst and isinstance(o, VR)]
        if len(dsts) != 1 or dsts[0].v not in new:
            continue
        d = dsts[0]
        if d.start or d.count != d.v.nregs or d.v.kind != "R":
            continue
        srcs: dict = {}
        for spec, o in zip(ins.row.operands, ins.operands):
            if spec.dst:
                continue
            base = o.base if isinstance(o, VMem) else o
            if isinstance(base, VR):
                srcs.setdefault(base.v, []).append(
                    not isinstance(o, VMem) and spec.width == _width(ins, d) and
                    base.start == 0 and base.count == d.count)
        ok = [a for a, whole in srcs.items()
              if a is not d.v and a.nregs == d.v.nregs and all(whole)]
        if ok and ins.guard is None:
            out[d.v] = ok
    return out


def _width(ins: VIns, d: VR) -> int:
    """The element width of destination ``d``'s slot."""
    for spec, o in zip(ins.row.operands, ins.operands):
        if o is d:
            return spec.width
    return 0
