"""Structured control flow: for, if, while (with their yield/condition) and return.

Values that flow around a loop or out of an ``if`` live in *carriers*: a stack slot
for a scalar, one buffer for a tile (updated in place by ``yield``), the scalar base
for a pointer tile that only advances by uniform offsets (its row structure stays
known inside the loop, so its loads stay vector loads), and slots for descriptor
fields. LLVM's mem2reg turns the scalar slots into phis.

``yield`` writes every carried tile; a yielded value that still has to read another
carried buffer (or its own at other positions) is first evaluated into a temporary,
so swaps like ``yield b, a`` are right.
"""
from __future__ import annotations

from llvmlite import ir

from mutile.ir.types import DescType

from mutile.ir.analysis import carried_increment
from .lower_context import I32, I64, DescVal, LowerContext, lowers
from .lower_tiles import Buffer, Expr, IndexMap, Sep, SepVal, Uniform, View


class _Scalar:
    def __init__(self, ctx, ty):
        self.ctx, self.slot = ctx, ctx.alloc_scalar(ty)

    def store(self, v):
        self.ctx.b.store(v, self.slot)

    def load(self):
        return self.ctx.b.load(self.slot)


class _SepBase:
    """A pointer tile ``base + f(i)``: only the base is carried.

    ``delta``: the bytes it advances per iteration when known before the loop (the
    offsets are loop-invariant splats); loads through it then prefetch the next
    iteration's lines."""

    def __init__(self, ctx, init: SepVal, delta=None):
        self.ctx, self.sep, self.type, self.delta = ctx, init.sep, init.type, delta
        self.slot = ctx.alloc_scalar(I64, "base")

    def store(self, v):
        assert isinstance(v, SepVal) and len(v.sep.parts) == len(self.sep.parts)
        self.ctx.b.store(v.sep.base, self.slot)

    def load(self):
        s = self.sep
        notes = {"next_delta": self.delta} if self.delta is not None else {}
        return SepVal(Sep(self.ctx.b.load(self.slot), s.parts, s.ity, s.unit, notes), self.type)


class _Tile:
    """One buffer; ``store`` writes a value into it."""

    def __init__(self, ctx, ttype, buf: Buffer | None = None):
        self.ctx, self.type = ctx, ttype
        self.buf = buf or ctx.alloc(ttype)

    def store(self, v):
        self.ctx.write(self.buf, v)

    def load(self):
        return Buffer(self.buf.ptr, self.type)


class _Desc:
    def __init__(self, ctx, d: DescVal):
        self.ctx, self.type, self.origin = ctx, d.type, d.origin
        self.slots = [ctx.alloc_scalar(I64, "desc") for _ in range(1 + 2 * len(d.dims))]

    def store(self, d: DescVal):
        for s, v in zip(self.slots, [d.base] + d.dims + d.strides):
            self.ctx.b.store(v, s)

    def load(self):
        vals = [self.ctx.b.load(s) for s in self.slots]
        r = (len(vals) - 1) // 2
        return DescVal(vals[0], vals[1:1 + r], vals[1 + r:], self.type, self.origin)


def _carrier(ctx, init_value, init, arg=None, yielded=None, op=None):
    """The carrier for one loop-carried (or if-result) value, holding ``init`` if given."""
    t = init_value.type
    if isinstance(t, DescType):
        c = _Desc(ctx, init)
    elif not t.is_tile():
        c = _Scalar(ctx, ctx.repr_type(t))
    elif (isinstance(init, SepVal) and arg is not None and yielded is not None
          and carried_increment(yielded, arg)):
        c = _SepBase(ctx, init, _advance(ctx, yielded, arg, init.sep.unit))
    elif (op is not None and isinstance(init, Buffer) and init.owned
          and ctx.analysis.sole_local_use(init_value, op)):
        return _Tile(ctx, t, Buffer(init.ptr, t))           # take over the init's buffer
    else:
        c = _Tile(ctx, t)
    c.store(init)
    return c


def _advance(ctx, y, arg, unit):
    """Bytes from ``arg`` to ``y`` (an addptr chain of uniforms) if every offset is
    already lowered (defined before the loop), else None."""
    total = None
    while y is not arg:
        op = y.owner
        if op.name == "addptr":
            off = ctx.values.get(id(op.operands[1]))
            if not isinstance(off, Uniform):
                return None
            signed = op.operands[1].type.scalar.is_int_signed()
            total = ctx.iadd(total, ctx.int_cast(off.value, I64, signed))
        y = op.operands[0]
    return None if total is None else ctx.imul(total, ir.Constant(I64, unit))


def _result_carrier(ctx, value):
    t = value.type
    if isinstance(t, DescType):
        return None                                         # made on first store
    if not t.is_tile():
        return _Scalar(ctx, ctx.repr_type(t))
    return _Tile(ctx, t)


def _only_same_index(v, ptr) -> bool:
    """True if ``v`` reads buffer ``ptr`` only at the element it computes."""
    if isinstance(v, (Expr,)):
        return all(_only_same_index(o, ptr) for o in v.operands)
    if isinstance(v, View):
        return _only_same_index(v.inner, ptr)
    if isinstance(v, (IndexMap, SepVal)):
        return all(r.ptr is not ptr for r in v.reads())
    return True


def store_all(ctx, carriers, values) -> None:
    """Write ``values`` into ``carriers`` as if all at once (see module docstring)."""
    def unchanged(c, v):
        return isinstance(v, Buffer) and v.ptr is c.buf.ptr

    written = {id(c.buf.ptr): k for k, (c, v) in enumerate(zip(carriers, values))
               if isinstance(c, _Tile) and not unchanged(c, v)}
    staged = list(values)
    for k, (c, v) in enumerate(zip(carriers, values)):
        if not isinstance(c, _Tile) or unchanged(c, v):
            continue
        hazard = any(written.get(id(r.ptr), k) != k for r in v.reads())
        if hazard or not _only_same_index(v, c.buf.ptr):
            staged[k] = ctx.materialize(v) if not isinstance(v, Buffer) else _copy(ctx, v)
    for c, v in zip(carriers, staged):
        c.store(v)


def _copy(ctx, v: Buffer) -> Buffer:
    buf = ctx.alloc(v.type)
    ctx.write(buf, v)
    return buf


# ---------------------------------------------------------------- for
@lowers("for")
def lower_for(ctx: LowerContext, op) -> None:
    """``for i in range(lb, ub, step)`` with carried values (see module docstring)."""
    b = ctx.b
    lb, ub, step = (ctx[v] for v in op.operands[:3])
    signed = op.operands[0].type.is_int_signed()
    body = op.regions[0]
    yields = body.terminator.operands
    carriers = [_carrier(ctx, v, ctx[v], a, y, op)
                for v, a, y in zip(op.operands[3:], body.args[1:], yields)]
    iv = ctx.alloc_scalar(lb.type, "iv")
    b.store(lb, iv)
    header = b.append_basic_block("for.header")
    loop = b.append_basic_block("for.body")
    done = b.append_basic_block("for.end")
    b.branch(header)
    b.position_at_end(header)
    i = b.load(iv)
    b.cbranch(_continue(ctx, i, ub, step, signed), loop, done)
    b.position_at_end(loop)
    ctx.poll_stop(op)
    ctx.bind(body.args[0], i)
    for a, c in zip(body.args[1:], carriers):
        ctx.bind(a, c.load())
    store_all(ctx, carriers, ctx.walk(body))
    b.store(b.add(i, step), iv)
    b.branch(header)
    b.position_at_end(done)
    for r, c in zip(op.results, carriers):
        ctx.bind(r, c.load())


def _continue(ctx, i, ub, step, signed):
    """``i < ub`` for a positive step, ``i > ub`` for a negative one (runtime if unknown)."""
    b = ctx.b
    cmp = b.icmp_signed if signed else b.icmp_unsigned
    if isinstance(step, ir.Constant) or not signed:
        c = step.constant if isinstance(step, ir.Constant) else 1
        neg = signed and (c < 0 or c >= 1 << (step.type.width - 1))
        return cmp(">" if neg else "<", i, ub)
    up = b.icmp_signed(">", step, ir.Constant(step.type, 0))
    return b.select(up, cmp("<", i, ub), cmp(">", i, ub))


# ---------------------------------------------------------------- if
@lowers("if")
def lower_if(ctx: LowerContext, op) -> None:
    """Run one region; its yields go to result carriers (slots / fresh buffers)."""
    b = ctx.b
    carriers = [_result_carrier(ctx, r) for r in op.results]
    with b.if_else(ctx[op.operands[0]]) as (then, other):
        for region, arm in zip(op.regions, (then, other)):
            with arm:
                vals = ctx.walk(region)
                for k, (c, v) in enumerate(zip(carriers, vals)):
                    if c is None:
                        carriers[k] = c = _Desc(ctx, v)
                    c.store(v)
    for r, c in zip(op.results, carriers):
        ctx.bind(r, c.load())


# ---------------------------------------------------------------- while
@lowers("while")
def lower_while(ctx: LowerContext, op) -> None:
    """``before`` computes the condition and forwarded values; ``after`` runs while it holds."""
    b = ctx.b
    before, after = op.regions
    carriers = [_carrier(ctx, v, ctx[v]) for v in op.operands]
    header = b.append_basic_block("while.header")
    loop = b.append_basic_block("while.body")
    done = b.append_basic_block("while.end")
    b.branch(header)
    b.position_at_end(header)
    for a, c in zip(before.args, carriers):
        ctx.bind(a, c.load())
    cond, *fwd = ctx.walk(before)
    b.cbranch(cond, loop, done)
    b.position_at_end(loop)
    ctx.poll_stop(op)
    for a, v in zip(after.args, fwd):
        ctx.bind(a, v)
    store_all(ctx, carriers, ctx.walk(after))
    b.branch(header)
    b.position_at_end(done)
    for r, v in zip(op.results, fwd):
        ctx.bind(r, v)


@lowers("return")
def lower_return(ctx: LowerContext, op) -> None:
    ctx.b.ret(ir.Constant(I32, 0))

