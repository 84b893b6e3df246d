"""Rematerialization of constants (pass ``rematerialize-constants``), before allocation.

A *constant* block is written once, whole, by an unguarded instruction that reads no
register: ``ALU.MOV.IMM`` of an immediate, a parameter's move from the constant bank,
an ``S2R`` of a special register (all fixed for a thread's life). Its value is the same
wherever that instruction runs, so instead of keeping the block live from its
definition to its last use (across a loop, when :mod:`.hoist` moved it out of one, or
to an epilogue that reads a parameter), the definition can be emitted again right
before the instructions that read it, into a fresh block that lives a few instructions.

That costs an instruction per copy (per iteration, inside a loop), so the register
allocator asks for it only when an allocation without spills fails: it
rematerializes the constants live across the point where no register was left
(:func:`live_across`) and tries again (:func:`.regalloc.allocate`).
"""
from __future__ import annotations

from dataclasses import replace

from .values import VP, VR, VIns, VMem, VReg

NEAR = 8        # a copy serves later reads up to this many instructions on (no label between)


def _reads(ins: VIns):
    """The register operands ``ins`` reads (memory bases included), with their indices."""
    for k, (spec, o) in enumerate(zip(ins.row.operands, ins.operands)):
        base = o.base if isinstance(o, VMem) else o
        if isinstance(base, VR) and not spec.dst:
            yield k, base


def constants(code: list[VIns], pinned=()) -> dict:
    """VReg -> its defining instruction, for every constant block (module doc) that is
    not ``pinned``."""
    writes: dict = {}
    for ins in code:
        if ins.row is None:
            continue
        for spec, o in zip(ins.row.operands, ins.operands):
            if spec.dst and isinstance(o, (VR, VP)):
                writes[o.v] = writes.get(o.v, 0) + 1
    out: dict = {}
    for ins in code:
        if ins.row is None or ins.guard is not None or ins.row.unit not in ("ALU", "S2R"):
            continue
        regs = [(spec, o) for spec, o in zip(ins.row.operands, ins.operands)
                if isinstance(o, (VR, VP, VMem))]
        if len(regs) != 1 or not regs[0][0].dst or not isinstance(regs[0][1], VR):
            continue
        d = regs[0][1]
        if d.start == 0 and d.count == d.v.nregs and writes[d.v] == 1 and d.v not in pinned:
            out[d.v] = ins
    return out


def live_across(iv: dict, blocks: dict, pos: int, code: list[VIns]) -> dict:
    """The ``blocks`` whose intervals ``iv`` span instruction ``pos`` without its
    mentioning them (live there only to be read later)."""
    here = {o.v for o in code[pos].operands if isinstance(o, VR)} | \
        {o.base.v for o in code[pos].operands if isinstance(o, VMem) and o.base is not None}
    return {v: d for v, d in blocks.items()
            if v in iv and iv[v][0] < pos < iv[v][1] and v not in here}


def rematerialize(code: list[VIns], blocks: dict) -> list[VIns]:
    """``code`` with the definitions of ``blocks`` (VReg -> defining instruction) dropped
    and emitted again, into fresh blocks, before the instructions that read them (one
    copy serves the reads of the next :data:`NEAR` instructions on a straight stretch)."""
    if not blocks:
        return code
    fresh = max((o.v.id for ins in code for o in ins.operands if isinstance(o, (VR, VP))),
                default=0)
    drop = {id(d) for d in blocks.values()}
    out: list[VIns] = []
    copy: dict = {}             # block -> (its current copy, position of its last read)
    for ins in code:
        if ins.row is None:     # a label or loop marker ends a straight stretch
            copy = {}
            out.append(ins)
            continue
        if id(ins) in drop:
            continue
        ops, changed = list(ins.operands), False
        for k, vr in _reads(ins):
            v = vr.v
            if v not in blocks:
                continue
            hit = copy.get(v)
            if hit is None or len(out) - hit[1] > NEAR:
                fresh += 1
                new = VReg(fresh, v.nregs, v.align, v.kind, v.name)
                d = blocks[v]
                out.append(replace(d, operands=(VR(new, 0, v.nregs),) + d.operands[1:]))
                hit = (new, 0)
            copy[v] = (hit[0], len(out))
            nv = VR(hit[0], vr.start, vr.count)
            ops[k] = VMem(nv, ops[k].offset) if isinstance(ops[k], VMem) else nv
            changed = True
        out.append(replace(ins, operands=tuple(ops)) if changed else ins)
    return out
