"""Structured control flow -> branches: ``for``, ``if``, ``while``, ``return``.

Branch conditions of tile code are scalars, which every thread of a block computes
alike, so branches are block-uniform (blocks may still differ); they still follow the
ISA's reconvergence discipline (docs/isa.md, "Reconvergence"), so the code stays right
for lanes that disagree: a loop is ``SSY exit``, a header test, ``@!P SYNC`` (the lanes
that are done wait at ``exit``), the body and ``BRA header``; an ``if`` is ``SSY join``,
``@!P BRA else``, then-code, ``SYNC``, else-code, ``SYNC``, ``join:``. Values that
flow around a loop or out of an ``if`` live in *carriers*: register blocks written by
``MOV`` at the loop entry and at ``yield`` (through temporaries when a yielded value reads
another carrier, so ``yield b, a`` swaps). A pointer tile that a loop only advances by
uniform offsets carries just its 64-bit base (its offset tile is loop-invariant).
"""
from __future__ import annotations

from mutile.ir.analysis import carried_increment
from mutile.ir.types import DescType

from ..context import Codegen, lowers, width
from ..values import VP, VR, DescVal, PtrTile, TileVal, Uniform
from ...isa.operands import RZ, FloatImm, IntImm, Reg
from ..regalloc import label_ref


class _Carrier:
    """Registers holding one carried value; ``load`` gives the value to bind."""

    def __init__(self, cg: Codegen, shape: tuple, ty):
        self.cg, self.shape, self.ty = cg, shape, ty
        self.tile = cg.new_tile(shape, ty)

    def targets(self, v) -> list:
        return [(self.tile.run(), self.cg.materialize(v) if isinstance(v, PtrTile) else v)]

    def load(self):
        return self.cg.as_uniform(self.tile)


class _BaseCarrier:
    """A pointer tile advanced by uniform offsets: only its base is carried."""

    def __init__(self, cg: Codegen, init: PtrTile):
        self.cg, self.init = cg, init
        self.base = cg.new_tile((), init.base.ty)

    def targets(self, v) -> list:
        assert isinstance(v, PtrTile) and v.off is self.init.off
        return [(self.base.run(), v.base)]

    def load(self):
        p = self.init
        return PtrTile(Uniform(self.base.run(), (), p.base.ty), p.off, p.shape, p.ty)


class _DescCarrier:
    """A descriptor: its base, dims and strides, each a scalar carrier."""

    def __init__(self, cg: Codegen, d: DescVal):
        self.cg, self.d = cg, d
        self.parts = [_Carrier(cg, (), u.ty) for u in [d.base] + d.dims + d.strides]

    def targets(self, v) -> list:
        vals = [v.base] + v.dims + v.strides
        return [t for c, u in zip(self.parts, vals) for t in c.targets(u)]

    def load(self):
        vals = [c.load() for c in self.parts]
        r = len(self.d.dims)
        return DescVal(vals[0], vals[1:1 + r], vals[1 + r:], self.d.block, self.d.ty)


def _carrier(cg: Codegen, irval, init, arg=None, yielded=None):
    if isinstance(irval.type, DescType):
        return _DescCarrier(cg, init)
    if (isinstance(init, PtrTile) and arg is not None and yielded is not None
            and carried_increment(yielded, arg)):
        return _BaseCarrier(cg, init)
    shape = irval.type.shape if irval.type.is_tile() else ()
    return _Carrier(cg, shape, irval.type.scalar if irval.type.is_tile() else irval.type)


def store_all(cg: Codegen, carriers: list, values: list) -> None:
    """Write ``values`` into ``carriers`` as if all at once."""
    pairs = [t for c, v in zip(carriers, values) for t in c.targets(v)]
    written = {dst.v for dst, _ in pairs}
    staged = []
    for dst, v in pairs:
        src = v if isinstance(v, TileVal) else v.src if isinstance(v, Uniform) else None
        reads = src.vreg if isinstance(src, TileVal) else src.v if isinstance(src, VR) else None
        same = (isinstance(src, VR) and src.v is dst.v) or \
            (isinstance(src, TileVal) and src.vreg is dst.v and src.run().start == dst.start)
        if reads in written and not same:
            v = _copy(cg, v)
        staged.append((dst, v))
    for dst, v in staged:
        move(cg, dst, v)


def _copy(cg: Codegen, v):
    if isinstance(v, Uniform):
        out = cg.new_tile((), v.ty)
        move(cg, out.run(), v)
        return Uniform(out.run(), v.shape, v.ty)
    out = cg.new_tile(v.shape, v.ty)
    move(cg, out.run(), v)
    return out


def move(cg: Codegen, dst: VR, v) -> None:
    """``dst`` (a register or run) = value ``v`` (broadcast when uniform)."""
    w = width(v.ty)
    if isinstance(v, TileVal):
        if v.vreg is dst.v and v.run().start == dst.start:
            return
        cg.emit("ALU.MOV.B32" if w == 1 else "ALU.MOV.B64", dst, v.run())
        return
    src = v.src
    if isinstance(src, (IntImm, FloatImm)) and dst.count == 1:
        cg.emit("ALU.MOV.IMM", dst, src)
        return
    if isinstance(src, (IntImm, FloatImm, int, float)) and (
            (src.bits if isinstance(src, FloatImm) else
             src.value if isinstance(src, IntImm) else
             Codegen.bits64(v.ty, src)) == 0):
        cg.emit("ALU.MOV.B32" if w == 1 else "ALU.MOV.B64", dst, Reg(RZ))   # RZ reads 0
        return
    if not isinstance(src, VR):
        src = cg.materialize_scalar(v)
    if src.v is dst.v and src.start == dst.start and src.count == dst.count:
        return
    cg.emit("ALU.MOV.B32" if w == 1 else "ALU.MOV.B64", dst, src)


def _bind_args(cg: Codegen, args, carriers) -> None:
    for a, c in zip(args, carriers):
        cg.bind(a, c.load())


@lowers("for")
def lower_for(cg: Codegen, op) -> None:
    lb, ub, step = (cg.get(v) for v in op.operands[:3])
    t = op.operands[0].type
    body = op.regions[0]
    yields = body.terminator.operands
    inits = [cg.get(v) for v in op.operands[3:]]
    carriers = [_carrier(cg, v, i, a, y) for v, i, a, y in
                zip(op.operands[3:], inits, body.args[1:], yields)]
    iv = _Carrier(cg, (), t)
    store_all(cg, carriers + [iv], inits + [lb])
    ident = cg.new_loop()
    head, done = cg.label("L_for"), cg.label("L_end")
    cg.emit("SSY", label_ref(done))
    cg.loop_mark("begin", ident)
    cg.place(head)
    cg.loc = op.loc
    go = _continue(cg, iv.load(), ub, step, t)
    cg.emit("SYNC", guard=go.negated())
    cg.bind(body.args[0], iv.load())
    _bind_args(cg, body.args[1:], carriers)
    vals = cg.walk(body)
    cg.loc = op.loc
    store_all(cg, carriers, vals)
    suffix = "S64" if width(t) == 2 else "S32"
    cg.emit(f"ALU.IADD.{suffix}", iv.tile.run(), iv.tile.run(), cg.operand(step))
    cg.emit("BRA", label_ref(head))
    cg.loop_mark("end", ident)
    cg.place(done)
    for r, c in zip(op.results, carriers):
        cg.bind(r, c.load())


def _continue(cg: Codegen, i, ub, step, t) -> VP:
    """Predicate: the loop runs another iteration (``i < ub``, or ``i > ub`` when the
    step is negative; decided at run time for a step held in a register)."""
    ty = ("S" if t.is_int_signed() else "U") + ("64" if width(t) == 2 else "32")
    a = cg.operand(i, False)
    b = cg.operand(ub)
    c = cg.const_int(step)
    if c is not None or not t.is_int_signed():
        p = cg.vreg(1, kind="P")
        cg.emit(f"ALU.ISETP.{'GT' if c is not None and c < 0 else 'LT'}.{ty}", VP(p, 0, 1), a, b)
        return VP(p, 0, 1)
    p = cg.vreg(4, kind="P")
    cg.emit(f"ALU.ISETP.GT.{ty}", VP(p, 0, 1), cg.operand(step, False), IntImm(0))
    cg.emit(f"ALU.ISETP.LT.{ty}", VP(p, 1, 1), a, b)
    cg.emit(f"ALU.ISETP.GT.{ty}", VP(p, 2, 1), a, b)
    cg.emit("ALU.PLOP.AND", VP(p, 1, 1), VP(p, 0, 1), VP(p, 1, 1))
    cg.emit("ALU.PLOP.AND", VP(p, 2, 1), VP(p, 0, 1, True), VP(p, 2, 1))
    cg.emit("ALU.PLOP.OR", VP(p, 3, 1), VP(p, 1, 1), VP(p, 2, 1))
    return VP(p, 3, 1)


def _result_carrier(cg: Codegen, r):
    if isinstance(r.type, DescType):
        return None
    shape = r.type.shape if r.type.is_tile() else ()
    return _Carrier(cg, shape, r.type.scalar if r.type.is_tile() else r.type)


@lowers("if")
def lower_if(cg: Codegen, op) -> None:
    cond = cg.pred_of(cg.get(op.operands[0]))
    carriers = [_result_carrier(cg, r) for r in op.results]
    other, done = cg.label("L_else"), cg.label("L_fi")
    cg.emit("SSY", label_ref(done))
    cg.emit("BRA", label_ref(other), guard=cond.negated())
    for k, region in enumerate(op.regions):
        vals = cg.walk(region)
        cg.loc = op.loc
        for j, v in enumerate(vals):
            if carriers[j] is None:
                carriers[j] = _DescCarrier(cg, v)
        store_all(cg, carriers, vals)
        cg.emit("SYNC")
        if k == 0:
            cg.place(other)
    cg.place(done)
    for r, c in zip(op.results, carriers):
        cg.bind(r, c.load())


@lowers("while")
def lower_while(cg: Codegen, op) -> None:
    before, after = op.regions
    inits = [cg.get(v) for v in op.operands]
    carriers = [_carrier(cg, v, i) for v, i in zip(op.operands, inits)]
    store_all(cg, carriers, inits)
    ident = cg.new_loop()
    head, done = cg.label("L_while"), cg.label("L_wend")
    cg.emit("SSY", label_ref(done))
    cg.loop_mark("begin", ident)
    cg.place(head)
    _bind_args(cg, before.args, carriers)
    cond, *fwd = cg.walk(before)
    cg.loc = op.loc
    p = cg.pred_of(cond)
    cg.emit("SYNC", guard=p.negated())
    for a, v in zip(after.args, fwd):
        cg.bind(a, v)
    vals = cg.walk(after)
    cg.loc = op.loc
    store_all(cg, carriers, vals)
    cg.emit("BRA", label_ref(head))
    cg.loop_mark("end", ident)
    cg.place(done)
    for r, v in zip(op.results, fwd):
        cg.bind(r, v)


@lowers("return")
def lower_return(cg: Codegen, op) -> None:
    cg.emit("EXIT")

