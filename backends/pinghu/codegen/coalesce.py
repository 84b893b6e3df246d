"""Copy coalescing of loop carriers (pass ``coalesce-carriers``), before allocation.

A loop carries a value in a *carrier* block ``P``: written before the loop and, in the
body's tail, by the back-edge move ``MOV P <- N`` from the body's new version ``N``
(:mod:`.lowering.control`). Linear scan keeps ``P`` live over the whole loop and ``N``
inside the body, so the two need registers at once (``acc = acc * alpha[:, None]``:
twice the accumulator). When they do not interfere, ``N`` is renamed ``P`` and the
move, now ``P <- P``, is dropped: one register range carries the value around the loop.

They do not interfere when, in program order inside the loop,

- every mention of ``P`` but the move comes no later than ``N``'s first mention ``f``,
  which writes ``N`` (at ``f`` itself ``P`` is read only in runs identical to, or
  disjoint from, the runs of ``N`` it writes: all reads precede the writes, also when
  the instruction is split into chunks);
- ``N`` is mentioned only from ``f`` to the move, and the move sits in the body's tail
  (after the last label, so it runs on every path around the back edge);
- ``f`` lies in no loop nested in this one (its next iteration would read ``P`` again).

The same renaming joins a version made from a block's last read to the instruction that
next writes all of that block, on a straight stretch (``acc = acc * x; acc = acc + y``
inside the body: ``P`` is dead between the two), see :func:`_straight`.

An SQMMA writing ``N`` asynchronously is then in flight only after ``f``, where ``P`` is
dead, and the merged block is one interval: nothing else gets its registers. Program
order is conservative for ``if`` inside the body (a read of ``P`` on the ``else`` path
after a write of ``N`` on the ``then`` path keeps the move). Values read after the loop
read ``P``, which holds the last back-edge value as before.
"""
from __future__ import annotations

from dataclasses import replace

from .hoist import loop_spans
from .values import VR, VIns, VMem

_MOVES = {"ALU.MOV.B32", "ALU.MOV.B64"}


def coalesce(code: list[VIns], pinned=()) -> list[VIns]:
    """``code`` with every non-interfering back-edge move's source renamed to its
    carrier and the move dropped (repeated until none is left)."""
    code = list(code)
    while True:
        hit = _candidate(code, set(pinned))
        if hit is None:
            return code
        code = _merge(code, *hit)


def _operands(ins: VIns):
    """(VR, is_destination) of every register operand of ``ins`` (memory bases read)."""
    for spec, o in zip(ins.row.operands, ins.operands):
        if isinstance(o, VMem) and o.base is not None:
            yield o.base, False
        elif isinstance(o, VR):
            yield o, spec.dst


def _mentions(code: list[VIns]) -> dict:
    """VReg -> [(position, VR, is_destination)] in program order."""
    out: dict = {}
    for pos, ins in enumerate(code):
        if ins.row is None:
            continue
        for vr, dst in _operands(ins):
            out.setdefault(vr.v, []).append((pos, vr, dst))
    return out


def _tail(code: list[VIns], begin: int, end: int) -> list[int]:
    """Positions of the body's tail: after its last label, loop marker or guarded
    instruction, up to the back branch."""
    out = []
    for pos in range(end - 1, begin, -1):
        ins = code[pos]
        if ins.row is None or ins.guard is not None:
            break
        out.append(pos)
    return out


def _candidate(code: list[VIns], pinned: set):
    """(carrier, version, move position) of one coalescible back-edge move, or None."""
    loops = loop_spans(code)
    seen = None
    for begin, end in loops:
        for m in _tail(code, begin, end):
            ins = code[m]
            if ins.row.mnemonic not in _MOVES:
                continue
            d, s = ins.operands
            if not (isinstance(d, VR) and isinstance(s, VR)) or d.v is s.v:
                continue
            p, n = d.v, s.v
            if p in pinned or n in pinned or p.kind != "R" or n.kind != "R" or \
                    p.nregs != n.nregs or d.start or s.start or d.count != p.nregs or \
                    s.count != n.nregs:
                continue
            seen = seen or _mentions(code)
            if _interferes(code, seen, loops, begin, end, m, p, n):
                continue
            return p, n, m
    return _straight(code, seen or _mentions(code), pinned)


def _straight(code: list[VIns], seen: dict, pinned: set):
    """(block, version, None) for a version ``n`` made from ``p``'s last read and read
    by the instruction that next writes all of ``p`` (``n = p * x; p = n + y``), with
    no label, loop marker or mention of ``p`` between: ``p`` is dead there."""
    for w, ins in enumerate(code):
        if ins.row is None or ins.guard is not None or ins.row.family == "SQMMA":
            continue
        dsts = [vr for vr, dst in _operands(ins) if dst]
        if len(dsts) != 1 or dsts[0].start or dsts[0].count != dsts[0].v.nregs:
            continue
        p = dsts[0].v
        if p in pinned or p.kind != "R":
            continue
        reads = dict.fromkeys(vr.v for vr, dst in _operands(ins) if not dst)  # in order
        if p in reads:
            continue
        for n in reads:
            ns = seen.get(n, [])
            if n in pinned or n.nregs != p.nregs or n.kind != "R" or ns[-1][0] != w or \
                    not ns[0][2] or any(pos == ns[0][0] and not d for pos, _, d in ns):
                continue
            f = ns[0][0]
            if any(code[k].row is None for k in range(f + 1, w)):
                continue
            if any(f < pos < w or (pos == f and (dst or not _same_or_apart(code[f], vr, n)))
                   for pos, vr, dst in seen.get(p, [])):
                continue
            if not all(_same_or_apart(ins, vr, p) for vr, dst in _operands(ins)
                       if not dst and vr.v is n):
                continue
            return p, n, None
    return None


def _interferes(code, seen, loops, begin, end, m, p, n) -> bool:
    """Whether carrier ``p`` and version ``n`` may be live at once (module doc)."""
    ns = seen.get(n, [])
    f = ns[0][0]
    if not (begin < f and ns[-1][0] == m and ns[0][2]):
        return True
    if any(pos == f and not dst for pos, _, dst in ns):
        return True         # read before written: live around the back edge
    if any(b < f < e for b, e in loops if begin < b and e < end):
        return True
    for pos, vr, dst in seen.get(p, []):
        if not begin < pos < end or pos == m:
            continue
        if dst or pos > f:
            return True
        if pos == f and not _same_or_apart(code[f], vr, n):
            return True
    return False


def _same_or_apart(ins: VIns, read: VR, n) -> bool:
    """Whether run ``read`` is, for every run of ``n`` that ``ins`` writes, the same run
    or one with no register in common."""
    for vr, dst in _operands(ins):
        if not dst or vr.v is not n:
            continue
        same = vr.start == read.start and vr.count == read.count
        apart = vr.start + vr.count <= read.start or read.start + read.count <= vr.start
        if not (same or apart):
            return False
    return True


def _self_move(ins: VIns) -> bool:
    if ins.row.mnemonic not in _MOVES:
        return False
    d, s = ins.operands
    return isinstance(s, VR) and d.v is s.v and d.start == s.start and d.count == s.count


def _merge(code: list[VIns], p, n, m: int) -> list[VIns]:
    """``code`` with block ``n`` renamed ``p`` and the move at ``m`` dropped (new
    instruction objects: the hoisted and the plain code share the old ones)."""
    p.align = max(p.align, n.align)

    def rename(o):
        if isinstance(o, VR) and o.v is n:
            return VR(p, o.start, o.count)
        if isinstance(o, VMem) and o.base is not None and o.base.v is n:
            return VMem(rename(o.base), o.offset)
        return o

    out = []
    for pos, ins in enumerate(code):
        if pos == m:
            continue
        if ins.row is not None and any(rename(o) is not o for o in ins.operands):
            ins = replace(ins, operands=tuple(rename(o) for o in ins.operands))
            if _self_move(ins):
                continue
        out.append(ins)
    return out
