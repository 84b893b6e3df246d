"""``reduce``: combine a tile along one axis, through warp shuffles and shared memory.

The tile is seen as ``(O, K, I)`` around the axis (``K = shape[axis]``, all powers of
two). Values are first brought to a *compute form* (:func:`prepare`): narrow floats
convert to f32, narrow integers stay in their sign/zero-extended 32-bit registers, and
argmax/argmin become one integer *key* per element that a plain integer max/min
combines (:func:`arg_planes`): the float bits made monotone (``-0`` as ``+0``, every
NaN below every number), high word, and the coordinate along the axis, low word
(descending for argmax), so the first index of the extreme wins and an all-NaN line
gives index 0. 64-bit elements keep the key and the index in two *planes* and combine
with compares and selects. Then one of three paths:

* **shuffle** (``I == 1`` and a thread's ``E`` elements inside one line, ``K >= E``):
  a tree over the thread's own slots (run instructions halving the run),
  ``SHFL.BFLY`` across the ``G = K / E`` threads of a line, for ``G > 32`` a step
  through shared memory across the line's warps, and a move into the output's block
  layout (a shuffle or shared memory) when the line's owners are not the output's.
* **local** (``I == 1``, ``K < E``, cheap enough): a thread holds whole lines and the
  output layout gives it their results: halve each line in registers.
* **shared** (anything else): the tile is staged in shared memory, each thread loads
  the lines of its own output elements, slot ``(k, j)`` = element ``k`` of its output
  ``j``, with an address run (``ALU.IOTA.S32`` pieces) reused chunk after chunk at
  a growing offset, combines chunks elementwise and finishes with a tree over ``k``.

:func:`finish` rounds narrow floats once, wraps narrow integer sums and products and
extracts argmax/argmin indices. Scans (:mod:`.scan`) reuse the staging and the line
addresses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mutile.ir import types as T

from ..context import Codegen, cvt_name, element, is_narrow_float, isa_int, lowers, width
from .elementwise import wrap_int
from .shape import reshaped
from ..values import VP, VR, TileVal, Uniform, VMem, log2, numel
from ...isa.operands import FloatImm, IntImm

ARG_KINDS = ("argmax", "argmin")
CHUNK = 32          # registers of slots a thread loads from shared memory at once
TREE_CAP = 8        # elements of a tree's temporary run over a source it may not overwrite


# ---------------------------------------------------------------- planes and combines
@dataclass(frozen=True)
class Planes:
    """``n`` elements in each of parallel register runs (a value; or a key and an index),
    plane ``p`` taking ``widths[p]`` registers per element."""
    runs: tuple
    widths: tuple
    n: int

    def part(self, start: int, count: int) -> "Planes":
        """Elements ``start .. start+count-1`` of every plane."""
        return Planes(tuple(VR(r.v, r.start + start * w, count * w)
                            for r, w in zip(self.runs, self.widths)), self.widths, count)


def new_planes(cg: Codegen, widths: tuple, n: int) -> Planes:
    """Fresh registers for ``n`` elements of each plane."""
    return Planes(tuple(VR(cg.vreg(n * w, w), 0, n * w) for w in widths), widths, n)


@dataclass(frozen=True)
class Combine:
    """How two compute-form values combine: ``emit(cg, dst, a, b)`` writes
    ``dst = a (+) b`` (``dst`` may alias ``a`` or ``b``)."""
    widths: tuple
    emit: Callable


def simple_mnemonic(kind: str, ct) -> str:
    """The one instruction that combines two values of compute type ``ct``."""
    if ct.is_floating():
        op = {"sum": "ALU.FADD", "prod": "ALU.FMUL", "max": "ALU.FMNMX.MAX",
              "min": "ALU.FMNMX.MIN"}[kind]
        return f"{op}.{'F64' if ct.bits == 64 else 'F32'}"
    wide = width(ct) == 2
    if kind in ("and", "or", "xor"):
        return f"ALU.LOP.{kind.upper()}.{'B64' if wide else 'B32'}"
    if kind in ("sum", "prod"):
        return f"ALU.{'IADD' if kind == 'sum' else 'IMUL'}.{'S64' if wide else 'S32'}"
    return f"ALU.IMNMX.{kind.upper()}.{isa_int(ct)}"


def simple_combine(mn: str, w: int) -> Combine:
    """A one-instruction combine (``mn`` over runs of ``w``-register elements)."""
    return Combine((w,), lambda cg, d, a, b: cg.emit(mn, d.runs[0], a.runs[0], b.runs[0]))


def _pair_combine(kind: str, signed: bool) -> Combine:
    """(64-bit key, i32 index) pairs: take ``b`` if its key is better, or equal with a
    lower index (7 instructions)."""
    cmp, it = ("GT" if kind == "argmax" else "LT"), ("S64" if signed else "U64")

    def emit(cg: Codegen, d: Planes, a: Planes, b: Planes) -> None:
        n = d.n
        p1, p2, p3 = (VP(cg.vreg(n, kind="P"), 0, n) for _ in range(3))
        cg.emit(f"ALU.ISETP.{cmp}.{it}", p1, b.runs[0], a.runs[0])
        cg.emit("ALU.ISETP.EQ.U64", p2, b.runs[0], a.runs[0])
        cg.emit("ALU.ISETP.LT.S32", p3, b.runs[1], a.runs[1])
        cg.emit("ALU.PLOP.AND", p2, p2, p3)
        cg.emit("ALU.PLOP.OR", p1, p1, p2)
        cg.emit("ALU.SEL.B64", d.runs[0], b.runs[0], a.runs[0], p1)
        cg.emit("ALU.SEL.B32", d.runs[1], b.runs[1], a.runs[1], p1)
    return Combine((2, 1), emit)


def tree(cg: Codegen, comb: Combine, src: Planes, k: int, m: int, owned: bool) -> Planes:
    """Combine slots ``(k, j)`` (``k``-major, ``m`` per ``k``) over ``k`` by halving the
    run; the ``m`` results (fresh registers unless ``owned`` lets it work in place)."""
    if k == 1:
        return src.part(0, m)
    h = k // 2
    if not owned and h * m > 2 * TREE_CAP and TREE_CAP >= 2 * m:
        # a long source folds into a TREE_CAP-element run chunk after chunk: a few more
        # instructions than halving, and a temporary of TREE_CAP registers instead of
        # half the source (a softmax's row max beside its scores and accumulator)
        h = TREE_CAP // m
        dst = new_planes(cg, src.widths, h * m)
        comb.emit(cg, dst, src.part(0, h * m), src.part(h * m, h * m))
        for i in range(2 * h, k, h):
            comb.emit(cg, dst, dst, src.part(i * m, h * m))
        return tree(cg, comb, dst, h, m, True)
    dst = src.part(0, h * m) if owned else new_planes(cg, src.widths, h * m)
    comb.emit(cg, dst, src.part(0, h * m), src.part(h * m, h * m))
    while h > 1:
        h //= 2
        comb.emit(cg, dst.part(0, h * m), dst.part(0, h * m), dst.part(h * m, h * m))
    return dst.part(0, m)


# ---------------------------------------------------------------- compute form
def geometry(shape: tuple, axis: int) -> tuple:
    """``(O, K, I)``: elements before, along and after ``axis``."""
    return numel(shape[:axis]), shape[axis], numel(shape[axis + 1:])


def to_compute(cg: Codegen, x: TileVal, t) -> tuple:
    """``(run, type, owned)``: ``x`` as f32 when a narrow float, else as it is."""
    if not is_narrow_float(t):
        return x.run(), t, False
    out = cg.new_tile(x.shape, T.f32)
    cg.emit(f"CVT.F32.{cvt_name(t)}", out.run(), x.run())
    return out.run(), T.f32, True


def axis_index(cg: Codegen, shape: tuple, axis: int, descending: bool) -> VR:
    """i32 run: each element's coordinate ``k`` along ``axis`` in the block layout
    (``K - 1 - k`` when ``descending``)."""
    lay = cg.layout(shape)
    _, K, I = geometry(shape, axis)
    run = VR(cg.vreg(lay.E), 0, lay.E)
    src = cg.tid
    if lay.E > 1:       # first element t*E, then a run of consecutive indices
        cg.emit("ALU.SHL.B32", VR(run.v, 0, 1), cg.tid, IntImm(log2(lay.E)))
        src = VR(run.v, 0, 1)
    if descending:      # ~index: the bits of the coordinate come out as K-1-k
        cg.emit("ALU.LOP.XOR.B32", VR(run.v, 0, 1), src, IntImm(-1))
        src = VR(run.v, 0, 1)
    if lay.E > 1:
        cg.emit("ALU.IOTA.S32", run, src, IntImm(-1 if descending else 1))
        src = run
    if I > 1:
        cg.emit("ALU.SHR.U32", run, src, IntImm(log2(I)))
        src = run
    cg.emit("ALU.LOP.AND.B32", run, src, IntImm(K - 1))
    return run


def _float_key(cg: Codegen, f: VR, n: int, kind: str, wide: bool) -> VR:
    """Integer keys ordered like the floats ``f`` (``-0`` as ``+0``; every NaN one key
    below (argmax) or above (argmin) every number)."""
    b, lo = ("64", 2) if wide else ("32", 1)
    key = VR(cg.vreg(n * lo, lo), 0, n * lo)
    sgn = VR(cg.vreg(n * lo, lo), 0, n * lo)
    nan = VP(cg.vreg(n, kind="P"), 0, n)
    big = (1 << (63 if wide else 31))
    nan_key = -big if kind == "argmax" else big - 1
    if wide:
        zero = cg.materialize_scalar(Uniform(0.0, (), T.f64))
        nan_key = cg.materialize_scalar(Uniform(nan_key, (), T.i64))
    else:
        zero, nan_key = FloatImm.of(0.0), IntImm(nan_key)
    cg.emit(f"ALU.FADD.F{b}", key, f, zero)                 # -0 + 0 = +0
    cg.emit(f"ALU.FSETP.NE.F{b}", nan, key, key)
    cg.emit(f"ALU.SHR.S{b}", sgn, key, IntImm(int(b) - 1))
    cg.emit(f"ALU.SHR.U{b}", sgn, sgn, IntImm(1))
    cg.emit(f"ALU.LOP.XOR.B{b}", key, key, sgn)             # negatives: magnitude flipped
    cg.emit(f"ALU.SEL.B{b}", key, key, nan_key, nan.negated())
    return key


def arg_planes(cg: Codegen, x: TileVal, t, kind: str, axis: int) -> tuple:
    """``(Planes, Combine, owned)`` of argmax/argmin keys for ``x`` in its block layout
    (64-bit integers are their own keys: not ``owned``, the reduction must not write
    them)."""
    E, shape = x.E, x.shape
    run, ct, _ = to_compute(cg, x, t)
    signed = ct.is_floating() or t.is_int_signed()
    key = _float_key(cg, run, E, kind, width(ct) == 2) if ct.is_floating() else run
    mm = "MAX" if kind == "argmax" else "MIN"
    if width(ct) == 2:
        idx = axis_index(cg, shape, axis, False)
        return Planes((key, idx), (2, 1), E), _pair_combine(kind, signed), key is not run
    idx = axis_index(cg, shape, axis, kind == "argmax")
    pair = VR(cg.vreg(2 * E, 2), 0, 2 * E)
    cg.emit("CVT.U64.U32", pair, key)
    cg.emit("ALU.SHL.B64", pair, pair, IntImm(32))
    cg.emit("ALU.IMAD.WIDE.U32", pair, idx, IntImm(1), pair)      # key : index
    mn = f"ALU.IMNMX.{mm}.{'S64' if signed else 'U64'}"
    return Planes((pair,), (2,), E), simple_combine(mn, 2), True


def prepare(cg: Codegen, x: TileVal, t, kind: str, axis: int) -> tuple:
    """``(Planes, Combine, owned)``: ``x`` in compute form in its block layout;
    ``owned``: the planes are fresh registers the reduction may overwrite."""
    if kind in ARG_KINDS:
        return arg_planes(cg, x, t, kind, axis)
    run, ct, owned = to_compute(cg, x, t)
    w = width(ct)
    return Planes((run,), (w,), x.E), simple_combine(simple_mnemonic(kind, ct), w), owned


def _as_tile(cg: Codegen, run: VR, shape: tuple, ty) -> TileVal:
    """A register tile of ``shape`` over ``run`` (moved when it does not start a block)."""
    lay, w = cg.layout(shape), width(ty)
    if run.start == 0:
        return TileVal(run.v, shape, ty, lay.E, w)
    out = cg.new_tile(shape, ty)
    cg.emit("ALU.MOV.B64" if w == 2 else "ALU.MOV.B32", out.run(), run)
    return out


def finish(cg: Codegen, res: Planes, t, kind: str, K: int, shape: tuple) -> TileVal:
    """The result tile of ``shape`` from compute-form results ``res`` (output layout)."""
    if kind in ARG_KINDS:
        if len(res.runs) == 2:
            return _as_tile(cg, res.runs[1], shape, T.i32)
        out = cg.new_tile(shape, T.i32)
        cg.emit("CVT.U32.U64", out.run(), res.runs[0])
        if kind == "argmax":
            cg.emit("ALU.LOP.XOR.B32", out.run(), out.run(), IntImm(K - 1))
        return out
    if is_narrow_float(t):
        out = cg.new_tile(shape, t)
        cg.emit(f"CVT.{cvt_name(t)}.F32", out.run(), res.runs[0])
        return out
    out = _as_tile(cg, res.runs[0], shape, t)
    if kind in ("sum", "prod") and t.is_int() and (t.is_bool() or t.bits < 32):
        wrap_int(cg, out, t)
    return out


# ---------------------------------------------------------------- shared memory
def own_offsets(cg: Codegen, shape: tuple, stride: int) -> VR:
    """i32 run: ``index * stride`` of each element a thread holds in the block layout."""
    lay = cg.layout(shape)
    run = VR(cg.vreg(lay.E), 0, lay.E)
    first = VR(run.v, 0, 1)
    if lay.replicated:
        cg.emit("ALU.LOP.AND.B32", first, cg.tid, IntImm(lay.n - 1))
        cg.emit("ALU.SHL.B32", first, first, IntImm(log2(stride)))
        return run
    cg.emit("ALU.SHL.B32", first, cg.tid, IntImm(log2(lay.E * stride)))
    if lay.E > 1:
        cg.emit("ALU.IOTA.S32", run, first, IntImm(stride))
    return run


def ld_shared(cg: Codegen, dst: VR, w: int, mem: VMem, guard=None) -> None:
    cg.emit("LSU.LD.SHARED.B64" if w == 2 else "LSU.LD.SHARED.B32", dst, mem, guard=guard)


def st_shared(cg: Codegen, mem: VMem, src: VR, w: int, guard=None) -> None:
    cg.emit("LSU.ST.SHARED.B64" if w == 2 else "LSU.ST.SHARED.B32", mem, src, guard=guard)


def stage(cg: Codegen, planes: Planes, shape: tuple) -> tuple:
    """Store every plane of a block-layout tile in shared memory, element ``i`` of plane
    ``p`` at ``bases[p] + i * stride``, between barriers; ``(stride, bases)``."""
    stride = 4 * max(planes.widths)
    n = numel(shape)
    bases = tuple(p * n * stride for p in range(len(planes.runs)))
    cg.reserve_shared(len(bases) * n * stride)
    off = own_offsets(cg, shape, stride)
    owners = cg.owner_pred(shape)
    cg.block_sync()
    for run, w, base in zip(planes.runs, planes.widths, bases):
        st_shared(cg, VMem(off, base), run, w, owners)
    cg.block_sync()
    return stride, bases


def lines_of(cg: Codegen, lines: int) -> tuple:
    """``(M, o0)``: a thread handles lines ``o0 .. o0+M-1`` of ``lines`` in the block
    layout of a tile of that many elements (``o0`` a register)."""
    lay = cg.layout((lines,))
    o0 = VR(cg.vreg(1), 0, 1)
    if lay.replicated:
        cg.emit("ALU.LOP.AND.B32", o0, cg.tid, IntImm(lines - 1))
    else:
        cg.emit("ALU.SHL.B32", o0, cg.tid, IntImm(log2(lay.E)))
    return lay.E, o0


def _pieces(offs: list) -> list:
    """``offs`` split into maximal arithmetic pieces ``(start, count, first, step)``."""
    out, i = [], 0
    while i < len(offs):
        step = offs[i + 1] - offs[i] if i + 1 < len(offs) else 1
        j = i + 1
        while j < len(offs) and offs[j] - offs[j - 1] == step:
            j += 1
        out.append((i, j - i, offs[i], step))
        i = j
    return out


def line_addresses(cg: Codegen, shape: tuple, axis: int, M: int, o0: VR, kc: int,
                   stride: int) -> VR:
    """i32 run of ``kc * M`` shared addresses (times ``stride``, base 0): slot
    ``k * M + j`` is element ``k`` along ``axis`` of line ``o0 + j``; line ``o`` of the
    ``(O, K, I)`` view starts at ``(o // I) * K * I + o % I``. Chunk ``c`` of ``k`` is
    the same run at offset ``c * kc * I * stride``."""
    O, K, I = geometry(shape, axis)
    n = kc * M
    base = VR(cg.vreg(1), 0, 1)
    if I == 1:
        cg.emit("ALU.SHL.B32", base, o0, IntImm(log2(K * stride)))
    else:
        if O > 1:       # o0 // I > 0 only with several outer lines
            cg.emit("ALU.SHR.U32", base, o0, IntImm(log2(I)))
            cg.emit("ALU.IMAD.S32", base, base, IntImm((K - 1) * I), o0)
            o0 = base
        cg.emit("ALU.SHL.B32", base, o0, IntImm(log2(stride)))
    offs = [k * I + (j // I) * K * I + j % I for k in range(kc) for j in range(M)]
    addr = VR(cg.vreg(n), 0, n)
    pieces = _pieces(offs)
    if len(pieces) == 1:
        cg.emit("ALU.IOTA.S32", addr, base, IntImm(pieces[0][3] * stride))
        return addr
    if len(pieces) <= 5:
        for s, cnt, first, step in pieces:
            cg.emit("ALU.IOTA.S32", VR(addr.v, s, cnt), IntImm(first * stride),
                    IntImm(step * stride))
        cg.emit("ALU.IADD.S32", addr, addr, base)
        return addr
    # slot s = k*M + j -> s + k*(I - M) [+ (j // I) * (K - 1) * I when M > I]
    tmp = VR(cg.vreg(n), 0, n)
    cg.emit("ALU.IOTA.S32", addr, IntImm(0), IntImm(1))
    if kc > 1:
        cg.emit("ALU.SHR.U32", tmp, addr, IntImm(log2(M)))
        cg.emit("ALU.IMAD.S32", addr, tmp, IntImm(I - M), addr)
    if M > I:
        cg.emit("ALU.IOTA.S32", tmp, IntImm(0), IntImm(1))
        cg.emit("ALU.SHR.U32", tmp, tmp, IntImm(log2(I)))
        cg.emit("ALU.LOP.AND.B32", tmp, tmp, IntImm(M // I - 1))
        cg.emit("ALU.IMAD.S32", addr, tmp, IntImm((K - 1) * I), addr)
    cg.emit("ALU.IMAD.S32", addr, addr, IntImm(stride), base)
    return addr


def chunk_size(K: int, M: int, widths: tuple) -> int:
    """Elements along the axis loaded at once: a power of two keeping the slots of all
    planes in about ``CHUNK`` registers (at least one element per line)."""
    kc, w = K, sum(widths)
    while kc > 1 and kc * M * w > CHUNK:
        kc //= 2
    return kc


def reduce_shared(cg: Codegen, planes: Planes, comb: Combine, shape: tuple,
                  axis: int) -> Planes:
    """Stage, load each output element's line in chunks, combine; output layout."""
    O, K, I = geometry(shape, axis)
    stride, bases = stage(cg, planes, shape)
    M, o0 = lines_of(cg, O * I)
    kc = chunk_size(K, M, planes.widths)
    addr = line_addresses(cg, shape, axis, M, o0, kc, stride)
    acc = None
    for c in range(K // kc):
        part = new_planes(cg, planes.widths, kc * M)
        for run, w, base in zip(part.runs, part.widths, bases):
            ld_shared(cg, run, w, VMem(addr, base + c * kc * I * stride))
        if acc is None:
            acc = part
        else:
            comb.emit(cg, acc, acc, part)
    return tree(cg, comb, acc, kc, M, owned=True)


# ---------------------------------------------------------------- in registers
LOCAL_MAX = 10      # most instructions a thread-local reduction may take


def local_cost(E: int, K: int) -> int:
    """Instructions :func:`reduce_local` takes for ``E // K`` lines of ``K`` a thread."""
    return E // K * log2(K)


def reduce_local(cg: Codegen, comb: Combine, src: Planes, K: int, owned: bool) -> Planes:
    """Each thread holds ``E / K`` whole lines of the last axis (``K < E``), and the
    output layout gives it exactly their results: halve every line (one instruction
    per line and level), the last level writing the compact result."""
    lines = src.n // K
    out = new_planes(cg, src.widths, lines)
    cur, h = src, K // 2
    while h > 1:
        dst = cur if owned else new_planes(cg, src.widths, src.n)
        for q in range(lines):
            comb.emit(cg, dst.part(q * K, h), cur.part(q * K, h), cur.part(q * K + h, h))
        cur, owned, h = dst, True, h // 2
    for q in range(lines):
        comb.emit(cg, out.part(q, 1), cur.part(q * K, 1), cur.part(q * K + 1, 1))
    return out


# ---------------------------------------------------------------- shuffles
def reduce_shuffle(cg: Codegen, planes: Planes, comb: Combine, shape: tuple,
                   owned: bool) -> Planes:
    """Reduce along the last axis (``K >= E``): own slots, butterflies, warps; output
    layout."""
    lay = cg.layout(shape)
    E, K = lay.E, shape[-1]
    P = min(lay.n, cg.threads)                # threads holding distinct elements
    G = K // E                                # threads per line
    acc = tree(cg, comb, planes, E, 1, owned)
    owned = owned or E > 1
    s = 1
    while s < min(G, 32):
        tmp = new_planes(cg, acc.widths, 1)
        for d, a in zip(tmp.runs, acc.runs):
            cg.emit("SHFL.BFLY.B32", d, a, IntImm(s))
        dst = acc if owned else new_planes(cg, acc.widths, 1)
        comb.emit(cg, dst, acc, tmp)
        acc, owned, s = dst, True, s * 2
    if G > 32:
        acc = _across_warps(cg, comb, acc, G // 32)
    n_out = P // G
    if G == 1 or n_out == 1:
        return acc
    return _to_output(cg, acc, G, n_out, P)


def _own_slot(cg: Codegen, stride: int) -> VR:
    a = VR(cg.vreg(1), 0, 1)
    cg.emit("ALU.SHL.B32", a, cg.tid, IntImm(log2(stride)))
    return a


def _stage_own(cg: Codegen, acc: Planes) -> tuple:
    """Every thread stores its one element (per plane) at ``tid * stride``."""
    stride = 4 * max(acc.widths)
    bases = tuple(p * cg.threads * stride for p in range(len(acc.runs)))
    cg.reserve_shared(len(bases) * cg.threads * stride)
    a = _own_slot(cg, stride)
    cg.block_sync()
    for run, w, base in zip(acc.runs, acc.widths, bases):
        st_shared(cg, VMem(a, base), run, w)
    cg.block_sync()
    return a, stride, bases


def _across_warps(cg: Codegen, comb: Combine, acc: Planes, W: int) -> Planes:
    """Combine the warp results of lines spanning ``W`` warps (same lane, through shared
    memory)."""
    a, stride, bases = _stage_own(cg, acc)
    first = VR(cg.vreg(1), 0, 1)
    cg.emit("ALU.LOP.AND.B32", first, a, IntImm(~((W - 1) * 32 * stride)))
    addr = VR(cg.vreg(W), 0, W)
    cg.emit("ALU.IOTA.S32", addr, first, IntImm(32 * stride))
    part = new_planes(cg, acc.widths, W)
    for run, w, base in zip(part.runs, part.widths, bases):
        ld_shared(cg, run, w, VMem(addr, base))
    return tree(cg, comb, part, W, 1, owned=True)


def _to_output(cg: Codegen, acc: Planes, G: int, n_out: int, P: int) -> Planes:
    """Thread ``t`` holds line ``(t % P) // G``; the output layout wants line
    ``t % n_out``, held by thread ``(t % n_out) * G``."""
    src = VR(cg.vreg(1), 0, 1)
    cg.emit("ALU.LOP.AND.B32", src, cg.tid, IntImm(n_out - 1))
    out = new_planes(cg, acc.widths, 1)
    if P <= 32:       # every warp holds all lines: one shuffle
        cg.emit("ALU.SHL.B32", src, src, IntImm(log2(G)))
        for d, a in zip(out.runs, acc.runs):
            cg.emit("SHFL.IDX.B32", d, a, src)
        return out
    _, stride, bases = _stage_own(cg, acc)
    cg.emit("ALU.SHL.B32", src, src, IntImm(log2(G * stride)))
    for run, w, base in zip(out.runs, out.widths, bases):
        ld_shared(cg, run, w, VMem(src, base))
    return out


# ---------------------------------------------------------------- the op
@lowers("reduce")
def lower_reduce(cg: Codegen, op) -> None:
    """``reduce`` along ``axis`` with ``kind`` (see the module docstring)."""
    x = cg.get(op.operands[0])
    shape = tuple(op.operands[0].type.shape)
    t = element(op.operands[0].type)
    axis, kind = op.attrs["axis"], op.attrs["kind"]
    rt = op.results[0].type
    out_shape = tuple(rt.shape) if rt.is_tile() else ()
    if isinstance(x, Uniform) and kind in ("max", "min", "and", "or") or shape[axis] == 1:
        if kind in ARG_KINDS:
            cg.bind(op.results[0], Uniform(IntImm(0), out_shape, T.i32))
        else:
            cg.bind(op.results[0], reshaped(x, out_shape))
        return
    if isinstance(x, Uniform) and kind in ARG_KINDS:
        cg.bind(op.results[0], Uniform(IntImm(0), out_shape, T.i32))
        return
    x = cg.materialize(x)
    # size-1 dims move nothing: drop them (the row-major order stays), so the paths
    # below see the reduced axis as last when only unit dims follow it
    axis -= sum(1 for d in shape[:axis] if d == 1)
    shape = tuple(d for d in shape if d != 1)
    x = reshaped(x, shape)
    planes, comb, owned = prepare(cg, x, t, kind, axis)
    O, K, I = geometry(shape, axis)
    if I == 1 and K >= x.E:
        res = reduce_shuffle(cg, planes, comb, shape, owned)
    elif I == 1 and local_cost(x.E, K) <= LOCAL_MAX:
        res = reduce_local(cg, comb, planes, K, owned)
    else:
        res = reduce_shared(cg, planes, comb, shape, axis)
    out = finish(cg, res, t, kind, K, out_shape)
    cg.bind(op.results[0], cg.as_uniform(out) if numel(out_shape) == 1 else out)
