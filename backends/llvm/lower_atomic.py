"""Atomics: ``atomic_rmw`` and ``atomic_cas`` as LLVM ``atomicrmw`` / ``cmpxchg``.

Programs of one grid run concurrently on the launcher's threads, so these are real
atomic instructions. A tile is updated element by element in row-major order (one
atomic instruction each); masked-off elements touch no memory and read 0. ``sem``
maps to the LLVM ordering (``relaxed`` -> ``monotonic``); every ``scope`` is the
system scope on the host (the strongest, so each of Triton's scopes is honoured).
Floats: ``add`` is ``fadd`` (bf16, kept as bits, takes a compare-exchange loop that
adds in f32 and rounds once), ``max``/``min`` are ``fmax``/``fmin`` (a NaN loses to a
number); ``xchg`` and ``cas`` move the bits (``cas`` compares them). With
``check_bounds`` every active element is checked before any is updated.
"""
from __future__ import annotations

from llvmlite import ir

from .lower_context import I64, LowerContext, lowers
from .lower_memory import check_chunk, check_tile, inttoptr

ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release",
            "acq_rel": "acq_rel"}
FAIL_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "monotonic",
                 "acq_rel": "acquire"}


def _rmw_name(kind: str, t) -> str | None:
    """The ``atomicrmw`` operation for ``kind`` on IR scalar ``t`` (None: bf16 add)."""
    if kind == "xchg":
        return "xchg"
    if t.is_floating():
        if t.name == "bf16":
            return None
        return {"add": "fadd", "max": "fmax", "min": "fmin"}[kind]
    if kind in ("max", "min"):
        return ("" if t.is_int_signed() else "u") + kind
    return {"add": "add", "and": "and", "or": "or", "xor": "xor"}[kind]


def _bits(ctx, t):
    return ir.IntType(ctx.elem_size(t) * 8)


def _as_bits(ctx, v, t):
    ty = _bits(ctx, t)
    return v if v.type == ty else ctx.b.bitcast(v, ty)


def _from_bits(ctx, v, t):
    ty = ctx.repr_type(t)
    return v if v.type == ty else ctx.b.bitcast(v, ty)


def _cas_loop(ctx, ptr, t, order, update):
    """``old = *ptr; *ptr = update(old)`` by a compare-exchange loop; returns old (bits)."""
    b = ctx.b
    ty = _bits(ctx, t)
    first = b.load_atomic(ptr, "monotonic", ctx.elem_size(t), typ=ty)
    entry = b.block
    loop = b.append_basic_block("cas.loop")
    done = b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(ty)
    old.add_incoming(first, entry)
    new = _as_bits(ctx, update(_from_bits(ctx, old, t)), t)
    pair = b.cmpxchg(ptr, old, new, ORDERING[order], FAIL_ORDERING[order])
    got, ok = b.extract_value(pair, 0), b.extract_value(pair, 1)
    old.add_incoming(got, b.block)
    b.cbranch(ok, done, loop)
    b.position_at_end(done)
    return got


def _one(ctx: LowerContext, op, addr, vals):
    """Emit the atomic of ``op`` on one element at i64 ``addr``; returns the old value."""
    b = ctx.b
    ptr = inttoptr(ctx, addr)
    sem = op.attrs["sem"]
    if op.name == "atomic_cas":
        t = op.operands[0].type.scalar.element_ty
        cmp, val = (_as_bits(ctx, v, t) for v in vals)
        pair = b.cmpxchg(ptr, cmp, val, ORDERING[sem], FAIL_ORDERING[sem])
        return _from_bits(ctx, b.extract_value(pair, 0), t)
    t = op.operands[0].type.scalar.element_ty
    kind, (val,) = op.attrs["op"], vals
    name = _rmw_name(kind, t)
    if name is None:                                  # bf16 add: in f32, rounded once
        def update(old):
            s = b.fadd(ctx.to_compute(old, t), ctx.to_compute(val, t))
            return ctx.from_compute(s, t)
        return _from_bits(ctx, _cas_loop(ctx, ptr, t, sem, update), t)
    if name == "xchg":
        old = b.atomic_rmw("xchg", ptr, _as_bits(ctx, val, t), ORDERING[sem])
        return _from_bits(ctx, old, t)
    return b.atomic_rmw(name, ptr, val, ORDERING[sem])


def _guarded(ctx, t, active, emit):
    """``emit()`` where scalar i1 ``active`` holds (always when None), else 0."""
    if active is None:
        return emit()
    b = ctx.b
    before = b.block
    with b.if_then(active):
        v = emit()
        inside = b.block
    phi = b.phi(v.type)
    phi.add_incoming(v, inside)
    phi.add_incoming(ctx.const(t, 0), before)
    return phi


def _operands(ctx, op):
    """(pointer, value operands, mask or None) of an atomic op."""
    vals = op.operands[1:3] if op.name == "atomic_cas" else op.operands[1:2]
    mask = op.operands[2] if op.name == "atomic_rmw" and len(op.operands) > 2 else None
    return ctx[op.operands[0]], [ctx[v] for v in vals], None if mask is None else ctx[mask]


@lowers("atomic_rmw", "atomic_cas")
def lower_atomic(ctx: LowerContext, op) -> None:
    """One atomic instruction per active element, in row-major order."""
    P, V, M = _operands(ctx, op)
    rt = op.result.type
    t = rt.scalar
    what = f"{op.name} of {t}" if op.name == "atomic_cas" else f"atomic_{op.attrs['op']} of {t}"
    if not rt.is_tile():
        if ctx.check_bounds:
            check = ctx.add_check(op, what)
            check_chunk(ctx, check, P, M, ctx.elem_size(t),
                        ctx.analysis.origin(op.operands[0]), ir.Constant(I64, 0))
        ctx.bind(op.result, _guarded(ctx, t, M, lambda: _one(ctx, op, P, V)))
        return
    if ctx.check_bounds:
        check_tile(ctx, op, P, M, t)
    out = ctx.alloc(rt)
    with ctx.for_chunks(rt.numel, 1, "atom") as f:
        active = M.chunk(ctx, f, 1) if M is not None else None
        addr = P.chunk(ctx, f, 1)
        vals = [v.chunk(ctx, f, 1) for v in V]
        ctx.store_elems(out.ptr, t, f, _guarded(ctx, t, active,
                                                lambda: _one(ctx, op, addr, vals)))
    ctx.bind(op.result, out)

