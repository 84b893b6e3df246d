"""Tensor descriptors: make_desc, desc_load, desc_store.

A descriptor is a row-major global tensor: base address, r dims and r strides (in
elements). A block access at ``offsets`` covers coordinates ``offsets + i``; an element
whose coordinate is outside ``[0, dim)`` along any axis reads 0 and is not stored.
Each chunk of a block row is one masked vector access when the last stride is 1
(checked at run time), else a masked gather/scatter.
"""
from __future__ import annotations

from llvmlite import ir

from .lower_context import CHUNK, I1, I64, DescVal, LowerContext, lowers
from .lower_memory import check_chunk, gather, masked_load, masked_store, scatter


@lowers("make_desc")
def lower_make_desc(ctx: LowerContext, op) -> None:
    base, *sizes = op.operands
    r = len(op.attrs["block"])
    vals = [ctx.int_cast(ctx[v], I64, v.type.is_int_signed()) for v in sizes]
    ctx.bind(op.result, DescVal(ctx[base], vals[:r], vals[r:], op.result.type,
                                ctx.analysis.origin(op.result)))


def _block_access(ctx, op, D: DescVal, offsets, body) -> None:
    """For each chunk of the block: ``body(f, active, addr0, addrs, w, contiguous)``."""
    b = ctx.b
    block = D.type.block
    t = D.type.element
    es = ctx.elem_size(t)
    numel = 1
    for d in block:
        numel *= d
    w = min(CHUNK, block[-1])
    check = ctx.add_check(op, f"{op.name} of {t}") if ctx.check_bounds else None

    def emit(contiguous: bool, checking: bool = False):
        with ctx.for_chunks(numel, w, "desc") as f:
            idx = ctx.unflatten(f, block)
            row_ok, row = ir.Constant(I1, 1), ir.Constant(I64, 0)
            for d in range(len(block) - 1):
                c = b.add(offsets[d], idx[d])
                row_ok = b.and_(row_ok, b.icmp_unsigned("<", c, D.dims[d]))
                row = b.add(row, b.mul(c, D.strides[d]))
            c0 = b.add(offsets[-1], idx[-1])
            lanes = ctx.iota_from(c0, w) if w > 1 else c0
            active = b.and_(b.icmp_unsigned("<", lanes, ctx.splat(D.dims[-1], w)),
                            ctx.splat(row_ok, w))
            elems = b.add(ctx.splat(row, w), b.mul(lanes, ctx.splat(D.strides[-1], w)))
            addrs = b.add(ctx.splat(D.base, w), b.mul(elems, ctx.splat(ir.Constant(I64, es), w)))
            if checking:
                check_chunk(ctx, check, addrs, active, es, D.origin, f)
                return
            addr0 = b.add(D.base, b.mul(b.add(row, c0), ir.Constant(I64, es)))
            body(f, active, addr0, addrs, w, contiguous)

    if check is not None:          # every address first: a fault leaves memory untouched
        emit(False, checking=True)
    unit = b.icmp_signed("==", D.strides[-1], ir.Constant(I64, 1))
    with b.if_else(unit, likely=True) as (then, other):
        with then:
            emit(True)
        with other:
            emit(False)


@lowers("desc_load")
def lower_desc_load(ctx: LowerContext, op) -> None:
    D = ctx[op.operands[0]]
    offsets = [ctx.int_cast(ctx[v], I64, v.type.is_int_signed()) for v in op.operands[1:]]
    rt = op.result.type
    t = rt.element
    out = ctx.alloc(rt)

    def body(f, active, addr0, addrs, w, contiguous):
        zero = ctx.const(t, 0, w)
        v = (masked_load(ctx, addr0, t, w, active, zero) if contiguous
             else gather(ctx, addrs, t, active, zero))
        ctx.store_elems(out.ptr, t, f, v)

    _block_access(ctx, op, D, offsets, body)
    ctx.bind(op.result, out)


@lowers("desc_store")
def lower_desc_store(ctx: LowerContext, op) -> None:
    D = ctx[op.operands[0]]
    offsets = [ctx.int_cast(ctx[v], I64, v.type.is_int_signed()) for v in op.operands[1:-1]]
    V = ctx[op.operands[-1]]
    t = D.type.element

    def body(f, active, addr0, addrs, w, contiguous):
        val = V.chunk(ctx, f, w)
        if contiguous:
            masked_store(ctx, addr0, t, val, active)
        else:
            scatter(ctx, addrs, t, val, active)

    _block_access(ctx, op, D, offsets, body)
