"""Pointer arithmetic, loads and stores.

A pointer tile made from a scalar pointer plus i32 offsets stays a
:class:`~..values.PtrTile` (a 64-bit base and the i32 element offsets); the 64-bit
addresses are formed (``ALU.IMAD.WIDE.S32``) right before an access, so long-lived
pointer tiles cost one register per element, not two. Anything else (64-bit or unsigned
offsets, pointers from selects or loop carriers) is a full tile of 64-bit addresses.
A load or store is one ``LSU`` instruction over the tile's run of addresses; masks
become a predicate-run guard, and stores of replicated tiles are guarded to the owners.
"""
from __future__ import annotations

from mutile.ir import types as T

from .. import recipe
from ..context import Codegen, element, lowers, width
from ..values import VP, VR, PtrTile, TileVal, Uniform, VMem
from .elementwise import emit_recipe
from .vector import plan, runtime_check, vector_access
from ...isa.operands import IntImm
from ..regalloc import label_ref

LOAD_TYPE = {1: "U8", 8: "S8", 16: "S16", 32: "B32", 64: "B64"}
STORE_TYPE = {1: "B8", 8: "B8", 16: "B16", 32: "B32", 64: "B64"}


def _load_suffix(t) -> str:
    if t.is_floating() and t.bits == 16 or (t.is_int_unsigned() and t.bits in (8, 16)) \
            or t.is_fp8():
        return "U16" if t.bits == 16 else "U8"
    return LOAD_TYPE[t.bits]


def _is_i32(t) -> bool:
    """Offsets of type ``t`` fit an i32 register as they are (sign- or zero-extended)."""
    return t.is_int() and (t.bits < 32 or (t.bits == 32 and t.is_int_signed()))


def _scaled_add(cg: Codegen, base, off, off_t, size: int, shape) -> TileVal:
    """64-bit ``base + off * size`` (base: uniform or tile of addresses)."""
    uni = isinstance(base, Uniform) and isinstance(off, Uniform)
    out = cg.new_tile(() if uni else shape, T.u64)
    bo = cg.operand(base, False)
    if width(off_t) == 1:
        kind = "S32" if off_t.is_int_signed() or off_t.bits < 32 else "U32"
        cg.emit(f"ALU.IMAD.WIDE.{kind}", out.run(), cg.operand(off, False), IntImm(size), bo)
    else:
        cg.emit("ALU.IMUL.S64", out.run(), cg.operand(off, False), IntImm(size))
        cg.emit("ALU.IADD.S64", out.run(), out.run(), bo)
    return out


@lowers("addptr")
def lower_addptr(cg: Codegen, op) -> None:
    p = cg.as_uniform(cg.get(op.operands[0]))
    off = cg.as_uniform(cg.get(op.operands[1]))
    off_t = element(op.operands[1].type)
    rt = op.results[0].type
    shape = rt.shape if rt.is_tile() else ()
    ptr_t = rt.scalar if rt.is_tile() else rt
    size = ptr_t.element_ty.itemsize
    if isinstance(p, Uniform) and isinstance(off, Uniform):
        out = _scaled_add(cg, p, off, off_t, size, shape)
        cg.bind(op.results[0], Uniform(out.run(), shape, ptr_t))
    elif isinstance(p, PtrTile) and isinstance(off, Uniform):
        base = _scaled_add(cg, p.base, off, off_t, size, ())
        cg.bind(op.results[0], PtrTile(Uniform(base.run(), (), ptr_t), p.off, shape, ptr_t))
    elif isinstance(p, (Uniform, PtrTile)) and _is_i32(off_t):
        if isinstance(p, Uniform):
            cg.bind(op.results[0], PtrTile(p, off, shape, ptr_t))
            return
        total = cg.new_tile(shape, T.i32)
        cg.emit("ALU.IADD.S32", total.run(), cg.operand(p.off, False), cg.operand(off))
        total.recipe = recipe.combine("add", [p.off, off], T.i32)
        cg.bind(op.results[0], PtrTile(p.base, total, shape, ptr_t))
    else:
        base = cg.materialize(p) if not isinstance(p, Uniform) else p
        cg.bind(op.results[0], _retype(_scaled_add(cg, base, off, off_t, size, shape), ptr_t))


def _retype(t: TileVal, ty) -> TileVal:
    return TileVal(t.vreg, t.shape, ty, t.E, t.w)


def _address_tile(cg: Codegen, p, shape) -> TileVal:
    if isinstance(p, Uniform):
        return cg.materialize(Uniform(p.src, shape, p.ty))
    return cg.materialize(p)


ACCESS_CHUNK = 16       # elements a chunked access forms 64-bit addresses for at once


def _chunks(cg: Codegen, p, shape):
    """(first element, count, address operand) of the pieces a thread's access through
    pointer tile ``p`` is issued in. A based pointer tile with more than
    :data:`ACCESS_CHUNK` elements a thread forms its 64-bit addresses a chunk at a time
    (its offsets recomputed from their recipe when they have one): two registers an
    element for a chunk, not for the whole tile, beside what the access moves (a GEMM's
    epilogue stores its accumulator while the other half of it is still live)."""
    E = cg.layout(shape).E
    if not (isinstance(p, PtrTile) and isinstance(p.off, TileVal) and E > ACCESS_CHUNK):
        yield 0, E, VMem(_address_tile(cg, p, shape).run())
        return
    size = p.ty.element_ty.itemsize if hasattr(p.ty, "element_ty") else 1
    base = cg.operand(p.base)
    for c in range(0, E, ACCESS_CHUNK):
        n = min(ACCESS_CHUNK, E - c)
        if p.off.recipe is not None:
            off = emit_recipe(cg, p.off.recipe, shape, T.i32,
                              index=cg.index_run(shape, c, n)).run()
        else:
            off = p.off.run(c, n)
        addr = cg.vreg(2 * n, 2)
        cg.emit("ALU.IMAD.WIDE.S32", VR(addr, 0, 2 * n), off, IntImm(size), base)
        yield c, n, VMem(VR(addr, 0, 2 * n))


def _piece(guard: VP | None, c: int, n: int) -> VP | None:
    return None if guard is None else VP(guard.v, guard.start + c, n, guard.neg)


@lowers("load")
def lower_load(cg: Codegen, op) -> None:
    p = cg.as_uniform(cg.get(op.operands[0]))
    names = [n.rstrip("?") for n in op.opdef.operands]
    got = dict(zip(names, op.operands))
    mask = cg.as_uniform(cg.get(got["mask"])) if "mask" in got else None
    other = cg.as_uniform(cg.get(got["other"])) if "other" in got else None
    rt = op.results[0].type
    t = element(rt)
    shape = rt.shape if rt.is_tile() else ()
    scalar = isinstance(p, Uniform) and (mask is None or isinstance(mask, Uniform))
    out = cg.new_tile((), t) if scalar else _aligned_tile(cg, shape, t)

    def prefill():
        if mask is not None:
            from .control import move
            move(cg, out.run(), other if other is not None else Uniform(IntImm(0), (), t)
                 if width(t) == 1 else Uniform(0, (), t))

    def scalar_path():
        prefill()
        guard = cg.pred_of(mask) if mask is not None else None
        if scalar:
            addr = p.src if not isinstance(p.src, (int, IntImm)) else cg.materialize_scalar(p)
            cg.emit(f"LSU.LD.GLOBAL.{_load_suffix(t)}", out.run(), VMem(addr), guard=guard)
            return
        for c, n, addr in _chunks(cg, p, shape):
            cg.emit(f"LSU.LD.GLOBAL.{_load_suffix(t)}", out.run(c, n), addr,
                    guard=_piece(guard, c, n))

    def vector_path(G):
        prefill()
        vector_access(cg, p, mask, shape, G, t, lambda addr, guard: cg.emit(
            "LSU.LD.GLOBAL.B128", out.run(), addr, guard=guard))

    _versioned(cg, None if scalar else plan(cg, p, mask, t, shape), p, scalar_path,
               vector_path)
    cg.bind(op.results[0], Uniform(out.run(), shape, t) if scalar else out)


def _aligned_tile(cg: Codegen, shape, t) -> TileVal:
    """A register tile whose run starts at a multiple of 4 (a 128-bit access target)."""
    lay = cg.layout(shape)
    w = width(t)
    return TileVal(cg.vreg(lay.E * w, 4), shape, t, lay.E, w)


def _versioned(cg: Codegen, plan_, p, scalar_path, vector_path) -> None:
    """The scalar access, or (when ``plan_`` allows) a run-time choice between the
    vector access and the scalar one (see :mod:`.vector`)."""
    if plan_ is None:
        scalar_path()
        return
    G, leaves = plan_
    ok = runtime_check(cg, p.base, leaves, G)
    other, done = cg.label("L_scalar"), cg.label("L_vec_done")
    cg.emit("SSY", label_ref(done))
    cg.emit("BRA", label_ref(other), guard=ok.negated())
    vector_path(G)
    cg.emit("SYNC")
    cg.place(other)
    scalar_path()
    cg.emit("SYNC")
    cg.place(done)


@lowers("store")
def lower_store(cg: Codegen, op) -> None:
    p = cg.as_uniform(cg.get(op.operands[0]))
    val = cg.as_uniform(cg.get(op.operands[1]))
    mask = cg.as_uniform(cg.get(op.operands[2])) if len(op.operands) > 2 else None
    vt = op.operands[1].type
    t = element(vt)
    shape = vt.shape if vt.is_tile() else ()
    scalar = isinstance(p, Uniform) and isinstance(val, Uniform) and \
        (mask is None or isinstance(mask, Uniform))
    if scalar:
        addr = p.src if not isinstance(p.src, (int, IntImm)) else cg.materialize_scalar(p)
        src = cg.materialize_scalar(val) if not hasattr(val.src, "v") else val.src
        owners = cg.owner_pred(())
        guard = cg.and_preds(owners, cg.pred_of(mask) if mask is not None else None)
        cg.emit(f"LSU.ST.GLOBAL.{STORE_TYPE[t.bits]}", VMem(addr), src, guard=guard)
        return
    v = cg.materialize(Uniform(val.src, shape, val.ty) if isinstance(val, Uniform) else val)

    def scalar_path():
        guard = cg.pred_of(mask) if mask is not None else None
        guard = cg.and_preds(guard, cg.owner_pred(shape))
        for c, n, addr in _chunks(cg, p, shape):
            cg.emit(f"LSU.ST.GLOBAL.{STORE_TYPE[t.bits]}", addr, v.run(c, n),
                    guard=_piece(guard, c, n))

    def vector_path(G):
        src = v
        if src.vreg.align % 4 or src.run().start % 4:
            src = _aligned_tile(cg, shape, t)
            cg.emit("ALU.MOV.B32", src.run(), v.run())
        vector_access(cg, p, mask, shape, G, t, lambda addr, guard: cg.emit(
            "LSU.ST.GLOBAL.B128", addr, src.run(), guard=guard))

    _versioned(cg, plan(cg, p, mask, t, shape), p, scalar_path, vector_path)
