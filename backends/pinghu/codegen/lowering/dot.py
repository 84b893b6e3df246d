"""dot: ``acc + a @ b``, each product and sum rounded in acc's type, k ascending — the
llvm backend's result bit for bit (docs/semantics.md), by one of two lowerings. Both
stage the operands in shared memory (A row-major, B row-major or transposed), work on
them there, and leave the result in the block layout.

**WMMA** (f32 accumulator; f16, bf16 or fp8 operands with K % 16 == 0, or f32 operands
with ``input_precision="tf32"`` and K % 8 == 0; M % 16 == 0, N % 8 == 0). fp8 widens to
f16 and f32 rounds by ``CVT.TF32.F32`` first (both exact as the llvm backend's f32
widening is); the products are exact in f32, so WMMA's per-k f32 rounding equals the fma
chain (for f16 and fp8 always; for bf16 and tf32 while no product falls below f32's
normal range, where the interpreter rounds the product first). B is stored transposed
so that every fragment register is one B32 load (two adjacent 16-bit elements, or one
tf32); C is loaded in B64 pairs. The output's 16x8 tiles
go to the warps: the *single* dimension (tile rows, or tile columns) is split over the
warps first, the other is the *run* — one ``WMMA D[run], A, B[run], C[run]`` per k step
multiplies one A fragment by a run of up to 8 B fragments (or a run of A by one B),
with at most 8 C fragments (32 registers) live at a time.
Each lane's fragment addresses are its lane base (from :mod:`...isa.wmma`'s table) plus a
register run built by one IOTA and a few doubling IADDs; the tile and k-step offsets are
immediates. The accumulator goes through shared memory into the fragments and back.

**FFMA** (every other case, and ``options["wmma"] = False``). A and B, widened as the
llvm backend does (to f32 for an f32 accumulator with f32/f16/bf16/fp8 operands, tf32-
rounded if asked; to f64 for any other float accumulator; to the accumulator's integer
width otherwise), are stored row-major. A thread's accumulator slots are ``G`` groups of
``L`` consecutive elements of one row; per k it loads ``b[k, n..n+L)`` (one load over an
address run whose k offset is an immediate), the groups' ``a[m, k]`` (one B128 load
brings 4 k's, 2 for 64-bit types) and issues one FFMA/IMAD per group over the run. Slots
go in batches of at most 32 registers so the temporaries stay small.
"""
from __future__ import annotations

import functools

import numpy as np

from mutile.ir import types as T

from ..context import Codegen, cvt_name, element, lowers, width
from .elementwise import wrap_int
from ..values import VP, VR, TileVal, Uniform, VMem, log2
from ...isa.operands import IntImm
from ...isa.program import MAX_SHARED
from ...isa.wmma import coords, layout

_F32_EXACT = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2")
_WMMA_AB = {"f16": "F16", "bf16": "BF16", "f8e4m3": "F16", "f8e5m2": "F16"}
_BITS = {2: "B16", 4: "B32", 8: "B64", 16: "B128"}
_SLOTS = 32          # registers of accumulator slots an FFMA batch works on
_RUN = 8             # fragments per WMMA run


@lowers("dot")
def lower_dot(cg: Codegen, op) -> None:
    a_v, b_v, acc_v = op.operands
    M, K = a_v.type.shape
    N = b_v.type.shape[1]
    et, at = element(a_v.type), element(acc_v.type)
    tf32 = op.attrs["input_precision"] == "tf32" and et == T.f32
    a, b, acc = (cg.get(v) for v in op.operands)
    plan = wmma_plan(cg, et, at, (M, N, K), tf32)
    if plan is not None:
        out = wmma_dot(cg, plan, a, b, acc)
    else:
        out = ffma_dot(cg, a, b, acc, et, at, (M, N, K), tf32)
    cg.bind(op.results[0], out)


# ---------------------------------------------------------------- shared helpers
def _align16(n: int) -> int:
    return -(-n // 16) * 16


def _converted(cg: Codegen, val, src, dst, mnemonic: str | None = None) -> TileVal:
    """``val`` as a register tile of type ``dst`` (``CVT.<dst>.<src>``, or ``mnemonic``);
    no instruction when the registers already hold it."""
    t = cg.materialize(val)
    if mnemonic is None and (cvt_name(src) == cvt_name(dst) or (
            not src.is_floating() and not dst.is_floating() and width(src) == width(dst))):
        return t
    out = cg.new_tile(t.shape, dst)
    cg.emit(mnemonic or f"CVT.{cvt_name(dst)}.{cvt_name(src)}", out.run(), t.run())
    return out


def _copy_acc(cg: Codegen, acc, shape: tuple, ty) -> TileVal:
    """A fresh register tile holding the accumulator's initial value (one MOV)."""
    out = cg.new_tile(shape, ty)
    src = acc.run() if isinstance(acc, TileVal) else cg.materialize_scalar(acc)
    cg.emit("ALU.MOV.B64" if out.w == 2 else "ALU.MOV.B32", out.run(), src)
    return out


def _scalar(cg: Codegen, mn: str, *srcs) -> VR:
    """A fresh register = ``mn`` of ``srcs`` (one instruction)."""
    r = VR(cg.vreg(1), 0, 1)
    cg.emit(mn, r, *srcs)
    return r


def shared_addresses(cg: Codegen, shape: tuple, size: int, transpose: bool = False) -> TileVal:
    """i32 tile: the byte offset of each element of a ``shape`` matrix stored row-major
    with ``size``-byte elements (column-major — the transpose row-major — if asked)."""
    rows, cols = shape
    lay = cg.layout(shape)
    if not transpose:                   # index * size: two instructions
        out = cg.new_tile(shape, T.i32)
        if lay.replicated:
            cg.emit("ALU.LOP.AND.B32", out.run(), cg.tid, IntImm(lay.n - 1))
            cg.emit("ALU.SHL.B32", out.run(), out.run(), IntImm(log2(size)))
        else:
            first = _scalar(cg, "ALU.SHL.B32", cg.tid, IntImm(log2(lay.E * size)))
            cg.emit("ALU.IOTA.S32", out.run(), first, IntImm(size))
        return out
    idx = cg.index_run(shape)
    col = cg.new_tile(shape, T.i32)
    cg.emit("ALU.LOP.AND.B32", col.run(), idx.run(), IntImm(cols - 1))
    cg.emit("ALU.SHL.B32", col.run(), col.run(), IntImm(log2(rows * size)))
    cg.emit("ALU.SHR.U32", idx.run(), idx.run(), IntImm(log2(cols)))
    cg.emit("ALU.SHL.B32", idx.run(), idx.run(), IntImm(log2(size)))
    cg.emit("ALU.LOP.OR.B32", idx.run(), idx.run(), col.run())
    return idx


def _stage(cg: Codegen, stores: list, top: int) -> None:
    """Store tiles to shared memory between two barriers: ``stores`` holds (tile, element
    bytes, base offset, transposed); ``top`` is the bytes the dot uses. Each address tile
    is made right before its store, so only one is live at a time."""
    cg.reserve_shared(top)
    cg.block_sync()
    for tile, size, base, transpose in stores:
        addr = shared_addresses(cg, tile.shape, size, transpose)
        cg.emit(f"LSU.ST.SHARED.{_BITS[size]}", VMem(addr.run(), base), tile.run(),
                guard=cg.owner_pred(tile.shape))
    cg.block_sync()


def address_run(cg: Codegen, base: VR, steps: list) -> VR:
    """A run of ``2 ** len(steps)`` registers: element ``i`` is ``base`` plus
    ``steps[b]`` for every set bit ``b`` of ``i`` (one IOTA for the leading steps that
    double, then one IADD per further step, each doubling the run)."""
    n = 1 if steps else 0
    while n < len(steps) and steps[n] == steps[0] << n:
        n += 1
    v = cg.vreg(1 << len(steps))
    cg.emit("ALU.IOTA.S32", VR(v, 0, 1 << n), base, IntImm(steps[0] if steps else 0))
    for b in range(n, len(steps)):
        cg.emit("ALU.IADD.S32", VR(v, 1 << b, 1 << b), VR(v, 0, 1 << b), IntImm(steps[b]))
    return VR(v, 0, 1 << len(steps))


# ---------------------------------------------------------------- FFMA path
def _stage_type(et, at):
    """The type A and B are widened to before the k loop (what llvm's dot computes in)."""
    if at.is_int():
        return (T.i64 if at.is_int_signed() else T.u64) if width(at) == 2 else T.i32
    if at == T.f32 and et.name in _F32_EXACT:
        return T.f32
    return T.f64


def _step(cg: Codegen, at, st, acc: VR, a: VR, b: VR) -> None:
    """One k step ``acc = acc + a * b`` over a run, rounded as the llvm backend rounds."""
    if st == T.f32:
        cg.emit("ALU.FFMA.F32", acc, a, b, acc)
    elif st.is_int() and width(st) == 1:
        cg.emit("ALU.IMAD.S32", acc, a, b, acc)
    elif st.is_int():
        tmp = VR(cg.vreg(b.count, 2), 0, b.count)
        cg.emit("ALU.IMUL.S64", tmp, a, b)
        cg.emit("ALU.IADD.S64", acc, acc, tmp)
    elif at == T.f64:
        cg.emit("ALU.FFMA.F64", acc, a, b, acc)
    else:                                   # an exact fma in f64, rounded to acc's type
        tmp = VR(cg.vreg(2 * acc.count, 2), 0, 2 * acc.count)
        cg.emit(f"CVT.F64.{cvt_name(at)}", tmp, acc)
        cg.emit("ALU.FFMA.F64", tmp, a, b, tmp)
        cg.emit(f"CVT.{cvt_name(at)}.F64", acc, tmp)


def ffma_dot(cg: Codegen, a, b, acc, et, at, mnk: tuple, tf32: bool) -> TileVal:
    """``acc + a @ b`` by FFMA/IMAD runs in the block layout (see the module docstring)."""
    M, N, K = mnk
    st = _stage_type(et, at)
    w = width(st)
    sz = 4 * w
    cvt = "CVT.TF32.F32" if tf32 and st == T.f32 else None   # llvm rounds only then
    A, B = (_converted(cg, v, et, st, cvt) for v in (a, b))
    out = _copy_acc(cg, acc, (M, N), at)
    base_b = _align16(M * K * sz)
    _stage(cg, [(A, sz, 0, False), (B, sz, base_b, False)], base_b + K * N * sz)

    lay = cg.layout((M, N))
    E = lay.E
    L = min(E, N)           # slots of one row
    G = E // L              # rows per thread
    if lay.replicated:
        first = _scalar(cg, "ALU.LOP.AND.B32", cg.tid, IntImm(lay.n - 1))
    else:
        first = _scalar(cg, "ALU.SHL.B32", cg.tid, IntImm(log2(E)))
    row = _scalar(cg, "ALU.SHR.U32", first, IntImm(log2(N)))
    cg.emit("ALU.SHL.B32", row, row, IntImm(log2(K * sz)))
    a_addr = address_run(cg, row, [K * sz << i for i in range(log2(G))])   # &A[m_g, 0]
    col = _scalar(cg, "ALU.LOP.AND.B32", first, IntImm(N - 1))
    cg.emit("ALU.SHL.B32", col, col, IntImm(log2(sz)))
    b_addr = address_run(cg, col, [sz << i for i in range(log2(L))])       # &B[0, n_l]

    kc = min(16 // sz, K)                   # k's per A load
    lc = min(L, _SLOTS // w)                # slots per batch and group
    gb = min(G, max(1, (_SLOTS // w) // L))  # groups per batch
    for g0 in range(0, G, gb):
        for l0 in range(0, L, lc):
            av = None
            for k in range(K):
                if k % kc == 0:
                    av = cg.vreg(gb * kc * w, kc * w)
                    cg.emit(f"LSU.LD.SHARED.{_BITS[kc * sz]}", VR(av, 0, gb * kc * w),
                            VMem(VR(a_addr.v, g0, gb), k * sz))
                bv = VR(cg.vreg(lc * w, w), 0, lc * w)
                cg.emit(f"LSU.LD.SHARED.{_BITS[sz]}", bv,
                        VMem(VR(b_addr.v, l0, lc), base_b + k * N * sz))
                for g in range(g0, g0 + gb):
                    a_k = VR(av, ((g - g0) * kc + k % kc) * w, w)
                    acc_run = VR(out.vreg, (g * L + l0) * out.w, lc * out.w)
                    _step(cg, at, st, acc_run, a_k, bv)
    if at.is_int() and width(at) == 1:
        wrap_int(cg, out, at)
    return out


# ---------------------------------------------------------------- WMMA path
@functools.lru_cache(maxsize=None)
def frag_geometry(shape: str, operand: str, per_load: int) -> tuple:
    """Where a lane's fragment lies in a row-major matrix (B: in B transposed), from
    :mod:`...isa.wmma`'s table: ``(lane_g, lane_t, steps)``. Lane ``(g, t)``'s first element
    is at (row, col) ``g * lane_g + t * lane_t``; the fragment is loads of ``per_load``
    adjacent elements of a row, load ``i`` starting there plus ``steps[b]`` (row, col)
    for every set bit ``b`` of ``i``."""
    rows, cols = coords(shape, operand)
    if operand == "B":
        rows, cols = cols, rows
    lane = np.arange(32)
    r0, c0 = rows[:, 0], cols[:, 0]
    lane_g = (int(r0[4]), int(c0[4]))
    lane_t = (int(r0[1]), int(c0[1]))
    assert (r0 == (lane >> 2) * lane_g[0] + (lane & 3) * lane_t[0]).all()
    assert (c0 == (lane >> 2) * lane_g[1] + (lane & 3) * lane_t[1]).all()
    dr, dc = rows - r0[:, None], cols - c0[:, None]
    assert (dr == dr[0]).all() and (dc == dc[0]).all(), (shape, operand)
    dr, dc = dr[0].reshape(-1, per_load), dc[0].reshape(-1, per_load)
    assert (dr == dr[:, :1]).all() and (dc == dc[:, :1] + np.arange(per_load)).all()
    starts = list(zip(dr[:, 0].tolist(), dc[:, 0].tolist()))
    steps = [starts[1 << b] for b in range(log2(len(starts)))]
    for i, (r, c) in enumerate(starts):
        assert (r, c) == tuple(sum(s[x] for b, s in enumerate(steps) if i >> b & 1)
                               for x in (0, 1)), (shape, operand)
    return lane_g, lane_t, tuple(steps)


class WmmaPlan:
    """How one dot maps onto WMMA: instruction, operand types, the warps' split.

    ``rows_run`` True: a warp's tiles are ``nv`` tile rows (single A fragments) by ``nu``
    tile columns (runs of B and C fragments); False: ``nv`` columns (single B) by ``nu``
    rows (runs of A and C). ``wv`` x ``wu`` warps split the single and the run dims;
    further warps (fewer tiles than warps) sit out, their instructions guarded off."""

    def __init__(self, mnk: tuple, ks: int, ab: str, esz: int, cvt, nw: int,
                 rows_run: bool):
        self.M, self.N, self.K = mnk
        self.ks, self.esz, self.cvt, self.rows_run = ks, esz, cvt, rows_run
        self.shape = f"M16N8K{ks}"
        self.layout = layout(self.shape, ab)          # its fragments (isa/wmma.py)
        self.mnemonic = f"WMMA.{self.shape}.F32.{ab}.{ab}"
        self.nk = self.K // ks
        self.TV, self.TU = (self.M // 16, self.N // 8) if rows_run else \
            (self.N // 8, self.M // 16)
        self.wv = min(nw, self.TV)
        self.wu = min(nw // self.wv, self.TU)
        self.nv, self.nu = self.TV // self.wv, self.TU // self.wu
        self.idle = nw > self.wv * self.wu

    def wmmas_per_warp(self) -> int:
        return self.nv * -(-self.nu // _RUN) * self.nk

    def coef(self, operand: str) -> tuple:
        """Bytes an operand's fragment address moves per (single tile, run tile, k
        step) in its stored matrix: A row-major, B transposed, C row-major f32."""
        K, N, e = self.K, self.N, self.esz
        m, n, k = {"A": (16 * K * e, 0, self.ks * e), "B": (0, 8 * K * e, self.ks * e),
                   "C": (16 * N * 4, 8 * 4, 0)}[operand]
        return (m, n, k) if self.rows_run else (n, m, k)


def wmma_plan(cg: Codegen, et, at, mnk: tuple, tf32: bool) -> WmmaPlan | None:
    """A :class:`WmmaPlan` when the dot can run on WMMA (see the module docstring)."""
    M, N, K = mnk
    if not cg.options.get("wmma", True) or at != T.f32 or M % 16 or N % 8:
        return None
    if et.name in _WMMA_AB and K % 16 == 0:
        ks, ab, esz = 16, _WMMA_AB[et.name], 2
        cvt = f"CVT.F16.{cvt_name(et)}" if et.bits == 8 else None
    elif tf32 and K % 8 == 0:
        ks, ab, esz, cvt = 8, "TF32", 4, "CVT.TF32.F32"
    else:
        return None
    if _align16(M * K * esz) + _align16(K * N * esz) + M * N * 4 > MAX_SHARED:
        return None
    nw = cg.threads // 32
    plans = [WmmaPlan(mnk, ks, ab, esz, cvt, nw, r) for r in (True, False)]
    return min(plans, key=lambda p: (p.wmmas_per_warp(), not p.rows_run))


def wmma_dot(cg: Codegen, p: WmmaPlan, a, b, acc) -> TileVal:
    """``acc + a @ b`` on WMMA runs (see the module docstring and :class:`WmmaPlan`)."""
    M, N, K = p.M, p.N, p.K
    wide = T.f16 if p.esz == 2 else T.f32
    A, B = (_converted(cg, v, v.ty, wide, p.cvt) if p.cvt else cg.materialize(v)
            for v in (a, b))
    bases = {"A": 0, "B": _align16(M * K * p.esz)}
    bases["C"] = bases["B"] + _align16(K * N * p.esz)
    stores = [(A, p.esz, bases["A"], False), (B, p.esz, bases["B"], True)]
    if isinstance(acc, TileVal):
        stores.append((acc, 4, bases["C"], False))
    _stage(cg, stores, bases["C"] + M * N * 4)
    _warp_tiles(cg, p, bases, acc if isinstance(acc, Uniform) else None)
    cg.block_sync()
    out = cg.new_tile((M, N), T.f32)
    c_addr = shared_addresses(cg, (M, N), 4)
    cg.emit("LSU.LD.SHARED.B32", out.run(), VMem(c_addr.run(), bases["C"]))
    return out


def _warp_tiles(cg: Codegen, p: WmmaPlan, bases: dict, uniform: Uniform | None) -> None:
    """Each warp: load its C fragments (or set them to the uniform accumulator), run the
    WMMAs k step by k step, store the fragments back."""
    single, run_op = ("A", "B") if p.rows_run else ("B", "A")
    keep = None
    if p.idle:
        keep = VP(cg.vreg(1, kind="P"), 0, 1)
        cg.emit("ALU.ISETP.LT.U32", keep, cg.tid, IntImm(32 * p.wv * p.wu))
    g = _scalar(cg, "ALU.SHR.U32", cg.tid, IntImm(2))
    cg.emit("ALU.LOP.AND.B32", g, g, IntImm(7))
    t = _scalar(cg, "ALU.LOP.AND.B32", cg.tid, IntImm(3))
    wv = wu = None
    if p.wv * p.wu > 1:
        warp = _scalar(cg, "ALU.SHR.U32", cg.tid, IntImm(5))
        if p.wv > 1:
            wv = _scalar(cg, "ALU.LOP.AND.B32", warp, IntImm((p.wv - 1) << log2(p.wu)))
            if p.wu > 1:
                cg.emit("ALU.SHR.U32", wv, wv, IntImm(log2(p.wu)))
        if p.wu > 1:
            wu = _scalar(cg, "ALU.LOP.AND.B32", warp, IntImm(p.wu - 1))
    pu = min(p.nu, _RUN)
    pv = max(1, min(p.nv, _RUN // pu))      # at most _RUN C fragments live

    lane_bases: dict = {}

    def fragment_addresses(op: str, nfrags: int, size: int) -> VR:
        """The address run of ``nfrags`` fragments of ``op`` for this lane and warp."""
        ld = p.N if op == "C" else p.K
        lane_g, lane_t, steps = frag_geometry(p.layout, op, 4 // size if op != "C" else 2)
        cv, cu, _ = p.coef(op)
        key = ((lane_g[0] * ld + lane_g[1]) * size, (lane_t[0] * ld + lane_t[1]) * size)
        if key not in lane_bases:
            lane_bases[key] = _scalar(cg, "ALU.IMUL.S32", g, IntImm(key[0]))
            cg.emit("ALU.IMAD.S32", lane_bases[key], t, IntImm(key[1]), lane_bases[key])
        base = lane_bases[key]
        for reg, scale in ((wv, cv * p.nv), (wu, cu * p.nu)):
            if reg is not None and scale:
                base = _scalar(cg, "ALU.IMAD.S32", reg, IntImm(scale), base)
        byte_steps = [(r * ld + c) * size for r, c in steps]
        return address_run(cg, base, byte_steps + [cu << i for i in range(log2(nfrags))])

    s_addr = fragment_addresses(single, 1, p.esz)
    r_addr = fragment_addresses(run_op, pu, p.esz)
    c_addr = fragment_addresses("C", pu, 4)
    s_regs, r_regs = (4, 2) if p.rows_run else (2, 4)
    (cv, cu, _), (_, ru, rk), (sv, _, sk) = p.coef("C"), p.coef(run_op), p.coef(single)
    init = cg.materialize_scalar(uniform) if uniform is not None else None
    for v0 in range(0, p.nv, pv):
        for u0 in range(0, p.nu, pu):
            frags = []                      # (tile row in the warp, C run, its offset)
            for i in range(v0, v0 + pv):
                c = VR(cg.vreg(4 * pu, 4), 0, 4 * pu)
                off = bases["C"] + i * cv + u0 * cu
                if init is not None:
                    cg.emit("ALU.MOV.B32", c, init, guard=keep)
                else:
                    cg.emit("LSU.LD.SHARED.B64", c, VMem(c_addr, off), guard=keep)
                frags.append((i, c, off))
            for k in range(p.nk):
                run = VR(cg.vreg(r_regs * pu, r_regs), 0, r_regs * pu)
                cg.emit("LSU.LD.SHARED.B32", run,
                        VMem(r_addr, bases[run_op] + u0 * ru + k * rk), guard=keep)
                for i, c, _ in frags:
                    one = VR(cg.vreg(s_regs, s_regs), 0, s_regs)
                    cg.emit("LSU.LD.SHARED.B32", one,
                            VMem(s_addr, bases[single] + i * sv + k * sk), guard=keep)
                    ab = (one, run) if p.rows_run else (run, one)
                    cg.emit(p.mnemonic, c, *ab, c, guard=keep)
            for _, c, off in frags:
                cg.emit("LSU.ST.SHARED.B64", VMem(c_addr, off), c, guard=keep)
