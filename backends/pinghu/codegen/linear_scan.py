"""The linear scan of :mod:`.regalloc`: blocks of registers (or predicates) placed in
order of their first mention, each for its whole interval, first fit.

**Holes.** An interval is one range, but a block can be dead inside it: a loop carrier
read at the top of the body and written again, whole, further down is dead between the
two, yet the back edge keeps it live over the whole loop. :func:`holes` finds such
stretches: after a block's read at ``r``, an unguarded instruction at ``w`` writes all
of it without reading it, and between them (a straight stretch: no label, loop marker
or branch) nothing mentions it; ``r`` is no SQMMA (which reads its accumulator while
it writes). Another block whose whole interval lies inside the
stretch may take its registers (a *guest*): at ``r`` the instruction reads before it
writes, and the guest is dead before ``w`` rewrites the host. Registers are counted by
occupants, so a guest's end frees only what nobody else holds. Only the allocation
without spills uses holes; spilling falls back to plain intervals.
"""
from __future__ import annotations

from .values import VR, VIns, VMem


class Full(Exception):
    """:func:`allocate_blocks` without spilling found no room for block ``v``."""

    def __init__(self, v):
        super().__init__(v)
        self.v = v


def holes(code: list[VIns]) -> dict:
    """VReg -> [(r, w)]: the stretches strictly between ``r`` and ``w`` in which the
    register block is dead (see the module doc)."""
    last_read: dict = {}            # block -> position of its latest read on this stretch
    out: dict = {}
    for pos, ins in enumerate(code):
        if ins.row is None or ins.row.unit == "BRA":
            last_read.clear()       # a label, loop marker or branch ends every stretch
            continue
        reads, writes = set(), []
        for spec, o in zip(ins.row.operands, ins.operands):
            if isinstance(o, VMem) and o.base is not None:
                reads.add(o.base.v)
            elif isinstance(o, VR):
                if spec.dst:
                    writes.append(o)
                else:
                    reads.add(o.v)
        if ins.guard is None:
            for o in writes:
                v = o.v
                r = last_read.get(v)
                if r is not None and v not in reads and o.start == 0 and \
                        o.count == v.nregs and pos > r + 1:
                    out.setdefault(v, []).append((r, pos))
        for o in writes:
            last_read.pop(o.v, None)
        if ins.row.family == "SQMMA":   # reads its accumulator while it writes: no start
            for v in reads:
                last_read.pop(v, None)
            continue
        for v in reads:
            last_read[v] = pos
    return out


def allocate_blocks(iv: dict, kind: str, budget: int, can_spill: bool, weight=None,
                    reuse=None, tile: int = 256, gaps=None):
    """Linear scan. When a block does not fit, spill the cheapest blocks (by ``weight``)
    among the live ones and itself until it fits (a block is spilled for its whole life;
    registers it held earlier simply stay unused); without ``can_spill``, raise
    :class:`Full` naming the block. Blocks of ``tile`` registers or more are placed from
    the top down (apart from long-lived scalars at the bottom). A block takes the
    registers of a source in ``reuse`` (:func:`.inplace.in_place`) that dies where it is
    defined, or (without spilling, ``gaps`` from :func:`holes`) those of a live block
    dead for its whole interval."""
    order = sorted((v for v in iv if v.kind == kind), key=lambda v: (iv[v][0], v.id))
    occ = [0] * budget              # occupants of each register
    free = [True] * budget
    active: list = []
    where: dict = {}
    spilled: dict = {}
    local = 0
    top = 0
    gaps = gaps if not can_spill else None

    def hold(v, slot, d):
        for i in range(slot, slot + v.nregs):
            occ[i] += d
            free[i] = occ[i] == 0

    def spill(v):
        nonlocal local
        local = -(-local // 16) * 16
        spilled[v] = local
        local += 4 * v.nregs

    for v in order:
        start, end = iv[v]
        keep = []
        for a in active:
            if iv[a][1] < start:
                hold(a, where[a], -1)
            else:
                keep.append(a)
        active = keep
        slot = in_place_slot(v, iv, where, active, hold, reuse)
        if slot is None:
            slot = first_fit(free, v.nregs, max(v.align, 1), v.nregs >= tile)
        if slot is None and gaps:
            slot = _guest_slot(v, start, end, active, where, occ, gaps)
        if slot is None:
            if not can_spill:
                raise Full(v)
            mine = (weight or {}).get(v, 0)
            victims = []
            trial = list(free)
            for a in sorted(active, key=lambda a: ((weight or {}).get(a, 0), -a.nregs)):
                if sum((weight or {}).get(x, 0) for x in victims + [a]) >= mine:
                    break
                victims.append(a)
                trial[where[a]:where[a] + a.nregs] = [True] * a.nregs
                slot = first_fit(trial, v.nregs, max(v.align, 1))
                if slot is not None:
                    break
            if slot is None:
                spill(v)
                continue
            for a in victims:
                active.remove(a)
                hold(a, where[a], -1)
                del where[a]
                spill(a)
        hold(v, slot, 1)
        where[v] = slot
        top = max(top, slot + v.nregs)
        active.append(v)
    return where, spilled, local, top


def _guest_slot(v, start: int, end: int, active: list, where: dict, occ: list, gaps: dict):
    """A slot for ``v`` among the registers of live blocks with a hole around all of
    ``[start, end]``, or None."""
    hosts = [a for a in active
             if any(r <= start and end < w for r, w in gaps.get(a, ()))]
    if not hosts:
        return None
    own = [0] * len(occ)
    for a in hosts:
        for i in range(where[a], where[a] + a.nregs):
            own[i] += 1
    trial = [occ[i] == own[i] for i in range(len(occ))]
    return first_fit(trial, v.nregs, max(v.align, 1))


def in_place_slot(v, iv: dict, where: dict, active: list, hold, reuse):
    """The slot of a source of ``v`` that dies at ``v``'s definition, freed, or None."""
    start = iv[v][0]
    for a in (reuse or {}).get(v, ()):
        if a in where and a in active and iv[a][1] == start and \
                where[a] % max(v.align, 1) == 0:
            active.remove(a)
            hold(a, where[a], -1)
            return where[a]
    return None


def first_fit(free: list, n: int, align: int, top_down: bool = False):
    limit = len(free) - n
    if limit < 0:
        return None
    starts = range(limit - limit % align, -1, -align) if top_down else range(0, limit + 1, align)
    for i in starts:
        if all(free[i:i + n]):
            return i
    return None
