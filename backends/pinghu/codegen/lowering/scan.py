"""``scan``: inclusive prefix combine along one axis, in order.

The tile goes to shared memory in compute form (narrow floats as f32). Then:

* **lines** (:func:`scan_lines`): each thread owns whole lines (the lines of its
  elements in the block layout of the ``O * I`` lines, as :mod:`.reduce` loads
  them) and loads them in chunks of ``kc`` elements along the axis, slot ``(k, j)`` =
  element ``k`` of line ``j``. Floats run the recurrence ``acc_k = acc_{k-1} (+) x_k``
  as one run instruction per ``k`` over the thread's lines, carried from chunk to
  chunk, so results equal a sequential loop bit for bit; integers, exact in any order,
  take ``log2(kc)`` Hillis-Steele steps per chunk.
* **split** (:func:`scan_split`, integers along the last axis, or along any axis after
  which every size is 1, e.g. axis 0 of a ``(BM, 1)`` tile): ``P`` lanes share a
  line, each scanning a piece in registers, then the piece totals across the lanes.

Results go to a second shared area (only the lines' owners store), and every thread
loads its elements back in the block layout; narrow floats round once per element.
"""
from __future__ import annotations

from ..context import Codegen, element, is_narrow_float, lowers, width
from .elementwise import from_f32, wrap_int
from .reduce import (Planes, chunk_size, geometry, ld_shared, line_addresses, lines_of,
    new_planes, own_offsets, simple_combine, simple_mnemonic, st_shared, stage, to_compute)
from ..values import VP, VR, TileVal, VMem, numel
from ...isa.operands import IntImm


def scan_lines(cg: Codegen, planes: Planes, comb, shape: tuple, axis: int,
               exact: bool) -> tuple:
    """Scan the staged lines; ``(stride, base)`` of the results in shared memory (in
    the tile's row-major order). ``exact``: the combine is associative bit for bit
    (integers), so a chunk scans in ``log2(kc)`` steps (Hillis-Steele over the run)
    instead of ``kc - 1``."""
    O, K, I = geometry(shape, axis)
    w = planes.widths[0]
    stride, (src,) = stage(cg, planes, shape)
    dst = numel(shape) * stride
    cg.reserve_shared(2 * dst)
    M, o0 = lines_of(cg, O * I)
    owners = cg.owner_pred((O * I,))
    kc = chunk_size(K, M, (w,))
    addr = line_addresses(cg, shape, axis, M, o0, kc, stride)
    carry = None
    for c in range(K // kc):
        v = new_planes(cg, (w,), kc * M)
        ld_shared(cg, v.runs[0], w, VMem(addr, src + c * kc * I * stride))
        if carry is not None:
            comb.emit(cg, v.part(0, M), carry, v.part(0, M))
        if exact:
            d = 1
            while d < kc:
                n = (kc - d) * M
                comb.emit(cg, v.part(d * M, n), v.part(0, n), v.part(d * M, n))
                d *= 2
        else:
            for k in range(1, kc):
                comb.emit(cg, v.part(k * M, M), v.part((k - 1) * M, M), v.part(k * M, M))
        carry = v.part((kc - 1) * M, M)
        st_shared(cg, VMem(addr, dst + c * kc * I * stride), v.runs[0], w, owners)
    cg.block_sync()
    return stride, dst


SPLIT_REGS = 64     # most registers of one piece a thread scans in the split path


def split_pieces(cg: Codegen, shape: tuple, axis: int, w: int) -> int:
    """Threads ``P`` sharing one line in :func:`scan_split` (0: do not split): lines
    contiguous in memory (nothing after ``axis`` but sizes 1), ``P`` aligned lanes of a
    warp, a piece in registers."""
    O, K, I = geometry(shape, axis)
    P = min(K, 32, max(1, cg.threads // O))
    if I > 1 or P < 4 or K // P * w > SPLIT_REGS:
        return 0
    return P


def scan_split(cg: Codegen, planes: Planes, mn: str, shape: tuple, axis: int,
               P: int) -> tuple:
    """Integer scan along ``axis`` (contiguous lines, see :func:`split_pieces`), each
    line cut in ``P`` pieces held by ``P`` consecutive lanes: a Hillis-Steele scan of
    each piece over its run, of the piece totals across the lanes (``SHFL.UP``, guarded
    by the lane's piece index), then the exclusive prefix added to the piece.
    ``(stride, base)`` as :func:`scan_lines`."""
    L, K, _ = geometry(shape, axis)
    kp, w = K // P, planes.widths[0]
    stride, (src,) = stage(cg, planes, shape)
    dst = numel(shape) * stride
    cg.reserve_shared(2 * dst)
    _, o0 = lines_of(cg, L * P)
    addr = line_addresses(cg, (L * P, kp), 1, 1, o0, kp, stride)
    v = VR(cg.vreg(kp * w, w), 0, kp * w)
    ld_shared(cg, v, w, VMem(addr, src))
    d = 1
    while d < kp:
        n = (kp - d) * w
        cg.emit(mn, VR(v.v, d * w, n), VR(v.v, 0, n), VR(v.v, d * w, n))
        d *= 2
    piece = o0                          # one line: the lane's piece is its line
    if L > 1:
        piece = VR(cg.vreg(1), 0, 1)
        cg.emit("ALU.LOP.AND.B32", piece, cg.tid, IntImm(P - 1))
    total = VR(v.v, (kp - 1) * w, w)
    acc = VR(cg.vreg(w, w), 0, w)
    tmp = VR(cg.vreg(w, w), 0, w)
    cg.emit("ALU.MOV.B64" if w == 2 else "ALU.MOV.B32", acc, total)
    d = 1
    while d < P:                        # inclusive scan of the piece totals
        cg.emit("SHFL.UP.B32", tmp, acc, IntImm(d))
        p = VP(cg.vreg(1, kind="P"), 0, 1)
        cg.emit("ALU.ISETP.GE.U32", p, piece, IntImm(d))
        cg.emit(mn, acc, tmp, acc, guard=p)
        d *= 2
    cg.emit("SHFL.UP.B32", tmp, acc, IntImm(1))     # the pieces before this one
    first = VP(cg.vreg(1, kind="P"), 0, 1)
    cg.emit("ALU.ISETP.NE.U32", first, piece, IntImm(0))
    cg.emit(mn, v, tmp, v, guard=first)
    st_shared(cg, VMem(addr, dst), v, w, cg.owner_pred((L * P,)))
    cg.block_sync()
    return stride, dst


@lowers("scan")
def lower_scan(cg: Codegen, op) -> None:
    """Inclusive ``scan`` along ``axis`` with ``kind`` (sum, prod, max, min)."""
    x = cg.get(op.operands[0])
    shape = tuple(op.operands[0].type.shape)
    t = element(op.operands[0].type)
    axis, kind = op.attrs["axis"], op.attrs["kind"]
    if shape[axis] == 1:
        cg.bind(op.results[0], x)
        return
    x = cg.materialize(x)
    run, ct, _ = to_compute(cg, x, t)
    w = width(ct)
    planes = Planes((run,), (w,), x.E)
    mn = simple_mnemonic(kind, ct)
    comb = simple_combine(mn, w)
    P = 0 if ct.is_floating() else split_pieces(cg, shape, axis, w)
    if P:
        stride, base = scan_split(cg, planes, mn, shape, axis, P)
    else:
        stride, base = scan_lines(cg, planes, comb, shape, axis, exact=not ct.is_floating())
    res = cg.new_tile(shape, ct)
    ld_shared(cg, res.run(), w, VMem(own_offsets(cg, shape, stride), base))
    if is_narrow_float(t):
        from_f32(cg, res, t)
        res = TileVal(res.vreg, shape, t, res.E, res.w)
    elif t.is_int() and (t.is_bool() or t.bits < 32) and kind in ("sum", "prod"):
        wrap_int(cg, res, t)
    cg.bind(op.results[0], res)
