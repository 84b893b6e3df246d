"""Address-structure facts (:class:`Sep`) and how IR ops transform them.

A tile ``v`` has the fact ``v[i] = base + unit * sum_d part_d(i_d)`` when it is built
from ``arange``, splats, ``expand_dims``/``broadcast``/``permute`` and integer
``+ - *`` (by uniform values), possibly through widening casts and ``addptr``; any
1-D integer tile trivially has one (its part is the tile itself). Memory ops read the
fact of a pointer tile to load whole rows with vector loads when the last dim's part
is ``1 * i``. The rules here emit only scalar LLVM arithmetic (for bases, steps and
coefficients), at the defining op's position.
"""
from __future__ import annotations

from dataclasses import replace

from llvmlite import ir

from .lower_tiles import Part, Sep, Term, TileVal, Uniform

I64 = ir.IntType(64)


def sep_of(ctx, v: TileVal, signed: bool = True) -> Sep | None:
    """The fact known for integer tile ``v`` (trivial for 1-D tiles), or None."""
    if v.sep is not None:
        return v.sep
    ity = ctx.repr_type(v.type.element)
    if not isinstance(ity, ir.IntType) or ity.width == 1:
        return None
    rank = len(v.type.shape)
    if isinstance(v, Uniform):
        return Sep(v.value, [None] * rank, ity)
    if rank == 1:
        vec = v if v.cheap() else ctx.materialize(v)
        return Sep(ir.Constant(ity, 0), [Part(None, (Term(vec, ir.Constant(ity, 1), signed),))],
                   ity)
    return None


def _merge(ctx, p, q, neg: bool):
    if q is None:
        return p
    step = ctx.ineg(q.step) if neg else q.step
    terms = tuple(replace(t, coeff=ctx.ineg(t.coeff)) for t in q.terms) if neg else q.terms
    if p is None:
        return Part(step, terms)
    return Part(ctx.iadd(p.step, step), p.terms + terms)


def sep_add(ctx, s: Sep, t: Sep, neg: bool = False) -> Sep | None:
    """Fact of ``s + t`` (``s - t`` with ``neg``)."""
    if s is None or t is None or s.ity != t.ity or s.rank != t.rank:
        return None
    base = ctx.iadd(s.base, ctx.ineg(t.base) if neg else t.base)
    return Sep(base, [_merge(ctx, p, q, neg) for p, q in zip(s.parts, t.parts)], s.ity, s.unit)


def _scale_part(ctx, p, u):
    if p is None:
        return None
    return Part(ctx.imul(p.step, u), tuple(replace(t, coeff=ctx.imul(t.coeff, u) or
                                                   ir.Constant(t.coeff.type, 0))
                                           for t in p.terms))


def sep_scale(ctx, s: Sep, u) -> Sep | None:
    """Fact of ``s * u`` for a uniform scalar ``u``."""
    if s is None:
        return None
    zero = ir.Constant(s.ity, 0)
    return Sep(ctx.imul(s.base, u) or zero, [_scale_part(ctx, p, u) for p in s.parts], s.ity,
               s.unit)


def sep_cast(ctx, s: Sep, ity: ir.IntType, signed: bool) -> Sep | None:
    """Fact of a widening integer cast of ``s`` (no-overflow assumption)."""
    if s is None or ity.width < s.ity.width:
        return None

    def cv(x):
        return None if x is None else ctx.int_cast(x, ity, signed)

    parts = [None if p is None else
             Part(cv(p.step), tuple(replace(t, coeff=cv(t.coeff)) for t in p.terms))
             for p in s.parts]
    return Sep(cv(s.base), parts, ity, s.unit)


def sep_expand(s: Sep, axis: int) -> Sep | None:
    if s is None:
        return None
    parts = list(s.parts)
    parts.insert(axis, None)
    return Sep(s.base, parts, s.ity, s.unit)


def sep_permute(s: Sep, order) -> Sep | None:
    if s is None:
        return None
    return Sep(s.base, [s.parts[o] for o in order], s.ity, s.unit)


def sep_broadcast(ctx, s: Sep, src_shape, dst_shape) -> Sep | None:
    """Fact of a broadcast: a repeated size-1 dim contributes its value at index 0."""
    if s is None:
        return None
    base, parts = s.base, []
    for p, a, d in zip(s.parts, src_shape, dst_shape):
        if p is not None and a == 1 and d != 1:
            base = ctx.iadd(base, ctx.part_scalar(s, p, ir.Constant(I64, 0)))
            p = None
        parts.append(p)
    return Sep(base, parts, s.ity, s.unit)


def ptr_sep_add(ctx, ps: Sep, off: Sep, signed: bool) -> Sep | None:
    """Fact of ``addptr(ps, off)``: offsets widened to i64 and scaled by ``ps.unit``."""
    if ps is None or off is None or ps.rank != off.rank:
        return None
    o = sep_cast(ctx, off, I64, signed)
    if o is None:
        return None
    base = ctx.b.add(ps.base, ctx.imul(o.base, ir.Constant(I64, ps.unit)) or ir.Constant(I64, 0))
    return Sep(base, [_merge(ctx, p, q, False) for p, q in zip(ps.parts, o.parts)], I64, ps.unit)


def last_dim_layout(sep: Sep | None):
    """('contiguous', None) / ('runtime', step) / ('other', None) for the last dim."""
    if sep is None:
        return "other", None
    p = sep.parts[-1]
    if p is None or p.terms or p.step is None:
        return "other", None
    if isinstance(p.step, ir.Constant):
        return ("contiguous" if p.step.constant == 1 else "other"), None
    return "runtime", p.step
