"""Codegen of ``ph.sqmma`` and ``ph.sqmma_wait``: WarpSquad MMA on shared operands.

The accumulator's rows split over the executing code's WarpSquads (the block layout
already gives squad ``s`` rows ``s * M / squads ..``); each squad's ``ms x N`` tile is
covered by instructions of one (M, N) of the machine file's set
(:func:`~mutile.ir.ops_pinghu.sqmma_tiling`: the fewest instructions), and K by
instructions of the largest K span that divides it. Operands are named by 32-bit shared
descriptors (:mod:`...isa.tensor_memory`): an instruction's sub-tile moves A's descriptor
by its rows and B's by its columns.

**One instruction per squad and k step** (the squad's tile is an instruction shape): D
is the accumulator's own registers, in the block layout. **Several** (e.g. 128x16 as two
64x16): an instruction's D is squad thread ``i``'s elements ``[i*E', (i+1)*E')`` of its
row-major sub-tile, which is not the block layout of the whole tile, so the accumulator
lives in a register tile of the instructions' order while in flight: gathered into it
through shared memory at the issue (when accumulating), and back into the block layout
after the ``SQMMA.WAIT`` (every wait converts the split accumulators then in flight, into
registers fixed at the issue, so every path that waits leaves the same registers).
The result of ``ph.sqmma`` is in flight until ``ph.sqmma_wait``: codegen refuses any
other use of it before.
"""
from __future__ import annotations

from dataclasses import dataclass

from mutile.ir import types as T
from mutile.ir.ops_pinghu import SQUAD_THREADS as SQUAD
from mutile.ir.ops_pinghu import (sqmma_instr_shapes, sqmma_k_choices, sqmma_shapes,
                                  sqmma_shapes_text, sqmma_tiling)

from ..context import Codegen, lowers
from ..values import VR, TileVal, Uniform, VMem, log2
from ...isa.operands import IntImm
from ...isa.tensor_memory import pack_smem_desc
from .asynchronous import SmemVal

SQMMA_TYPE = {"bf16": "BF16", "f16": "F16", "f32": "TF32", "i8": "S8", "u8": "U8",
              "f8e4m3": "E4M3", "f8e5m2": "E5M2"}
ACC_TYPE = {"f32": "F32", "i32": "S32", "u32": "U32"}


@dataclass
class Tiling:
    """The instructions of one squad's ``ms x n`` tile: ``mi x ni`` each, ``P`` of them
    (sub-tile ``p`` = (p // (n / ni), p % (n / ni))), ``E`` D registers each."""
    squads: int
    ms: int
    n: int
    mi: int
    ni: int

    @property
    def P(self) -> int:
        return (self.ms // self.mi) * (self.n // self.ni)

    @property
    def E(self) -> int:
        return self.mi * self.ni // SQUAD

    def bits(self, order: str) -> list:
        """Labels of the bits of a flat element index, lowest first: ``"block"`` for the
        row-major (M, N) tile, ``"instr"`` for the instructions' order (squad, squad
        thread, sub-tile, element). ``q`` is the element index within a sub-tile."""
        q = [("q", j) for j in range(log2(self.mi * self.ni))]
        pn, pm, s = (_field(name, count) for name, count in (
            ("pn", self.n // self.ni), ("pm", self.ms // self.mi), ("s", self.squads)))
        if order == "block":            # row = (s, pm, r), col = (pn, c); q = (r, c)
            c = log2(self.ni)
            return q[:c] + pn + q[c:] + pm + s
        e = log2(self.E)                # q = (squad thread, element of its D group)
        return q[:e] + pn + pm + q[e:] + s


def _field(name: str, count: int) -> list:
    return [(name, j) for j in range(log2(count))]


@dataclass(eq=False)
class SplitAcc:
    """An in-flight accumulator of several instructions per squad: ``tmp`` in the
    instructions' order, ``out`` the block-layout registers it returns to at the wait."""
    tmp: TileVal
    out: TileVal
    tiling: Tiling


def tiling(cg: Codegen, el, M: int, N: int, ta: bool, tb: bool) -> Tiling:
    """The squads' split of an M x N accumulator of ``el`` operands (refused when no
    instruction shape tiles a squad's part)."""
    squads = cg.threads // SQUAD
    shapes = sqmma_instr_shapes(el, ta, tb)
    ms = M // squads
    best = sqmma_tiling(ms, N, shapes) if M % squads == 0 else None
    if best is None:
        cg.fail(f"no SQMMA instructions tile the accumulator's part of one WarpSquad: "
                f"{M} rows over {squads} squad(s) give {M / squads:g}x{N}; one instruction "
                f"is M x N (M per WarpSquad) {sqmma_shapes_text(shapes)}")
    return Tiling(squads, ms, N, *best)


def _permute_index(cg: Codegen, idx: TileVal, dst_bits: list, src_bits: list) -> TileVal:
    """i32 tile: for each element index of ``idx`` (bits labelled ``dst_bits``) the index
    whose bits ``src_bits`` carry the same labels (runs of bits move by one shift)."""
    where = {lab: i for i, lab in enumerate(src_bits)}
    runs = []                                   # (first dst bit, first src bit, length)
    for d, lab in enumerate(dst_bits):
        s = where[lab]
        if runs and runs[-1][0] + runs[-1][2] == d and runs[-1][1] + runs[-1][2] == s:
            runs[-1][2] += 1
        else:
            runs.append([d, s, 1])
    out = cg.new_tile(idx.shape, T.i32)
    t = cg.new_tile(idx.shape, T.i32)
    for i, (d, s, n) in enumerate(runs):
        dst = out if i == 0 else t
        cg.emit("ALU.SHR.U32", dst.run(), idx.run(), IntImm(d))
        cg.emit("ALU.LOP.AND.B32", dst.run(), dst.run(), IntImm((1 << n) - 1))
        if s:
            cg.emit("ALU.SHL.B32", dst.run(), dst.run(), IntImm(s))
        if i:
            cg.emit("ALU.LOP.OR.B32", out.run(), out.run(), t.run())
    return out


def _move(cg: Codegen, src: TileVal, dst: TileVal, til: Tiling, dst_order: str) -> None:
    """Write into ``dst``'s registers the elements of ``src`` in the other order, through
    shared memory."""
    src_order = "block" if dst_order == "instr" else "instr"
    stride = cg.to_shared(src)
    idx = cg.index_run(dst.shape)
    at = _permute_index(cg, idx, til.bits(dst_order), til.bits(src_order))
    cg.emit("ALU.SHL.B32", at.run(), at.run(), IntImm(log2(stride)))
    cg.emit("LSU.LD.SHARED.B32", dst.run(), VMem(at.run()))


def _operand_desc(cg: Codegen, s: SmemVal, offset: int, squad_off: int,
                  squad: VR | None) -> VR:
    """Register holding the SQMMA descriptor of buffer ``s`` from its logical byte
    ``offset`` (+ ``squad_off`` bytes per squad index)."""
    ty = s.ty
    stride = ty.shape[-1] * ty.element.itemsize
    word = pack_smem_desc(0, stride, ty.swizzle) + (offset >> 4)
    o = VR(cg.vreg(1), 0, 1)
    c = cg.const_int(s.addr)
    if c is not None:
        cg.emit("ALU.MOV.IMM", o, IntImm(word + (c >> 4)))
    else:
        cg.emit("ALU.SHR.U32", o, s.addr.src, IntImm(4))
        cg.emit("ALU.IADD.S32", o, o, IntImm(word))
    if squad is not None and squad_off:
        cg.emit("ALU.IMAD.S32", o, squad, IntImm(squad_off >> 4), o)
    return o


def _accumulator(cg: Codegen, op, til: Tiling, M: int, N: int):
    """(registers the instructions accumulate into, the value the result binds to)."""
    acc_ir, accumulate = op.operands[2], op.attrs["accumulate"]
    acc = cg.get(acc_ir)
    el = op.results[0].type.element
    if acc_ir in cg.inflight:                       # chained: accumulate in place
        split = acc.tiling if isinstance(acc, SplitAcc) else None
        if split != (til if til.P > 1 else None):
            cg.fail(f"this SQMMA covers its accumulator with {til.mi}x{til.ni} instructions, "
                    f"the one in flight on it with other shapes: their registers are laid "
                    f"out differently (acc = ph.sqmma_wait(acc) between them)")
        return (acc.tmp if split else acc), acc
    if til.P == 1:
        if accumulate and isinstance(acc, TileVal) and acc.recipe is None \
                and _uses(cg, acc_ir) == 1:
            return acc, acc                         # acc dies here: accumulate in place
        out = cg.new_tile((M, N), el)
        if accumulate:
            cg.emit("ALU.MOV.B32", out.run(), cg.operand(acc, False) if isinstance(acc, TileVal)
                    else cg.materialize(Uniform(acc.src, (M, N), acc.ty)).run())
        return out, out
    tmp = cg.new_tile((M * N,), el)
    if accumulate and isinstance(acc, TileVal):
        _move(cg, acc, tmp, til, "instr")
    elif accumulate:
        cg.emit("ALU.MOV.B32", tmp.run(), cg.materialize_scalar(acc))
    return tmp, SplitAcc(tmp, cg.new_tile((M, N), el), til)


@lowers("ph.sqmma")
def lower_sqmma(cg: Codegen, op) -> None:
    a, b = cg.get(op.operands[0]), cg.get(op.operands[1])
    ta, tb = op.attrs.get("trans_a", False), op.attrs.get("trans_b", False)
    M, N, K = sqmma_shapes(a.ty, b.ty, ta, tb)
    if cg.threads % SQUAD:
        cg.fail(f"SQMMA is issued by WarpSquads of 4 warps; this code runs on "
                f"{cg.threads // 32} warp(s) (use num_warps = 4, 8, ...)")
    if cg.partition is not None and cg.partition[2] % 4:
        cg.fail(f"SQMMA is issued by whole WarpSquads (warps 4s .. 4s+3); this partition "
                f"starts at warp {cg.partition[2]} (put SQMMA partitions first, or make the "
                f"partitions before them a multiple of 4 warps)")
    el = a.ty.element
    til = tiling(cg, el, M, N, ta, tb)
    kstep = max(k for k in sqmma_k_choices(el) if K % k == 0)
    regs, result = _accumulator(cg, op, til, M, N)
    squad = None
    if til.squads > 1:
        squad = VR(cg.vreg(1), 0, 1)
        cg.emit("ALU.SHR.U32", squad, cg.tid, IntImm(log2(SQUAD)))
    sa, sb = el.itemsize, b.ty.element.itemsize
    a_pitch, b_pitch = a.ty.shape[-1] * sa, b.ty.shape[-1] * sb
    a_row = sa if ta else a_pitch                   # bytes between A's rows m, m + 1
    b_col = b_pitch if tb else sb                   # ... B's columns n, n + 1
    mn = (f"SQMMA.M{til.mi}N{til.ni}K{kstep}.{ACC_TYPE[op.results[0].type.element.name]}."
          f"{SQMMA_TYPE[el.name]}.{SQMMA_TYPE[b.ty.element.name]}")
    trans = (1 if ta else 0) | (2 if tb else 0)
    neg = (1 if op.attrs.get("neg_a") else 0) | (2 if op.attrs.get("neg_b") else 0)
    per_row = til.n // til.ni
    for j in range(K // kstep):
        k0 = j * kstep
        scale = 1 if (j or op.attrs["accumulate"]) else 0
        for p in range(til.P):
            pm, pn = divmod(p, per_row)
            a_off = (k0 * a_pitch if ta else k0 * sa) + pm * til.mi * a_row
            b_off = (k0 * sb if tb else k0 * b_pitch) + pn * til.ni * b_col
            ra = _operand_desc(cg, a, a_off, til.ms * a_row, squad)
            rb = _operand_desc(cg, b, b_off, 0, None)
            cg.emit(mn, regs.run(p * til.E, til.E), ra, rb, IntImm(scale), IntImm(trans),
                    IntImm(neg))
    cg.inflight.add(op.results[0])
    cg.bind(op.results[0], result)
    if isinstance(result, SplitAcc):
        cg.__dict__.setdefault("_splits", []).append((op.results[0], result))


def _uses(cg: Codegen, v) -> int:
    """How many operands of the kernel read IR value ``v``."""
    counts = cg.__dict__.get("_use_counts")
    if counts is None:
        counts = cg.__dict__["_use_counts"] = {}
        for op in cg.func.walk():
            for x in op.operands:
                counts[x] = counts.get(x, 0) + 1
    return counts.get(v, 0)


@lowers("ph.sqmma_wait")
def lower_sqmma_wait(cg: Codegen, op) -> None:
    """``SQMMA.WAIT``; then every split accumulator in flight returns to its block-layout
    registers (once per accumulator, chained results share one)."""
    cg.emit("SQMMA.WAIT")
    moved = set()
    for v, s in cg.__dict__.get("_splits", []):         # in issue order
        if v in cg.inflight:
            if id(s.tmp) not in moved:
                moved.add(id(s.tmp))
                _move(cg, s.tmp, s.out, s.tiling, "block")
            cg.bind(v, s.out)
    cg.inflight.clear()
    for r, v in zip(op.results, op.operands):
        cg.bind(r, cg.get(v))


def check_inflight(cg: Codegen, op) -> None:
    """Refuse a use of an SQMMA result before ``ph.sqmma_wait``."""
    if not cg.inflight or op.name in ("ph.sqmma", "ph.sqmma_wait"):
        return
    for v in op.operands:
        if v in cg.inflight:
            cg.fail("this uses the result of ph.sqmma before ph.sqmma_wait: the accumulator "
                    "is written asynchronously (acc = ph.sqmma_wait(acc) first)")


__all__ = ["ACC_TYPE", "SQMMA_TYPE", "SplitAcc", "Tiling", "check_inflight", "tiling"]
