"""Global memory: addptr, load, store, and the bounds checks of every access.

A tile access takes one of two shapes:

* rows: the pointer tile's address fact (:mod:`lower_sep`) says the last dim is
  contiguous (``step 1``), so each chunk of a row is one vector load/store
  (``llvm.masked.load/store`` under a mask); a runtime step is versioned on ``== 1``;
* gather: any other pointer tile; each chunk's addresses feed
  ``llvm.masked.gather/scatter``.

A masked access whose mask is a conjunction of ``offs <op> bound`` tests (``offs``
an exact affine tile: arange, splats, shape ops, ``+ - *uniform``; ``bound`` uniform)
is versioned: scalar code finds each test's extreme lane in a wider type (also checking
that no lane wrapped) and, when every lane is active, runs an unmasked copy.

Masked-off elements never touch memory; a masked load without ``other`` reads them as
zero (all bits clear), as the Pinghu backend does and Triton's kernels assume in practice
(an RMSNorm summing a partly masked row). With ``check_bounds``, every active
element's address is first checked against the array of the parameter it derives
from (or against all pointer parameters when that is unknown); the first bad one
records a fault (kind 1) and ends the program before the access happens.
"""
from __future__ import annotations

from llvmlite import ir

from mutile.ir.core import Op
from mutile.ir.types import PointerType

from . import cgutils
from .dot import packed_b_width
from .lower_context import CHUNK, I1, I32, I64, PTR, LowerContext, lowers
from .lower_dot import packs_b
from .lower_sep import last_dim_layout, ptr_sep_add, sep_of
from .lower_tiles import Expr, PackedBuffer, Sep, SepVal, Uniform

FAULT_BOUNDS, FAULT_ASSERT = 1, 2


def _count(x):
    return x.type.count if isinstance(x.type, ir.VectorType) else 1


def _ones(w):
    return ir.Constant(I1, 1) if w == 1 else ir.Constant(ir.VectorType(I1, w), [1] * w)


# ---------------------------------------------------------------- addptr
def _addptr_emit(es, signed):
    def emit(ctx, xs):
        p, off = xs
        off = ctx.int_cast(off, I64, signed)
        return ctx.b.add(p, ctx.b.mul(off, ctx.splat(ir.Constant(I64, es), _count(off))))
    return emit


@lowers("addptr")
def lower_addptr(ctx: LowerContext, op) -> None:
    """Scalars: ``p + off * size``. Tiles: a :class:`SepVal` when the structure is known."""
    p, off = (ctx[v] for v in op.operands)
    es = ctx.elem_size(op.result.type.scalar.element_ty)
    signed = op.operands[1].type.scalar.is_int_signed()
    emit = _addptr_emit(es, signed)
    rt = op.result.type
    if not rt.is_tile():
        ctx.bind(op.result, emit(ctx, [p, off]))
        return
    sep = ptr_sep_add(ctx, p.sep, sep_of(ctx, off, signed), signed) if p.sep else None
    if sep is not None:
        ctx.bind(op.result, SepVal(sep, rt))
        return
    if isinstance(p, Uniform) and isinstance(off, Uniform):
        ctx.bind(op.result, Uniform(emit(ctx, [p.value, off.value]), rt))
        return
    ctx.bind(op.result, ctx.settle(Expr(emit, [p, off], rt, light=True), op.result))


def pointer_splat_sep(ctx, value, ttype) -> Sep:
    """The fact of a splatted pointer: the same address everywhere."""
    es = ctx.elem_size(ttype.element.element_ty)
    return Sep(value, [None] * len(ttype.shape), I64, es)


# ---------------------------------------------------------------- vector memory primitives
def inttoptr(ctx, addr):
    ty = ir.VectorType(PTR, addr.type.count) if isinstance(addr.type, ir.VectorType) else PTR
    return ctx.b.inttoptr(addr, ty)


def masked_load(ctx, addr, t, w, mask=None, other=None):
    """Load ``w`` consecutive elements at scalar address ``addr`` where ``mask`` holds."""
    b = ctx.b
    st = ctx.storage_type(t)
    es = ctx.elem_size(t)
    ptr = inttoptr(ctx, addr)
    vty = st if w == 1 else ir.VectorType(st, w)
    if mask is None:
        return ctx.from_storage(b.load(ptr, typ=vty, align=es), t)
    other = ir.Constant(vty, None) if other is None else ctx.to_storage(other, t)  # 0 bits
    if w == 1:
        return ctx.from_storage(_guarded_scalar_load(ctx, ptr, st, es, mask, other), t)
    fn = ctx.intrinsic(f"llvm.masked.load.{ctx.suffix(vty)}.p0", vty,
                       [PTR, I32, mask.type, vty])
    return ctx.from_storage(b.call(fn, [ptr, ir.Constant(I32, es), mask, other]), t)


def _guarded_scalar_load(ctx, ptr, st, es, mask, other):
    b = ctx.b
    before = b.block
    with b.if_then(mask) as _:
        v = b.load(ptr, typ=st, align=es)
        loaded = b.block
    phi = b.phi(st)
    phi.add_incoming(v, loaded)
    phi.add_incoming(other, before)
    return phi


def masked_store(ctx, addr, t, value, mask=None):
    """Store the lanes of ``value`` at consecutive elements from ``addr`` where ``mask`` holds."""
    b = ctx.b
    es = ctx.elem_size(t)
    ptr = inttoptr(ctx, addr)
    v = ctx.to_storage(value, t)
    if mask is None:
        b.store(v, ptr, align=es)
        return
    if _count(v) == 1:
        with b.if_then(mask):
            b.store(v, ptr, align=es)
        return
    fn = ctx.intrinsic(f"llvm.masked.store.{ctx.suffix(v.type)}.p0", ir.VoidType(),
                       [v.type, PTR, I32, mask.type])
    b.call(fn, [v, ptr, ir.Constant(I32, es), mask])


def scatter(ctx, addrs, t, value, mask=None):
    """``llvm.masked.scatter`` (lanes in order: the last lane wins on equal addresses)."""
    w = _count(addrs)
    if w == 1:
        masked_store(ctx, addrs, t, value, mask)
        return
    v = ctx.to_storage(value, t)
    mask = _ones(w) if mask is None else mask
    pty = ir.VectorType(PTR, w)
    fn = ctx.intrinsic(f"llvm.masked.scatter.{ctx.suffix(v.type)}.v{w}p0", ir.VoidType(),
                       [v.type, pty, I32, mask.type])
    ctx.b.call(fn, [v, inttoptr(ctx, addrs), ir.Constant(I32, ctx.elem_size(t)), mask])


def gather(ctx, addrs, t, mask=None, other=None):
    """``llvm.masked.gather``; masked-off lanes read ``other`` (zero without it)."""
    w = _count(addrs)
    if w == 1:
        return masked_load(ctx, addrs, t, 1, mask, other)
    if mask is not None and other is None:
        other = ctx.const(t, 0, w)
    return ctx.masked_gather(inttoptr(ctx, addrs), t, mask, other, ctx.elem_size(t))


# ---------------------------------------------------------------- bounds checks
def _in_range(ctx, addrs, es, origin):
    """i1 (vector) ``lo <= addr && addr + es <= hi`` for the origin's array (or any array)."""
    b = ctx.b
    w = _count(addrs)
    params = [origin] if origin is not None else [
        k for k, a in enumerate(ctx.func.args) if isinstance(a.type, PointerType)]
    ok = None
    end = b.add(addrs, ctx.splat(ir.Constant(I64, es), w))
    def test(lo, hi):
        return b.and_(b.icmp_unsigned(">=", addrs, ctx.splat(lo, w)),
                      b.icmp_unsigned("<=", end, ctx.splat(hi, w)))
    for k in params:
        inside = test(*ctx.param_range(k))
        ok = inside if ok is None else b.or_(ok, inside)
    if origin is None and ctx.int_pointers:
        ok = _inside_extra(ctx, test, ok, _ones(w).type)
    if ok is None:                      # no array to be inside of
        return ir.Constant(I1, 0) if w == 1 else ir.Constant(ir.VectorType(I1, w), [0] * w)
    return ok


def check_chunk(ctx, check: int, addrs, active, es: int, origin, f) -> None:
    """Fault on the first active lane of ``addrs`` outside its array (element ``f + lane``)."""
    b = ctx.b
    w = _count(addrs)
    ok = _in_range(ctx, addrs, es, origin)
    bad = b.and_(active if active is not None else _ones(w), b.not_(ok))
    if w == 1:
        any_bad, lane, addr = bad, ir.Constant(I64, 0), addrs
    else:
        bits = b.bitcast(bad, ir.IntType(w))
        any_bad = b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(w), 0))
    with b.if_then(any_bad, likely=False):
        if w > 1:
            lane = b.zext(ctx.call_overloaded("cttz", [bits, ir.Constant(I1, 0)]), I64)
            addr = b.extract_element(addrs, lane)
        ctx.fault(FAULT_BOUNDS, check, addr, -1 if origin is None else origin,
                  b.add(f, lane))
    # the builder continues in the join block


def _tile_inside(ctx, P, es: int, origin):
    """Scalar i1: every address of pointer tile ``P`` (masked or not) lies inside its
    array, from the tile's extreme addresses; None when ``P``'s addresses are not affine.
    Computed in i128, so no address arithmetic can wrap."""
    sep = P.sep if isinstance(P, SepVal) else None
    if sep is None or any(p is not None and (p.terms or p.step is None) for p in sep.parts):
        return None
    b, W = ctx.b, ir.IntType(128)
    zero = ir.Constant(W, 0)
    lo_off = hi_off = zero
    for p, n in zip(sep.parts, P.type.shape):
        if p is None or n == 1:
            continue
        span = b.mul(b.sext(p.step, W), ir.Constant(W, n - 1))
        neg = b.icmp_signed("<", span, zero)
        lo_off = b.add(lo_off, b.select(neg, span, zero))
        hi_off = b.add(hi_off, b.select(neg, zero, span))
    unit = ir.Constant(W, sep.unit)
    base = b.zext(sep.base, W)
    lo = b.add(base, b.mul(lo_off, unit))
    end = b.add(b.add(base, b.mul(hi_off, unit)), ir.Constant(W, es))
    params = [origin] if origin is not None else [
        k for k, a in enumerate(ctx.func.args) if isinstance(a.type, PointerType)]
    ok = None

    def test(r_lo, r_hi):
        rlo, rhi = b.zext(r_lo, W), b.zext(r_hi, W)
        return b.and_(b.icmp_signed(">=", lo, rlo), b.icmp_signed("<=", end, rhi))
    for k in params:
        inside = test(*ctx.param_range(k))
        ok = inside if ok is None else b.or_(ok, inside)
    if origin is None and ctx.int_pointers:
        ok = _inside_extra(ctx, test, ok, I1)
    return ok


def _inside_extra(ctx, test, ok, okty):
    """``ok`` or'ed with ``test(lo, hi)`` over the launch's extra ``[lo, hi)`` ranges (the
    AddressTable members a pointer made from an integer may address): a loop over them."""
    b = ctx.b
    slot = ctx.alloc_scalar(okty, "inside")
    b.store(ok if ok is not None else ir.Constant(okty, None), slot)
    table, count = ctx.extra_ranges()
    with cgutils.for_range(b, ir.Constant(I64, 0), count, ir.Constant(I64, 1), "rng") as j:
        two = b.mul(j, ir.Constant(I64, 2))
        lo = b.load(b.gep(table, [two], source_etype=I64), typ=I64, align=8)
        hi = b.load(b.gep(table, [b.add(two, ir.Constant(I64, 1))], source_etype=I64),
                    typ=I64, align=8)
        b.store(b.or_(b.load(slot, typ=okty), test(lo, hi)), slot)
    return b.load(slot, typ=okty)


def check_tile(ctx, op, P, M, t) -> None:
    """Check every active element of pointer tile ``P`` (mask ``M``) before an access.

    Emits a scalar test of the tile's extreme addresses first (affine pointer tiles):
    when the whole tile lies inside its array, no element is checked; otherwise (a
    masked tail, a real miss, or a gather) each active element is checked."""
    check = ctx.add_check(op, f"{op.name} of {t}")
    origin = ctx.analysis.origin(op.operands[0])
    es = ctx.elem_size(t)
    w = ctx.chunk_width(P.type)

    def per_element():
        with ctx.for_chunks(P.type.numel, w, "chk") as f:
            active = M.chunk(ctx, f, w) if M is not None else None
            check_chunk(ctx, check, P.chunk(ctx, f, w), active, es, origin, f)

    inside = _tile_inside(ctx, P, es, origin)
    if inside is None:
        per_element()
        return
    with ctx.b.if_then(ctx.b.not_(inside), likely=False):
        per_element()


# ---------------------------------------------------------------- all-true masks
_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _owner(v):
    return v.owner if isinstance(v.owner, Op) else None


def _exact_affine(ctx, v) -> bool:
    """True if integer tile ``v`` is built only from arange, splats, expand_dims,
    broadcast, ``+``/``-`` and ``*`` by a uniform, all in its own type: its fact then
    equals its values modulo 2**width (no widening casts or trusted hints)."""
    op = _owner(v)
    if op is None:
        return False
    if op.name in ("arange", "splat", "constant"):
        return True
    if op.name in ("expand_dims", "broadcast"):
        return _exact_affine(ctx, op.operands[0])
    if op.name in ("add", "sub"):
        return all(_exact_affine(ctx, o) for o in op.operands)
    if op.name == "mul":
        return any(isinstance(ctx[op.operands[u]], Uniform) and
                   _exact_affine(ctx, op.operands[1 - u]) for u in (0, 1))
    return False


def _extremes(ctx, sep: Sep, shape, signed: bool, W):
    """(min, max, fits) of ``sep``'s exact values over the tile in the wide type ``W``
    (bases extended by signedness, steps as signed); ``fits`` says both lie in range of
    ``sep.ity``, so no element wrapped. None when a part is not affine."""
    b = ctx.b

    def ext(x, sgn):
        return b.sext(x, W) if sgn else b.zext(x, W)
    lo = hi = ext(sep.base, signed)
    zero = ir.Constant(W, 0)
    for p, n in zip(sep.parts, shape):
        if p is None or n == 1:
            continue
        if p.terms or p.step is None:
            return None
        span = b.mul(ext(p.step, True), ir.Constant(W, n - 1))
        neg = b.icmp_signed("<", span, zero)
        lo = b.add(lo, b.select(neg, span, zero))
        hi = b.add(hi, b.select(neg, zero, span))
    w = sep.ity.width
    rmin, rmax = ((-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else (0, (1 << w) - 1))
    fits = b.and_(b.icmp_signed(">=", lo, ir.Constant(W, rmin)),
                  b.icmp_signed("<=", hi, ir.Constant(W, rmax)))
    return lo, hi, fits


def _cmp_all_true(ctx, op):
    """Scalar i1: every lane of ``cmp(offs, bound)`` holds (``offs`` exact affine, bound
    uniform, either order), or None when the shape is not recognized."""
    pred = op.attrs.get("pred")
    t = op.operands[0].type.scalar
    if pred not in _FLIP or not (t.is_int() and t.bits > 1):
        return None
    x, y = op.operands
    if isinstance(ctx[y], Uniform):
        offs, bound = x, ctx[y].value
    elif isinstance(ctx[x], Uniform):
        offs, bound, pred = y, ctx[x].value, _FLIP[pred]
    else:
        return None
    if not op.operands[0].type.is_tile() or not _exact_affine(ctx, offs):
        return None
    signed = t.is_int_signed()
    sep = sep_of(ctx, ctx[offs], signed)
    if sep is None or sep.unit != 1 or sep.ity != bound.type or sep.ity.width > 64:
        return None
    W = ir.IntType(128 if sep.ity.width > 32 else 64)
    ex = _extremes(ctx, sep, offs.type.shape, signed, W)
    if ex is None:
        return None
    lo, hi, fits = ex
    b = ctx.b
    B = b.sext(bound, W) if signed else b.zext(bound, W)
    if pred in ("lt", "le"):
        ok = b.icmp_signed("<" if pred == "lt" else "<=", hi, B)
    else:
        ok = b.icmp_signed(">" if pred == "gt" else ">=", lo, B)
    return b.and_(fits, ok)


def all_true(ctx, v):
    """A scalar i1 that holds only if every element of mask ``v`` is true (a conjunction
    of ``offs <cmp> bound`` tests, splats and shape ops of them), or None if unknown.
    Emits scalar code at the current position."""
    if not v.type.is_tile():
        x = ctx[v]
        return x if isinstance(x, ir.Value) and x.type == I1 else None
    tv = ctx[v]
    if isinstance(tv, Uniform):
        return tv.value if tv.value.type == I1 else None
    op = _owner(v)
    if op is None:
        return None
    if op.name == "and":
        a = all_true(ctx, op.operands[0])
        c = all_true(ctx, op.operands[1]) if a is not None else None
        return None if c is None else ctx.b.and_(a, c)
    if op.name in ("broadcast", "expand_dims", "reshape", "splat"):
        return all_true(ctx, op.operands[0])
    if op.name == "cmp":
        return _cmp_all_true(ctx, op)
    return None


def _versioned(ctx, mask, emit) -> None:
    """``emit(masked)``, plus an unmasked copy taken when a runtime test shows every
    lane of IR mask value ``mask`` (None: no mask) is true."""
    cond = None
    if mask is not None and ctx.options.get("version_masks", True):
        cond = all_true(ctx, mask)
    if cond is None:
        emit(True)
        return
    with ctx.b.if_else(cond, likely=True) as (then, other):
        with then:
            emit(False)
        with other:
            emit(True)


# ---------------------------------------------------------------- load / store
def _rows(ctx, sep: Sep, ttype, body, prefetch=False) -> None:
    """Chunks along contiguous rows: ``body(f, addr_of_first_lane, w)``; with
    ``prefetch``, also ``llvm.prefetch`` of the same chunk one loop iteration ahead."""
    n_last = ttype.shape[-1]
    w = min(CHUNK, n_last)
    delta = sep.notes.get("next_delta") if prefetch else None
    with ctx.for_chunks(ttype.numel, w, "row") as f:
        idx = ctx.unflatten(f, ttype.shape)
        total = ctx.iadd(ctx.sep_row(sep, idx[:-1]), ctx.part_scalar(sep, sep.parts[-1], idx[-1]))
        addr = ctx.sep_finish(sep, total)
        if delta is not None:
            _prefetch(ctx, ctx.b.add(addr, delta))
        body(f, addr, w)


def _prefetch(ctx, addr) -> None:
    """``llvm.prefetch`` (read, high locality, data) of the line at ``addr``."""
    fn = ctx.intrinsic("llvm.prefetch.p0", ir.VoidType(), [PTR, I32, I32, I32])
    ctx.b.call(fn, [inttoptr(ctx, addr), ir.Constant(I32, 0), ir.Constant(I32, 3),
                    ir.Constant(I32, 1)])


def _gathered(ctx, P, ttype, body) -> None:
    """Chunks of arbitrary addresses: ``body(f, addr_vector, w)``."""
    w = ctx.chunk_width(ttype)
    with ctx.for_chunks(ttype.numel, w, "gat") as f:
        body(f, P.chunk(ctx, f, w), w)


def _access(ctx, P, ttype, rows_body, gather_body, prefetch=False) -> None:
    """Emit the rows shape, the gather shape, or both versioned on a runtime step."""
    layout, step = last_dim_layout(P.sep if isinstance(P, SepVal) else None)
    if layout == "contiguous":
        _rows(ctx, P.sep, ttype, rows_body, prefetch)
    elif layout == "runtime":
        one = ir.Constant(step.type, 1)
        with ctx.b.if_else(ctx.b.icmp_signed("==", step, one), likely=True) as (then, other):
            with then:
                _rows(ctx, P.sep, ttype, rows_body, prefetch)
            with other:
                _gathered(ctx, P, ttype, gather_body)
    else:
        _gathered(ctx, P, ttype, gather_body)


def _opt(ctx, op, i):
    return ctx[op.operands[i]] if len(op.operands) > i else None


@lowers("load")
def lower_load(ctx: LowerContext, op) -> None:
    """Read each pointer where the mask holds, else ``other`` (a new buffer)."""
    P, M, O = ctx[op.operands[0]], _opt(ctx, op, 1), _opt(ctx, op, 2)
    rt = op.result.type
    t = rt.scalar
    if not rt.is_tile():
        if ctx.check_bounds:
            check = ctx.add_check(op, f"load of {t}")
            check_chunk(ctx, check, P, M, ctx.elem_size(t), ctx.analysis.origin(op.operands[0]),
                        ir.Constant(I64, 0))
        ctx.bind(op.result, masked_load(ctx, P, t, 1, M, O))
        return
    if ctx.check_bounds:
        check_tile(ctx, op, P, M, t)
    out = _load_buffer(ctx, op, rt)
    dest = out.index if isinstance(out, PackedBuffer) else (lambda _ctx, f: f)

    def emit(masked):
        def rows_body(f, addr, w):
            m = M.chunk(ctx, f, w) if (M is not None and masked) else None
            o = O.chunk(ctx, f, w) if (O is not None and m is not None) else None
            ctx.store_elems(out.ptr, t, dest(ctx, f), masked_load(ctx, addr, t, w, m, o))

        def gather_body(f, addrs, w):
            m = M.chunk(ctx, f, w) if (M is not None and masked) else None
            o = O.chunk(ctx, f, w) if (O is not None and m is not None) else None
            ctx.store_elems(out.ptr, t, dest(ctx, f), gather(ctx, addrs, t, m, o))

        _access(ctx, P, rt, rows_body, gather_body, prefetch=ctx.options.get("prefetch", True))

    _versioned(ctx, op.operands[1] if M is not None else None, emit)
    ctx.bind(op.result, out)


def _load_buffer(ctx, op, rt):
    """The loaded tile's buffer: panel-major (:class:`PackedBuffer`) when its only use is
    as the B of a ``dot`` that reads that layout and the load's chunks fit its panels."""
    users = ctx.analysis.uses.get(id(op.result), ())
    if len(rt.shape) == 2 and len(users) == 1 and users[0].name == "dot":
        nr = packed_b_width(rt.shape[1])
        if packs_b(ctx, users[0], op.result) and nr % min(CHUNK, rt.shape[1]) == 0:
            out = ctx.alloc(rt)
            return PackedBuffer(out.ptr, rt, nr)
    return ctx.alloc(rt)


@lowers("store")
def lower_store(ctx: LowerContext, op) -> None:
    """Write each element where the mask holds."""
    P, V, M = ctx[op.operands[0]], ctx[op.operands[1]], _opt(ctx, op, 2)
    pt = op.operands[0].type
    t = pt.scalar.element_ty
    if not pt.is_tile():
        if ctx.check_bounds:
            check = ctx.add_check(op, f"store of {t}")
            check_chunk(ctx, check, P, M, ctx.elem_size(t), ctx.analysis.origin(op.operands[0]),
                        ir.Constant(I64, 0))
        masked_store(ctx, P, t, V, M)
        return
    if ctx.check_bounds:
        check_tile(ctx, op, P, M, t)

    def emit(masked):
        def rows_body(f, addr, w):
            m = M.chunk(ctx, f, w) if (M is not None and masked) else None
            masked_store(ctx, addr, t, V.chunk(ctx, f, w), m)

        def gather_body(f, addrs, w):
            m = M.chunk(ctx, f, w) if (M is not None and masked) else None
            scatter(ctx, addrs, t, V.chunk(ctx, f, w), m)

        _access(ctx, P, pt, rows_body, gather_body)

    _versioned(ctx, op.operands[2] if M is not None else None, emit)
