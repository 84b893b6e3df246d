"""Register allocation: virtual instructions -> a :class:`~..isa.program.Program`.

Linear scan over the instruction list. Each virtual block lives from its first to its
last mention; a block live into a loop (mentioned before the loop's start and inside it)
stays live to the loop's end, so values carried around a back edge keep their registers.
Blocks get contiguous, aligned physical ranges below the per-thread budget. When a block
does not fit it is *spilled*: it lives in local memory, and every instruction that names
it loads it into reserved scratch registers first and stores what it wrote afterwards
(an instruction whose spilled operands exceed the scratch area is split into element
chunks; runs make every instruction splittable). Before spilling, the scan
(:mod:`.linear_scan`) tries again with large blocks placed from the top down, and then
constants live where no register is left are rematerialized at their reads (:mod:`.remat`). Predicates are
allocated the same way and are never spilled (they are short-lived by construction).
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass

from mutile.errors import CompilationError

from .values import VP, VR, VIns, VMem
from .coalesce import coalesce
from .fold_broadcast import fold_broadcasts
from .hoist import hoist
from .inplace import in_place
from .linear_scan import Full as _Full, allocate_blocks as _allocate, holes
from .remat import constants, live_across, rematerialize
from ..isa import BY_MNEMONIC
from ..isa.operands import RZ, Comment, IntImm, Label, Mem, Pred, PredRun, Reg, Run, Target
from ..isa.program import Instruction, Param, Program

BUDGET = 255          # R0 .. R254
PRED_BUDGET = 255     # P0 .. P254
SCRATCH = 32          # registers reserved for spilled operands when anything spills
TILE = 16             # when spilling, blocks this large are placed from the top down


class PredicatePressure(CompilationError):
    """More predicates live at once than the machine has (predicates never spill);
    ``single``: one mask alone needs more than all of them."""
    single = False


@dataclass
class Allocation:
    regs: dict            # VReg -> first physical register
    spilled: dict         # VReg -> local byte offset
    preds: dict           # VReg -> first predicate
    scratch_base: int
    local_bytes: int
    regs_used: int
    budget: int = BUDGET
    traffic: int = 0      # the spilled blocks' weights (:func:`spill_weights`)


def _mentions(ins: VIns):
    for o in ins.operands:
        if isinstance(o, (VR, VP)):
            yield o.v
        elif isinstance(o, VMem) and o.base is not None:
            yield o.base.v
    if ins.guard is not None:
        yield ins.guard.v


def intervals(code: list[VIns], pinned=()) -> dict:
    """VReg -> [first, last] position, extended over the loops it is live into; the
    ``pinned`` blocks live from their first mention to the end."""
    iv: dict = {}
    loops: dict = {}
    for pos, ins in enumerate(code):
        if ins.loop is not None:
            kind, ident = ins.loop
            loops.setdefault(ident, [0, 0])[0 if kind == "begin" else 1] = pos
            continue
        for v in _mentions(ins):
            r = iv.get(v)
            if r is None:
                iv[v] = [pos, pos]
            else:
                r[1] = pos
    for v in pinned:
        if v in iv:
            iv[v][1] = len(code)
    _hold_until_wait(code, iv)
    spans = sorted(loops.values())
    changed = True
    while changed:
        changed = False
        for b, e in spans:
            for r in iv.values():
                if r[0] < b <= r[1] < e:
                    r[1] = e
                    changed = True
    return iv


def _hold_until_wait(code: list[VIns], iv: dict) -> None:
    """An SQMMA writes its destination asynchronously until the next ``SQMMA.WAIT``: the
    destination stays live at least to that wait, even when nothing reads it after."""
    pending = []
    for pos, ins in enumerate(code):
        family = ins.row.family if ins.row is not None else None
        if family == "SQMMA":
            pending.append(ins.operands[0].v)
        elif family == "SQMMA.WAIT":
            for v in pending:
                iv[v][1] = max(iv[v][1], pos)
            pending = []


def spill_weights(code: list[VIns]) -> dict:
    """VReg -> the local-memory traffic spilling it would cost: its registers times its
    mentions, a mention inside ``d`` nested loops counting ``8 ** d``."""
    weight: dict = {}
    asynchronous = set()
    depth = 0
    for ins in code:
        if ins.loop is not None:
            depth += 1 if ins.loop[0] == "begin" else -1
            continue
        for v in _mentions(ins):
            weight[v] = weight.get(v, 0) + v.nregs * 8 ** depth
        if ins.row is not None and ins.row.family == "SQMMA":
            asynchronous.add(ins.operands[0].v)
    for v in asynchronous:              # written asynchronously: never spill
        weight[v] = ASYNC_WEIGHT
    return weight


ASYNC_WEIGHT = 1 << 60


_PURE_UNITS = {"ALU", "SFU", "CVT", "S2R", "SHFL", "WMMA"}


def dead_code(code: list[VIns]) -> list[VIns]:
    """``code`` without instructions whose results nobody reads (pure units and loads;
    stores, barriers, branches and debug records always stay)."""
    code = list(code)
    while True:
        read = set()
        for ins in code:
            if ins.row is None:
                continue
            for spec, o in zip(ins.row.operands, ins.operands):
                if isinstance(o, VMem) and o.base is not None:
                    read.add(o.base.v)
                elif isinstance(o, (VR, VP)) and not spec.dst:
                    read.add(o.v)
            if ins.guard is not None:
                read.add(ins.guard.v)
        keep = []
        for ins in code:
            row = ins.row
            if row is not None and (row.unit in _PURE_UNITS or row.family == "LSU.LD"):
                dsts = [o.v for spec, o in zip(row.operands, ins.operands)
                        if spec.dst and isinstance(o, (VR, VP))]
                if dsts and not any(v in read for v in dsts):
                    continue
            keep.append(ins)
        if len(keep) == len(code):
            return code
        code = keep


def allocate(code: list[VIns], loc=None, pinned=(), budget: int = BUDGET):
    """(code, allocation): physical registers and predicates for ``code`` (see the module
    docstring), ``budget`` registers per thread (at most 255; spilling needs room for the
    scratch area). Where an allocation without spills finds no room, the constants live
    across that point are rematerialized (:mod:`.remat`) and it tries again; the code
    returned is the one allocated."""
    if not SCRATCH + 8 <= budget <= BUDGET:
        raise CompilationError(f"pinghu codegen: a register budget of {budget} is outside "
                               f"{SCRATCH + 8} .. {BUDGET}", loc)
    blocks = constants(code, pinned)
    pinned_set = set(pinned)
    while True:
        iv = intervals(code, pinned)
        reuse = in_place(code)
        gaps = {v: h for v, h in holes(code).items() if v not in pinned_set}
        try:
            where, top = _fit(iv, budget, reuse, gaps)
            break
        except _Full as e:
            hot = live_across(iv, blocks, iv[e.v][0], code)
        if not hot:
            where = None
            break
        code = rematerialize(code, hot)
        blocks = {v: d for v, d in blocks.items() if v not in hot}
    try:
        preds = _allocate(iv, "P", PRED_BUDGET, False)
    except _Full as e:
        raise _pred_pressure(code, iv, e.v, loc) from None
    if where is not None:
        return code, Allocation(where, {}, preds[0], 0, 0, top, budget)
    base = (budget - SCRATCH) & ~3          # the scratch area starts quad-aligned
    weights = spill_weights(code)
    for tile in (BUDGET + 1, TILE):         # tiles from the top when the first way fails
        where, spilled, local, top = _allocate(iv, "R", base, True, weights, reuse, tile)
        if not any(weights.get(v) == ASYNC_WEIGHT for v in spilled):
            break
    if any(weights.get(v) == ASYNC_WEIGHT for v in spilled):
        raise CompilationError(f"pinghu codegen: an SQMMA accumulator does not fit the "
                               f"{budget} registers per thread (use smaller tiles or more "
                               f"warps)", loc)
    return code, Allocation(where, spilled, preds[0], base, local, budget, budget,
                            sum(weights[v] for v in spilled))


def _pred_pressure(code: list[VIns], iv: dict, v, loc) -> PredicatePressure:
    """The error of predicate block ``v`` finding no room, at the line of the op that
    made it (``loc``, the kernel's, if that op has none)."""
    at = code[iv[v][0]].loc or loc
    if v.nregs > PRED_BUDGET:
        err = PredicatePressure(f"pinghu codegen: this mask needs {v.nregs} predicates per "
                                f"thread and the machine has {PRED_BUDGET} (P0 .. "
                                f"P{PRED_BUDGET - 1}): use a smaller tile or more warps", at)
        err.single = True
        return err
    return PredicatePressure(f"pinghu codegen: more than {PRED_BUDGET} predicates live at "
                             f"once here (this mask needs {v.nregs} more)", at)


# ---------------------------------------------------------------- rewriting
def _phys(o, spec_width: int, a: Allocation, scratch: dict):
    """The ISA operand of virtual operand ``o`` (spilled blocks read the scratch copy)."""
    if isinstance(o, VR):
        first = a.regs[o.v] + o.start
        if o.count == spec_width:
            return Reg(first)
        return Run(first, first + o.count)
    if isinstance(o, VP):
        first = a.preds[o.v] + o.start
        if o.count == 1:
            return Pred(first, o.neg)
        return PredRun(first, first + o.count, o.neg)
    if isinstance(o, VMem):
        if o.base is None:
            return Mem(Reg(RZ), o.offset)
        return Mem(_phys(o.base, spec_width, a, scratch), o.offset)
    return o


def _split(ins: VIns, count: int, chunk: int) -> list[VIns]:
    """``ins`` as instructions over element chunks of at most ``chunk`` elements (runs
    are cut; plain operands, which broadcast, stay)."""
    out = []
    for s in range(0, count, chunk):
        n = min(chunk, count - s)
        ops = []
        for spec, o in zip(ins.row.operands, ins.operands):
            if isinstance(o, VMem) and o.base is not None:
                ops.append(VMem(_cut(o.base, spec.base_width, count, s, n), o.offset))
            elif isinstance(o, VR):
                ops.append(_cut(o, spec.width, count, s, n))
            elif isinstance(o, VP) and o.count == count:
                ops.append(VP(o.v, o.start + s, n, o.neg))
            else:
                ops.append(o)
        g = ins.guard
        if isinstance(g, VP) and g.count == count:
            g = VP(g.v, g.start + s, n, g.neg)
        if ins.row.family == "ALU.IOTA" and s:
            # element i depends on i: a later chunk starts from a + s * step
            d, a, step = ops
            first = VR(d.v, d.start, 1)
            assert g is None, "codegen never guards IOTA"
            out.append(VIns(BY_MNEMONIC["ALU.IADD.S32"], (first, a, IntImm(s * step.value)),
                            None, ins.loc))
            ops = [d, first, step]
        out.append(VIns(ins.row, tuple(ops), g, ins.loc, comment=ins.comment))
    return out


def _cut(o: VR, w: int, count: int, s: int, n: int) -> VR:
    return VR(o.v, o.start + s * w, n * w) if o.count == w * count else o


def _elements(ins: VIns) -> int:
    """Elements of an instruction's runs (1 when it has none)."""
    n = 1
    for k, o in enumerate(ins.operands):
        spec = ins.row.operands[k]
        if isinstance(o, VR) and o.count != spec.width:
            n = max(n, o.count // spec.width)
        if isinstance(o, VMem) and o.base is not None and o.base.count != spec.base_width:
            n = max(n, o.base.count // spec.base_width)
    if isinstance(ins.guard, VP):
        n = max(n, ins.guard.count)
    return n


def _writes_above_reads(ins: VIns) -> bool:
    """True when a destination run overlaps a source run of the same block at a higher
    offset (``d[i + s] = f(d[i])``): split into chunks, such an instruction keeps "all
    reads before any write" only if the chunks run from the top down. (Overlaps the other
    way round are safe bottom-up; codegen never mixes both in one instruction.)"""
    dsts = [o for spec, o in zip(ins.row.operands, ins.operands)
            if spec.dst and isinstance(o, VR)]
    srcs = [o.base if isinstance(o, VMem) else o for spec, o in
            zip(ins.row.operands, ins.operands) if not spec.dst]
    up = down = False
    for d in dsts:
        for r in srcs:
            if isinstance(r, VR) and r.v is d.v and r.start != d.start and \
                    r.start < d.start + d.count and d.start < r.start + r.count:
                up |= d.start > r.start
                down |= d.start < r.start
    assert not (up and down), "an instruction overlapping its runs both ways"
    return up


def _spill_ops(ins: VIns, a: Allocation):
    """(operand index, virtual registers, element width, is_destination) of the operands
    of ``ins`` that name spilled blocks."""
    out = []
    for k, o in enumerate(ins.operands):
        spec = ins.row.operands[k]
        base = o.base if isinstance(o, VMem) else o
        if isinstance(base, VR) and base.v in a.spilled:
            w = spec.base_width if isinstance(o, VMem) else spec.width
            out.append((k, base, max(w, 1), spec.dst))
    return out


def _scratch_layout(spills, base: int, limit: int, per: int = 0, count: int = 1):
    """First scratch register of each spilled operand (element-aligned, in order), or
    None when they do not fit below ``limit``. With ``per``, sizes are those of a chunk
    of ``per`` of the instruction's ``count`` elements."""
    where, nxt = {}, base
    for k, vr, w, _ in spills:
        n = vr.count if not per or vr.count == w else vr.count // count * per
        nxt = -(-nxt // w) * w
        where[k] = nxt
        nxt += n
    return where if nxt <= limit else None


def _local_moves(vr: VR, reg: int, offset: int, load: bool, loc) -> list[Instruction]:
    """Move ``vr.count`` registers between scratch ``reg`` and local memory."""
    out, i = [], 0
    while i < vr.count:
        r, left = reg + i, vr.count - i
        addr = offset + 4 * (vr.start + i)
        size = 4 if r % 4 == 0 and left >= 4 and addr % 16 == 0 else \
            2 if r % 2 == 0 and left >= 2 and addr % 8 == 0 else 1
        t = {4: "B128", 2: "B64", 1: "B32"}[size]
        mn = f"LSU.LD.LOCAL.{t}" if load else f"LSU.ST.LOCAL.{t}"
        m = Mem(Reg(RZ), addr)
        ops = (Reg(r), m) if load else (m, Reg(r))
        out.append(Instruction(BY_MNEMONIC[mn], ops, loc=loc))
        i += size
    return out


def lower_instruction(ins: VIns, a: Allocation) -> list[Instruction]:
    """The physical instruction(s) for one virtual instruction."""
    spills = _spill_ops(ins, a)
    if not spills:
        return [_emit(ins, a, {})]
    where = _scratch_layout(spills, a.scratch_base, a.budget)
    if where is None:
        count = _elements(ins)
        per = next((p for p in range(count - 1, 0, -1) if _scratch_layout(
            spills, a.scratch_base, a.budget, p, count) is not None), 0)
        if count == 1 or not per:
            raise CompilationError("pinghu codegen: an instruction's spilled operands exceed "
                                   "the scratch registers", ins.loc)
        parts = _split(ins, count, per)
        if _writes_above_reads(ins):
            parts.reverse()
        out = []
        for part in parts:
            out += lower_instruction(part, a)
        return out
    pre, post = [], []
    for k, vr, _, is_dst in spills:
        off = a.spilled[vr.v]
        if not is_dst or ins.guard is not None:
            pre += _local_moves(vr, where[k], off, True, ins.loc)
        if is_dst:
            post += _local_moves(vr, where[k], off, False, ins.loc)
    return pre + [_emit(ins, a, where)] + post


def _emit(ins: VIns, a: Allocation, scratch: dict) -> Instruction:
    """The physical instruction; ``scratch`` maps operand indices of spilled operands to
    the scratch register holding them."""
    specs = ins.row.operands
    ops = []
    for k, o in enumerate(ins.operands):
        w = specs[k].base_width if isinstance(o, VMem) else specs[k].width
        if k in scratch:
            vr = o.base if isinstance(o, VMem) else o
            r = scratch[k]
            phys = Reg(r) if vr.count == w else Run(r, r + vr.count)
            ops.append(Mem(phys, o.offset) if isinstance(o, VMem) else phys)
        else:
            ops.append(_phys(o, w, a, {}))
    guard = _phys(ins.guard, 1, a, {}) if ins.guard is not None else None
    return Instruction(ins.row, tuple(ops), guard, comment=ins.comment, loc=ins.loc)


def build_program(name: str, params: list[Param], code: list[VIns], threads: int,
                  shared: int, loc=None, pinned=(), budget: int = BUDGET) -> Program:
    """Allocate registers, resolve labels, annotate source lines; the finished program."""
    code, a = _choose(code, loc, pinned, budget)
    out: list[Instruction] = []
    pending: list = []
    targets: dict[str, int] = {}
    last_line = None
    for ins in code:
        if ins.loop is not None:
            continue
        if ins.label is not None:
            pending.append(Label(ins.label))
            continue
        for k, phys in enumerate(lower_instruction(ins, a)):
            prelude = []
            if k == 0:
                key = (ins.loc.file, ins.loc.line) if ins.loc is not None else None
                if key is not None and key != last_line:
                    prelude.append(Comment(_loc_comment(ins.loc)))
                    last_line = key
                for lab in pending:
                    targets[lab.name] = len(out)
                prelude = pending + prelude
                pending = []
            phys.prelude = tuple(prelude)
            out.append(phys)
    epilogue = tuple(pending)
    for lab in pending:
        targets[lab.name] = len(out)
    for phys in out:
        if any(isinstance(o, _LabelRef) for o in phys.operands):
            phys.operands = tuple(Target(targets[o.name]) if isinstance(o, _LabelRef) else o
                                  for o in phys.operands)
    used = max(a.regs_used, max((a.regs[v] + v.nregs for v in a.regs), default=0))
    prog = Program(name, tuple(params), threads, max(used, 1), shared, a.local_bytes, out,
                   epilogue=epilogue)
    return prog


def _fit(iv: dict, budget: int, reuse: dict, gaps: dict):
    """(where, top) of an allocation without spills: first fit in order, else with the
    blocks of :data:`TILE` registers or more placed from the top down (scalars then
    fill the bottom instead of splitting the file where a large aligned block needs
    room); :class:`_Full` (of the first attempt) when neither fits."""
    try:
        where, _, _, top = _allocate(iv, "R", budget, False, reuse=reuse, gaps=gaps)
    except _Full as e:
        try:
            where, _, _, top = _allocate(iv, "R", budget, False, reuse=reuse, tile=TILE,
                                         gaps=gaps)
        except _Full:
            raise e from None
    return where, top


def _variants(code: list[VIns], pinned):
    """The code to allocate, best first: hoisted (:mod:`.hoist`) or not, carriers
    coalesced (:mod:`.coalesce`) or not, broadcast moves folded (:mod:`.fold_broadcast`)."""
    plain = fold_broadcasts(dead_code(code))
    hoisted = dead_code(hoist(plain))
    yield coalesce(hoisted, pinned)
    yield hoisted
    yield coalesce(plain, pinned)
    yield plain


def _choose(code: list[VIns], loc, pinned, budget: int):
    """(code, allocation): the first variant that spills nothing, else the one whose
    spills cost the least traffic. Hoisted values and a coalesced carrier stay live
    across their loop, which may make other blocks spill; and an SQMMA accumulator
    that a coalesced carrier keeps live may not fit where its copy could spill."""
    best, err = None, None
    for c in _variants(code, pinned):
        try:
            c, a = allocate(c, loc, pinned, budget)
        except CompilationError as e:
            if isinstance(e, PredicatePressure):
                raise
            err = err or e
            continue
        if not a.spilled:
            return c, a
        if best is None or a.traffic < best[1].traffic:
            best = (c, a)
    if best is None:
        raise err
    return best


def _loc_comment(loc) -> str:
    """``file.py:LINE  source`` for a listing (the form :func:`attach_locations` reads)."""
    text = linecache.getline(loc.file, loc.line).strip()
    return f"{loc.file}:{loc.line}  {text}" if text else f"{loc.file}:{loc.line}"


@dataclass(frozen=True)
class _LabelRef:
    """A branch target by label name, resolved to a pc by :func:`build_program`."""
    name: str


def label_ref(name: str) -> _LabelRef:
    return _LabelRef(name)

