"""reduce and scan along one axis.

The tile is seen as ``(outer, n, inner)`` around the axis. With ``inner > 1`` the
combine runs over k = 0..n-1 in order, vectorized across ``inner``. With ``inner == 1``
(the last axis) a reduction keeps ``w`` lane-wise partials (lane l combines elements
l, l+w, l+2w, ...) and then halves the vector (lanes l and l+w/2, ...); a scan runs in
order. f16/bf16/fp8 accumulate in f32 and round once per result element; integer
sums and products wrap in the element type.

argmax/argmin give the first index of the extreme; NaNs are ignored unless every
element is NaN (then the index is 0).
"""
from __future__ import annotations

from llvmlite import ir

from .lower_elementwise import float_minmax
from .lower_context import CHUNK, I32, I64, LowerContext, lowers


def _count(x):
    return x.type.count if isinstance(x.type, ir.VectorType) else 1


def _combine(ctx, kind, t):
    """``fn(a, b)`` combining two compute values of element type ``t``."""
    b = ctx.b
    fl = t.is_floating()
    signed = t.is_int_signed()
    table = {
        "sum": (lambda x, y: b.fadd(x, y)) if fl else (lambda x, y: b.add(x, y)),
        "prod": (lambda x, y: b.fmul(x, y)) if fl else (lambda x, y: b.mul(x, y)),
        "max": (lambda x, y: float_minmax(ctx, "maxnum", x, y)) if fl else
        (lambda x, y: ctx.call_overloaded("smax" if signed else "umax", [x, y])),
        "min": (lambda x, y: float_minmax(ctx, "minnum", x, y)) if fl else
        (lambda x, y: ctx.call_overloaded("smin" if signed else "umin", [x, y])),
        "and": lambda x, y: b.and_(x, y),
        "or": lambda x, y: b.or_(x, y),
        "xor": lambda x, y: b.xor(x, y),
    }
    return table[kind]


def _better(ctx, kind, t, x, y):
    """i1: ``x`` beats ``y`` (strictly greater/less; a number beats a NaN)."""
    b = ctx.b
    if t.is_floating():
        op = ">" if kind == "argmax" else "<"
        strict = b.fcmp_ordered(op, x, y)
        return b.or_(strict, b.and_(b.fcmp_unordered("uno", y, y), b.fcmp_ordered("ord", x, x)))
    cmp = b.icmp_signed if t.is_int_signed() else b.icmp_unsigned
    return cmp(">" if kind == "argmax" else "<", x, y)


def _tie(ctx, t, x, y):
    b = ctx.b
    if t.is_floating():
        return b.or_(b.fcmp_ordered("==", x, y),
                     b.and_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)))
    return b.icmp_unsigned("==", x, y)


def _arg_combine(ctx, kind, t):
    """``fn((va, ia), (vb, ib))``: the better pair, the smaller index on ties."""
    b = ctx.b

    def fn(p, q):
        take = b.or_(_better(ctx, kind, t, q[0], p[0]),
                     b.and_(_tie(ctx, t, q[0], p[0]), b.icmp_signed("<", q[1], p[1])))
        return b.select(take, q[0], p[0]), b.select(take, q[1], p[1])
    return fn


def _halves(ctx, v, w):
    """The low and high halves of a ``w``-lane vector (scalars when ``w == 2``)."""
    if w == 2:
        return (ctx.b.extract_element(v, ir.Constant(I32, 0)),
                ctx.b.extract_element(v, ir.Constant(I32, 1)))
    lo = ctx.b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, w // 2), list(range(w // 2))))
    hi = ctx.b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, w // 2),
                                                 list(range(w // 2, w))))
    return lo, hi


def _geometry(t, axis):
    shape = t.shape
    outer = 1
    for d in shape[:axis]:
        outer *= d
    inner = 1
    for d in shape[axis + 1:]:
        inner *= d
    return outer, shape[axis], inner


class _Acc:
    """A loop-carried value (tuple of LLVM values) kept in stack slots."""

    def __init__(self, ctx, values):
        self.ctx = ctx
        self.slots = [ctx.alloc_scalar(v.type, "acc") for v in values]
        self.set(values)

    def set(self, values):
        for s, v in zip(self.slots, values):
            self.ctx.b.store(v, s)

    def get(self):
        return tuple(self.ctx.b.load(s) for s in self.slots)


def _read(ctx, x, t, f, w, arg, k_index):
    """Chunk ``f`` of ``x`` in compute form (and its index lanes for arg kinds)."""
    v = ctx.to_compute(x.chunk(ctx, f, w), t)
    if not arg:
        return (v,)
    return (v, k_index)


@lowers("reduce")
def lower_reduce(ctx: LowerContext, op) -> None:
    """Combine along ``axis`` (see module docstring for the order)."""
    b = ctx.b
    x = ctx[op.operands[0]]
    tt = op.operands[0].type
    t = tt.element
    kind = op.attrs["kind"]
    arg = kind in ("argmax", "argmin")
    outer, n, inner = _geometry(tt, op.attrs["axis"])
    comb = _arg_combine(ctx, kind, t) if arg else (
        lambda p, q, c=_combine(ctx, kind, t): (c(p[0], q[0]),))
    rt = op.result.type
    out = ctx.alloc(rt) if rt.is_tile() else None
    scalar_result = None
    w = min(CHUNK, inner if inner > 1 else n)

    def idx_lanes(k, lanes):
        k32 = b.trunc(k, I32)
        if lanes == 1 or inner > 1:
            return ctx.splat(k32, lanes)
        return b.add(ctx.splat(k32, lanes),
                     ir.Constant(ir.VectorType(I32, lanes), list(range(lanes))))

    with ctx.for_chunks(outer * (inner // w if inner > 1 else 1), 1, "red.o") as g:
        if inner > 1:      # k = 1 .. n-1 along the axis, vectors across inner
            o = b.udiv(g, ir.Constant(I64, inner // w))
            j = b.mul(b.urem(g, ir.Constant(I64, inner // w)), ir.Constant(I64, w))
            base = b.add(b.mul(o, ir.Constant(I64, n * inner)), j)
            k_from, k_step = 1, 1
        else:              # k = w, 2w, ..: chunks of the contiguous axis
            base = b.mul(g, ir.Constant(I64, n))
            k_from, k_step = w, w
        acc = _Acc(ctx, _read(ctx, x, t, base, w, arg, idx_lanes(ir.Constant(I64, 0), w)))
        with ctx.for_chunks_from(k_from, n, k_step, "red.k") as k:
            f = b.add(base, b.mul(k, ir.Constant(I64, inner)))
            acc.set(comb(acc.get(), _read(ctx, x, t, f, w, arg, idx_lanes(k, w))))
        res = acc.get()
        if inner == 1:
            lanes = w
            while lanes > 1:
                halves = [_halves(ctx, v, lanes) for v in res]
                res = comb(tuple(h[0] for h in halves), tuple(h[1] for h in halves))
                lanes //= 2
            dst = g
        else:
            dst = b.add(b.mul(o, ir.Constant(I64, inner)), j)
        val = res[1] if arg else ctx.from_compute(res[0], t)
        if out is not None:
            ctx.store_elems(out.ptr, rt.element, dst, val)
        else:
            scalar_result = val
    ctx.bind(op.result, out if out is not None else scalar_result)


@lowers("scan")
def lower_scan(ctx: LowerContext, op) -> None:
    """Inclusive prefix combine along ``axis``, in order."""
    b = ctx.b
    x = ctx[op.operands[0]]
    tt = op.operands[0].type
    t = tt.element
    c = _combine(ctx, op.attrs["kind"], t)
    outer, n, inner = _geometry(tt, op.attrs["axis"])
    out = ctx.alloc(tt)
    w = min(CHUNK, inner)
    with ctx.for_chunks(outer * (inner // w), 1, "scan.o") as g:
        o = b.udiv(g, ir.Constant(I64, inner // w))
        j = b.mul(b.urem(g, ir.Constant(I64, inner // w)), ir.Constant(I64, w))
        base = b.add(b.mul(o, ir.Constant(I64, n * inner)), j)
        first = ctx.to_compute(x.chunk(ctx, base, w), t)
        ctx.store_elems(out.ptr, t, base, ctx.from_compute(first, t))
        acc = _Acc(ctx, (first,))
        with ctx.for_chunks_from(1, n, 1, "scan.k") as k:
            f = b.add(base, b.mul(k, ir.Constant(I64, inner)))
            v = c(acc.get()[0], ctx.to_compute(x.chunk(ctx, f, w), t))
            acc.set((v,))
            ctx.store_elems(out.ptr, t, f, ctx.from_compute(v, t))
    ctx.bind(op.result, out)

