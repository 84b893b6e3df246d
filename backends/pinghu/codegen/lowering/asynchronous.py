"""Codegen of the Pinghu stage ops (``ph.*``): shared buffers, AsyncBarriers, TME copies,
SQMMA and warp-specialized partitions.

Shared buffers get fixed 256-byte aligned offsets above the kernel's scratch area
(:func:`plan_shared`); a stage index adds ``index * stage bytes``. Barrier arrays get
consecutive ids from 0 (all but the reserved one) and are initialized by thread 0 at their allocation,
followed by a block barrier. Copies, ``expect_tx`` and inits are issued by the *leader*
(thread 0 of the executing partition); arrivals are counted per warp. SQMMA is
:mod:`.sqmma`'s.
"""
from __future__ import annotations

from mutile.errors import CompilationError
from mutile.ir import types as T
from mutile.ir.ops_pinghu import SHARED_BYTES, TME_GLOBAL_ALIGN, USABLE_BARRIERS
from mutile.ir.types import SharedType, TileType

from ..context import Codegen, lowers
from .memory import STORE_TYPE, _load_suffix
from ..values import VP, VR, DescVal, TileVal, Uniform, VMem, log2, numel
from ...isa.operands import RZ, IntImm, Reg
from ..regalloc import label_ref
from ...isa.tensor_memory import SHARED_ALIGN, desc_info, desc_words, pack_box


class SmemVal:
    """A shared buffer: byte address (a uniform: immediate or register), type."""

    def __init__(self, addr: Uniform, ty: SharedType):
        self.addr, self.ty = addr, ty


class BarVal:
    """Barriers ``first .. first+count-1``; ``id``: the selected one (uniform)."""

    def __init__(self, first: int, count: int, arrive_warps: int, index: Uniform | None = None):
        self.first, self.count, self.arrive_warps, self.index = first, count, arrive_warps, index


def plan_shared(func, base: int) -> dict:
    """Offsets of every ``ph.alloc_shared`` of ``func`` from ``base`` (256-aligned)."""
    out, top = {}, -(-base // SHARED_ALIGN) * SHARED_ALIGN
    for op in func.walk():
        if op.name == "ph.alloc_shared":
            out[op] = top
            top += -(-op.results[0].type.nbytes // SHARED_ALIGN) * SHARED_ALIGN
    return out


def _u32(cg: Codegen, u) -> object:
    """A register or immediate holding the low 32 bits of scalar ``u``."""
    if isinstance(u, Uniform):
        if isinstance(u.src, int):
            return IntImm(u.src & 0xFFFFFFFF)
        if isinstance(u.src, IntImm):
            return u.src
        if isinstance(u.src, VR):
            return VR(u.src.v, u.src.start, 1)
    cg.fail("a descriptor field must be a scalar")


def _reg(cg: Codegen, x) -> VR:
    """``x`` (register or immediate) in a register."""
    if isinstance(x, VR):
        return x
    v = cg.vreg(1)
    cg.emit("ALU.MOV.IMM", VR(v, 0, 1), x)
    return VR(v, 0, 1)


def leader(cg: Codegen) -> VP:
    """Predicate of the executing partition's thread 0."""
    p = cg.vreg(1, kind="P")
    cg.emit("ALU.ISETP.EQ.S32", VP(p, 0, 1), cg.tid, IntImm(0))
    return VP(p, 0, 1)


def _uniform_add(cg: Codegen, a: Uniform, b, scale: int = 1) -> Uniform:
    """Uniform i32 ``a + b * scale`` (b: uniform or int)."""
    ca = cg.const_int(a)
    cb = b if isinstance(b, int) else cg.const_int(b)
    if ca is not None and cb is not None:
        return Uniform(IntImm(ca + cb * scale), (), T.i32)
    if ca == 0 and scale == 1 and isinstance(b, Uniform):
        return Uniform(b.src, (), T.i32)
    out = cg.vreg(1)
    if cb is not None:
        cg.emit("ALU.IADD.S32", VR(out, 0, 1), _reg(cg, cg.operand(a)), IntImm(cb * scale))
    elif scale == 1:
        cg.emit("ALU.IADD.S32", VR(out, 0, 1), _reg(cg, cg.operand(b)), cg.operand(a))
    else:
        cg.emit("ALU.IMAD.S32", VR(out, 0, 1), _reg(cg, cg.operand(b)), IntImm(scale),
                cg.operand(a))
    return Uniform(VR(out, 0, 1), (), T.i32)


# ---------------------------------------------------------------- allocation
@lowers("ph.alloc_shared")
def lower_alloc_shared(cg: Codegen, op) -> None:
    _outside_partitions(cg, "allocate shared buffers")
    off = cg.smem_offsets[op]
    ty = op.results[0].type
    if off + ty.nbytes > SHARED_BYTES:
        cg.fail(f"shared buffers and scratch need {off + ty.nbytes} bytes with this buffer; a "
                f"block has {SHARED_BYTES} (192 KiB)")
    cg.shared_top = max(cg.shared_top, off + ty.nbytes)
    cg.bind(op.results[0], SmemVal(Uniform(IntImm(off), (), T.i32), ty))


@lowers("ph.alloc_barriers")
def lower_alloc_barriers(cg: Codegen, op) -> None:
    _outside_partitions(cg, "allocate barriers")
    n, w = op.attrs["count"], op.attrs["arrive_warps"]
    first = cg.barriers_used
    if first + n > USABLE_BARRIERS:
        cg.fail(f"this kernel allocates {first + n} AsyncBarriers; a block has "
                f"{USABLE_BARRIERS} usable ones")
    cg.barriers_used += n
    warps = cg.threads // 32
    if w > warps:
        cg.fail(f"barriers wait for {w} warp arrivals but the block has {warps} warps")
    lead = leader(cg)
    for i in range(n):
        cg.emit("ASYNC.BAR.INIT", IntImm(first + i), IntImm(w), guard=lead)
    cg.block_sync()
    cg.bind(op.results[0], BarVal(first, n, w))


def _outside_partitions(cg: Codegen, what: str) -> None:
    if cg.partition is not None:
        cg.fail(f"{what} before ph.warp_specialize, not inside a partition")


@lowers("ph.smem_index")
def lower_smem_index(cg: Codegen, op) -> None:
    buf = cg.get(op.operands[0])
    i = cg.as_uniform(cg.get(op.operands[1]))
    ty = op.results[0].type
    _in_range(cg, i, buf.ty.shape[0], "stage")
    cg.bind(op.results[0], SmemVal(_uniform_add(cg, buf.addr, i, ty.nbytes), ty))


@lowers("ph.bar_index")
def lower_bar_index(cg: Codegen, op) -> None:
    b = cg.get(op.operands[0])
    i = cg.as_uniform(cg.get(op.operands[1]))
    _in_range(cg, i, b.count, "barrier")
    base = b.index if b.index is not None else Uniform(IntImm(b.first), (), T.i32)
    cg.bind(op.results[0], BarVal(b.first, 1, b.arrive_warps, _uniform_add(cg, base, i)))


def _in_range(cg: Codegen, i, n: int, what: str) -> None:
    c = cg.const_int(i)
    if c is not None and not 0 <= c < n:
        cg.fail(f"{what} index {c} is out of range: there are {n}")


def bar_id(cg: Codegen, b: BarVal):
    """The selected barrier id as a register or immediate."""
    return cg.operand(b.index) if b.index is not None else IntImm(b.first)


# ---------------------------------------------------------------- barriers
@lowers("ph.expect_tx")
def lower_expect_tx(cg: Codegen, op) -> None:
    b = bar_id(cg, cg.get(op.operands[0]))
    lead = leader(cg)
    cg.emit("ASYNC.BAR.ADD_TRANS", b, IntImm(op.attrs["bytes"]), guard=lead)
    cg.emit("ASYNC.BAR.ARRIVE", Reg(RZ), b, guard=lead)


@lowers("ph.arrive")
def lower_arrive(cg: Codegen, op) -> None:
    b = bar_id(cg, cg.get(op.operands[0]))
    out = cg.vreg(1)
    cg.emit("ASYNC.BAR.ARRIVE", VR(out, 0, 1), b)
    cg.bind(op.results[0], Uniform(VR(out, 0, 1), (), T.i32))


@lowers("ph.wait")
def lower_wait(cg: Codegen, op) -> None:
    b = bar_id(cg, cg.get(op.operands[0]))
    p = cg.as_uniform(cg.get(op.operands[1]))
    c = cg.const_int(p)
    cg.emit("ASYNC.BAR.WAIT", b, IntImm(c & 1) if c is not None else cg.operand(p))


# ---------------------------------------------------------------- TME
def desc_run(cg: Codegen, d: DescVal) -> VR:
    """The TME descriptor of ``d`` in a register run (see :mod:`...isa.tensor_memory`), built
    once where the descriptor is made when a TME op uses it (:func:`prepare_desc`)."""
    hit = cg.desc_runs.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
    r = len(d.block)
    v = cg.vreg(desc_words(r), 2)
    size = d.ty.itemsize
    base = d.base.src if isinstance(d.base.src, VR) else cg.materialize_scalar(d.base)
    cg.emit("ALU.MOV.B64", VR(v, 0, 2), base)
    cg.emit("ALU.MOV.IMM", VR(v, 2, 1), IntImm(desc_info(d.ty.name, r)))
    for k, dim in enumerate(d.dims):
        x = _u32(cg, dim)
        cg.emit("ALU.MOV.IMM" if isinstance(x, IntImm) else "ALU.MOV.B32", VR(v, 3 + k, 1), x)
    for k, st in enumerate(d.strides):
        x = _u32(cg, st)
        dst = VR(v, 3 + r + k, 1)
        if isinstance(x, IntImm):
            cg.emit("ALU.MOV.IMM", dst, IntImm((x.value * size) & 0xFFFFFFFF))
        else:
            cg.emit("ALU.SHL.B32", dst, x, IntImm(log2(size)))
    return VR(v, 0, desc_words(r))


def prepare_desc(cg: Codegen, op, d: DescVal) -> None:
    """At ``make_desc`` ``op``: build the register descriptor now if TME copies use it."""
    if op.results[0] in cg.tme_descs:
        cg.desc_runs[id(d)] = (d, desc_run(cg, d))


def tme_descriptors(func) -> set:
    """The descriptor values some TME op of ``func`` reads."""
    return {op.operands[0] for op in func.walk() if op.name in ("ph.tme_load", "ph.tme_store")}


def _coord_run(cg: Codegen, coords: list) -> VR:
    v = cg.vreg(len(coords))
    for k, c in enumerate(coords):
        x = cg.operand(cg.as_uniform(c))
        cg.emit("ALU.MOV.IMM" if isinstance(x, IntImm) else "ALU.MOV.B32", VR(v, k, 1), x)
    return VR(v, 0, len(coords))


def _check_tme_strides(cg: Codegen, d: DescVal) -> None:
    """Constant strides TME cannot copy are refused here (others fault when issued)."""
    size = d.ty.itemsize
    inner = cg.const_int(d.strides[-1]) if isinstance(d.strides[-1], Uniform) else None
    if inner is not None and inner != 1 and d.dims:
        cg.fail(f"TME copies rows with contiguous elements; this descriptor's inner stride "
                f"is {inner} elements")
    for st in d.strides[:-1]:
        c = cg.const_int(st) if isinstance(st, Uniform) else None
        if c is not None and c * size % TME_GLOBAL_ALIGN:
            cg.fail(f"TME needs strides of a multiple of {TME_GLOBAL_ALIGN} bytes; this "
                    f"descriptor has a stride of {c} x {size} = {c * size} bytes")


@lowers("ph.tme_load")
def lower_tme_load(cg: Codegen, op) -> None:
    d, s, b, *coords = (cg.get(v) for v in op.operands)
    _check_tme_strides(cg, d)
    dr, cr = desc_run(cg, d), _coord_run(cg, coords)
    addr = _reg(cg, cg.operand(s.addr))
    bid = _reg(cg, bar_id(cg, b))
    cg.emit(f"TME.LD.TILE.{len(d.block)}D", addr, dr, cr, bid,
            IntImm(pack_box(d.block, s.ty.swizzle)), guard=leader(cg))


@lowers("ph.tme_store")
def lower_tme_store(cg: Codegen, op) -> None:
    d, s, *coords = (cg.get(v) for v in op.operands)
    _check_tme_strides(cg, d)
    dr, cr = desc_run(cg, d), _coord_run(cg, coords)
    addr = _reg(cg, cg.operand(s.addr))
    cg.block_sync()                     # every thread's writes of the buffer are done
    lead = leader(cg)
    cg.emit(f"TME.ST.TILE.{len(d.block)}D", dr, cr, addr,
            IntImm(pack_box(d.block, s.ty.swizzle)), guard=lead)
    cg.emit("TME.ST.COMMIT", guard=lead)


@lowers("ph.tme_store_wait")
def lower_tme_store_wait(cg: Codegen, op) -> None:
    cg.emit("TME.ST.WAIT")


@lowers("ph.fence_shared")
def lower_fence(cg: Codegen, op) -> None:
    cg.emit("FENCE.ASYNC.SHARED")


# ---------------------------------------------------------------- generic shared access
def _element_addresses(cg: Codegen, s: SmemVal, shape: tuple) -> TileVal:
    """Physical byte addresses of the elements this thread holds (block layout)."""
    size = s.ty.element.itemsize
    idx = cg.index_run(shape)
    cg.emit("ALU.SHL.B32", idx.run(), idx.run(), IntImm(log2(size)))
    base = cg.operand(s.addr)
    cg.emit("ALU.IADD.S32", idx.run(), idx.run(), base)
    _swizzle(cg, s, idx.run())
    return idx


def _swizzle(cg: Codegen, s: SmemVal, addr: VR) -> None:
    """Apply ``s``'s swizzle to the byte addresses ``addr`` in place: the unit of
    ``swizzle`` bytes at address ``a`` is XORed with ``(a >> 8)``, within a 256-byte line."""
    g = s.ty.swizzle
    if g:
        t = VR(cg.vreg(addr.count), 0, addr.count)
        cg.emit("ALU.SHR.U32", t, addr, IntImm(8))
        cg.emit("ALU.LOP.AND.B32", t, t, IntImm(256 // g - 1))
        cg.emit("ALU.SHL.B32", t, t, IntImm(log2(g)))
        cg.emit("ALU.LOP.XOR.B32", addr, addr, t)


@lowers("ph.shared_load")
def lower_shared_load(cg: Codegen, op) -> None:
    s = cg.get(op.operands[0])
    ty = op.results[0].type
    addr = _element_addresses(cg, s, ty.shape)
    out = cg.new_tile(ty.shape, ty.element)
    suffix = _load_suffix(ty.element)
    cg.emit(f"LSU.LD.SHARED.{suffix}", out.run(), VMem(addr.run()))
    cg.bind(op.results[0], out)


@lowers("ph.shared_store")
def lower_shared_store(cg: Codegen, op) -> None:
    s = cg.get(op.operands[0])
    val = cg.get(op.operands[1])
    shape = s.ty.shape
    v = cg.materialize(val if isinstance(val, TileVal) else
                       Uniform(val.src, shape, val.ty))
    n = _chunks(cg, s, shape)
    if n:
        _store_chunks(cg, s, n, v)
        return
    addr = _element_addresses(cg, s, shape)
    cg.emit(f"LSU.ST.SHARED.{STORE_TYPE[s.ty.element.bits]}", VMem(addr.run()), v.run(),
            guard=cg.owner_pred(shape))


CHUNK = 16                  # bytes of one LSU.*.SHARED.B128 element


def _chunks(cg: Codegen, s: SmemVal, shape: tuple) -> int:
    """How many 16-byte chunks this thread's elements of a whole-buffer tile make, or 0
    when they are not whole chunks. The block layout gives a thread ``E`` consecutive
    elements, so ``E * size`` bytes from a multiple of them; a buffer (or a stage of one)
    starts 16-byte aligned when its size is a multiple of 16 (buffers are 256-byte
    aligned, stages a multiple of their size apart), and a swizzle permutes units of at
    least 16 bytes inside 256-byte lines, so a chunk stays contiguous."""
    lay = cg.layout(shape)
    size = s.ty.element.itemsize
    if lay.replicated or size not in (2, 4) or lay.E * size % CHUNK or s.ty.nbytes % CHUNK:
        return 0
    return lay.E * size // CHUNK


def _store_chunks(cg: Codegen, s: SmemVal, n: int, v: TileVal) -> None:
    """The store as ``LSU.ST.SHARED.B128`` of this thread's ``n`` 16-byte chunks: 32-bit
    elements from a quad-aligned copy of the run, 16-bit ones packed two to a register
    (``ALU.PACK.B16``) into one quad per chunk."""
    first = cg.vreg(1)
    cg.emit("ALU.SHL.B32", VR(first, 0, 1), cg.tid, IntImm(log2(n * CHUNK)))
    addr = VR(cg.vreg(n), 0, n)
    cg.emit("ALU.IOTA.S32", addr, VR(first, 0, 1), IntImm(CHUNK))
    cg.emit("ALU.IADD.S32", addr, addr, cg.operand(s.addr))
    _swizzle(cg, s, addr)
    if s.ty.element.itemsize == 4:
        src = VR(cg.vreg(4 * n, 4), 0, 4 * n)
        cg.emit("ALU.MOV.B32", src, v.run())
        cg.emit("LSU.ST.SHARED.B128", VMem(addr), src)
        return
    for c in range(n):
        quad = cg.vreg(4, 4)
        for j in range(4):
            e = 8 * c + 2 * j
            cg.emit("ALU.PACK.B16", VR(quad, j, 1), VR(v.vreg, e, 1), VR(v.vreg, e + 1, 1))
        cg.emit("LSU.ST.SHARED.B128", VMem(VR(addr.v, c, 1)), VR(quad, 0, 4))


# ---------------------------------------------------------------- warp specialization
@lowers("ph.warp_specialize")
def lower_warp_specialize(cg: Codegen, op) -> None:
    if cg.partition is not None:
        cg.fail("ph.warp_specialize cannot nest")
    warps = list(op.attrs["warps"])
    done = cg.label("L_ws_done")
    outer_tid, outer_threads = cg.tid, cg.threads
    cg.emit("SSY", label_ref(done))
    # The partitions' code runs last partition first: a value of the kernel's prologue
    # that only a later partition reads (a producer's TME descriptors) then dies before
    # the first partition's code (the consumers', where the tiles are), whose threads
    # never read it; the register allocator sees code order, not which threads run it.
    starts = [sum(warps[:i]) for i in range(len(warps))]
    for i in reversed(range(len(warps))):
        w, region, first = warps[i], op.regions[i], starts[i]
        nxt = cg.label("L_ws_next")
        inside = cg.vreg(1, kind="P")
        lo, hi = first * 32, (first + w) * 32
        cg.emit("ALU.ISETP.GE.S32", VP(inside, 0, 1), outer_tid, IntImm(lo))
        p2 = cg.vreg(1, kind="P")
        cg.emit("ALU.ISETP.LT.S32", VP(p2, 0, 1), outer_tid, IntImm(hi))
        cg.emit("ALU.PLOP.AND", VP(inside, 0, 1), VP(inside, 0, 1), VP(p2, 0, 1))
        cg.emit("BRA", label_ref(nxt), guard=VP(inside, 0, 1, True))
        tid = cg.vreg(1)
        cg.emit("ALU.IADD.S32", VR(tid, 0, 1), outer_tid, IntImm(-lo))
        cg.tid, cg.threads, cg.partition = VR(tid, 0, 1), 32 * w, (i, w, first)
        try:
            cg.walk(region)
        finally:
            cg.tid, cg.threads, cg.partition = outer_tid, outer_threads, None
        cg.loc = op.loc
        cg.emit("SYNC")
        cg.place(nxt)
    cg.emit("SYNC")
    cg.place(done)


def check_warp_specialized(cg: Codegen, func) -> int | None:
    """For a kernel with ``ph.warp_specialize``: its total warps (after checking that tile
    code runs only inside partitions and the first partition has ``num_warps``)."""
    ws = [op for op in func.body.ops if op.name == "ph.warp_specialize"]
    if not ws:
        return None
    if len(ws) > 1:
        raise CompilationError("a kernel has at most one ph.warp_specialize", ws[1].loc)
    warps = list(ws[0].attrs["warps"])
    if warps[0] * 32 != cg.threads:
        raise CompilationError(f"ph.warp_specialize: the first partition runs on the kernel's "
                               f"num_warps={cg.threads // 32} warps, but asks for {warps[0]}",
                               ws[0].loc)
    for op in func.body.ops:
        if op is ws[0]:
            continue
        types = [v.type for v in op.results] + [v.type for v in op.operands]
        if any(isinstance(t, TileType) and numel(t.shape) > 1 for t in types) or op.regions:
            raise CompilationError("in a warp-specialized kernel, tile code and control flow "
                                   "run inside partitions (this op is outside "
                                   "ph.warp_specialize)", op.loc)
    return sum(warps)


__all__ = ["SmemVal", "check_warp_specialized", "plan_shared", "prepare_desc",
           "tme_descriptors"]


@lowers("ph.sync")
def lower_sync(cg: Codegen, op) -> None:
    cg.block_sync()


@lowers("ph.desc_aligned")
def lower_desc_aligned(cg: Codegen, op) -> None:
    """i1: base and every non-inner byte stride of the descriptor are multiples of TME's
    global alignment (and of the element size), and the inner stride is 1."""
    d = cg.get(op.operands[0])
    acc = cg.vreg(1)
    a = VR(acc, 0, 1)
    base = d.base.src if isinstance(d.base.src, VR) else cg.materialize_scalar(d.base)
    cg.emit("ALU.MOV.B32", a, VR(base.v, base.start, 1))
    size = d.ty.itemsize
    for st in d.strides[:-1]:
        x = _u32(cg, st)
        if isinstance(x, IntImm):
            if x.value * size % TME_GLOBAL_ALIGN:
                cg.emit("ALU.MOV.IMM", a, IntImm(1))    # never aligned
            continue
        t = cg.vreg(1)
        cg.emit("ALU.SHL.B32", VR(t, 0, 1), x, IntImm(log2(size)))
        cg.emit("ALU.LOP.OR.B32", a, a, VR(t, 0, 1))
    p = cg.vreg(1, kind="P")
    cg.emit("ALU.LOP.AND.B32", a, a, IntImm(max(TME_GLOBAL_ALIGN, size) - 1))
    cg.emit("ALU.ISETP.EQ.U32", VP(p, 0, 1), a, IntImm(0))
    inner = d.strides[-1]
    if cg.const_int(inner) != 1:        # TME rows are contiguous
        q = cg.vreg(1, kind="P")
        cg.emit("ALU.ISETP.EQ.U32", VP(q, 0, 1), _reg(cg, _u32(cg, inner)), IntImm(1))
        cg.emit("ALU.PLOP.AND", VP(p, 0, 1), VP(p, 0, 1), VP(q, 0, 1))
    out = cg.pred_reg(VP(p, 0, 1), ())
    cg.bind(op.results[0], Uniform(out.run(), (), T.i1, pred=VP(p, 0, 1)))
