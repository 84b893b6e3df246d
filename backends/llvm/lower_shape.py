"""Constants, indices and shape ops: nothing here moves data unless it must.

``constant``/``splat`` become :class:`Uniform`, ``arange`` an :class:`Iota`;
``expand_dims``/``reshape`` re-view the same row-major elements (a buffer is shared,
not copied); ``broadcast``/``permute`` are index maps evaluated by their readers.
Integer and pointer tiles carry their address-structure fact through all of them.
"""
from __future__ import annotations

from llvmlite import ir

from .lower_context import I32, I64, LowerContext, lowers
from .lower_memory import pointer_splat_sep
from .lower_sep import sep_broadcast, sep_expand, sep_permute
from .lower_tiles import Buffer, IndexMap, Iota, Part, Sep, SepVal, Uniform, View


def _row_major_strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


@lowers("constant")
def lower_constant(ctx: LowerContext, op) -> None:
    t = op.result.type
    c = ctx.const(t.scalar, op.attrs["value"])
    ctx.bind(op.result, Uniform(c, t) if t.is_tile() else c)


@lowers("program_id")
def lower_program_id(ctx: LowerContext, op) -> None:
    ctx.bind(op.result, ctx.pid[op.attrs["axis"]])


@lowers("num_programs")
def lower_num_programs(ctx: LowerContext, op) -> None:
    ctx.bind(op.result, ctx.nprog[op.attrs["axis"]])


@lowers("arange")
def lower_arange(ctx: LowerContext, op) -> None:
    v = Iota(op.attrs["start"], op.result.type)
    v.sep = Sep(ir.Constant(I32, op.attrs["start"]), [Part(ir.Constant(I32, 1))], I32)
    ctx.bind(op.result, v)


@lowers("splat")
def lower_splat(ctx: LowerContext, op) -> None:
    t = op.result.type
    x = ctx[op.operands[0]]
    if t.element.is_ptr():
        ctx.bind(op.result, SepVal(pointer_splat_sep(ctx, x, t), t))
    else:
        ctx.bind(op.result, Uniform(x, t))


def _reshaped(ctx, op, x, t, sep):
    """``x`` seen with type ``t`` (same row-major order), carrying fact ``sep``."""
    if isinstance(x, Uniform):
        return Uniform(x.value, t)
    if isinstance(x, SepVal) and sep is not None:
        return SepVal(sep, t)
    if isinstance(x, Buffer):
        buf = Buffer(x.ptr, t, x.owned and ctx.analysis.sole_local_use(op.operands[0], op))
        buf.sep = sep
        return buf
    v = View(x, t)
    v.sep = sep
    return v


@lowers("expand_dims")
def lower_expand_dims(ctx: LowerContext, op) -> None:
    x = ctx[op.operands[0]]
    ctx.bind(op.result, _reshaped(ctx, op, x, op.result.type,
                                  sep_expand(x.sep, op.attrs["axis"])))


@lowers("reshape")
def lower_reshape(ctx: LowerContext, op) -> None:
    x = ctx[op.operands[0]]
    t = op.result.type
    if not op.operands[0].type.is_tile():         # scalar -> 1-element tile
        ctx.bind(op.result, Uniform(x, t))
        return
    ctx.bind(op.result, _reshaped(ctx, op, x, t, None))


@lowers("broadcast")
def lower_broadcast(ctx: LowerContext, op) -> None:
    x = ctx[op.operands[0]]
    src, t = op.operands[0].type, op.result.type
    if isinstance(x, Uniform):
        ctx.bind(op.result, Uniform(x.value, t))
        return
    sep = sep_broadcast(ctx, x.sep, src.shape, t.shape) if x.sep is not None else None
    if isinstance(x, SepVal) and sep is not None:
        ctx.bind(op.result, SepVal(sep, t))
        return
    strides = [0 if a == 1 and d != 1 else s
               for a, d, s in zip(src.shape, t.shape, _row_major_strides(src.shape))]
    v = IndexMap(x if x.cheap() else ctx.materialize(x), t, strides)
    v.sep = sep
    ctx.bind(op.result, ctx.settle(v, op.result))


@lowers("permute")
def lower_permute(ctx: LowerContext, op) -> None:
    x = ctx[op.operands[0]]
    order = op.attrs["order"]
    t = op.result.type
    if isinstance(x, Uniform):
        ctx.bind(op.result, Uniform(x.value, t))
        return
    sep = sep_permute(x.sep, order)
    if isinstance(x, SepVal) and sep is not None:
        ctx.bind(op.result, SepVal(sep, t))
        return
    if list(order) == [1, 0] and min(t.shape) >= TRANSPOSE_BLOCK:
        ctx.bind(op.result, _transpose(ctx, ctx.materialize(x), t))
        return
    src_strides = _row_major_strides(op.operands[0].type.shape)
    v = IndexMap(x if x.cheap() else ctx.materialize(x), t, [src_strides[o] for o in order])
    v.sep = sep
    ctx.bind(op.result, ctx.settle(v, op.result))


TRANSPOSE_BLOCK = 8


def _transpose(ctx, src: Buffer, t) -> Buffer:
    """A 2-D transpose into a new buffer, in 8x8 blocks of shuffles (no gathers)."""
    b = ctx.b
    n = TRANSPOSE_BLOCK
    C, R = t.shape                     # result is C x R; the source is R x C
    out = ctx.alloc(t)
    el = t.element
    with ctx.for_chunks(R, n, "tr.i") as i:
        with ctx.for_chunks(C, n, "tr.j") as j:
            rows = [ctx.load_elems(src.ptr, el, b.add(b.mul(b.add(i, ir.Constant(I64, r)),
                                                            ir.Constant(I64, C)), j), n,
                                   align=ctx.elem_size(el)) for r in range(n)]
            for r, v in enumerate(_transpose_block(b, rows)):
                dst = b.add(b.mul(b.add(j, ir.Constant(I64, r)), ir.Constant(I64, R)), i)
                ctx.store_elems(out.ptr, el, dst, v, align=ctx.elem_size(el))
    return out


def _transpose_block(b, rows):
    """Transpose n vectors of n lanes: one stage per index bit, swapping that bit of the
    row index with the same bit of the lane index (two shuffles per row pair)."""
    n = len(rows)
    rows = list(rows)
    h = 1
    while h < n:
        lo = [c if not c & h else c - h + n for c in range(n)]
        hi = [c + h if not c & h else c + n for c in range(n)]
        mask_lo = ir.Constant(ir.VectorType(I32, n), lo)
        mask_hi = ir.Constant(ir.VectorType(I32, n), hi)
        for i in range(n):
            if i & h:
                continue
            a, c = rows[i], rows[i + h]
            rows[i], rows[i + h] = b.shuffle_vector(a, c, mask_lo), b.shuffle_vector(a, c, mask_hi)
        h *= 2
    return rows


@lowers("hint")
def lower_hint(ctx: LowerContext, op) -> None:
    """Pass ``x`` through; ``max_contiguous`` covering a 1-D integer tile makes its fact
    ``x[0] + i`` (trusted, as Triton trusts it)."""
    x = ctx[op.operands[0]]
    t = op.operands[0].type
    mc = op.attrs.get("max_contiguous")
    mc = mc[0] if isinstance(mc, (list, tuple)) and mc else mc
    if (not t.is_tile() or len(t.shape) != 1 or not t.element.is_int() or not mc
            or mc < t.shape[0] or isinstance(x, Uniform)):
        ctx.bind(op.result, x)
        return
    inner = x if x.cheap() else ctx.materialize(x)
    v = View(inner, t)
    v.sep = Sep(inner.chunk(ctx, ir.Constant(ir.IntType(64), 0), 1),
                [Part(ir.Constant(ctx.repr_type(t.element), 1))], ctx.repr_type(t.element))
    ctx.bind(op.result, v)


@lowers("assume")
def lower_assume(ctx: LowerContext, op) -> None:
    """The compiler may take the condition as true; this backend ignores it."""
