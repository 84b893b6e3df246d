"""Helpers of the asynchronous-engine tests: listing fragments that build TME descriptors
and SQMMA descriptors in registers and move shared memory to and from global arrays;
whole listings (a TME load, SQMMAs on operands placed in shared memory, a pipelined
warp-specialized GEMM); numpy references of a TME box, a stored SQMMA operand and the
k-ordered f32 product.

A listing fragment is a list of instruction lines (indented by 8 spaces); ``lines(...)``
joins them. Python locations for fault messages come from ``// t.py:LINE text`` comment
lines (``loc(line, text)``).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from mutile.backends.pinghu.isa.tensor_memory import (ELEMENTS, desc_info, desc_words,
    operand_addresses, pack_box, pack_smem_desc, swizzle_address)

IND = " " * 8
SIZE = dict(ELEMENTS)


def lines(*parts) -> str:
    """Join fragments (strings or lists of lines) into listing text."""
    out = []
    for p in parts:
        out += [p] if isinstance(p, str) else list(p)
    return "\n".join(x if x.endswith(":") or x.startswith(IND) or x.startswith(".") or not x
                     else IND + x for x in out) + "\n"


def loc(line: int, text: str) -> str:
    """A ``// t.py:LINE text`` comment: the Python line of the instructions after it."""
    return f"// t.py:{line}  {text}"


def head(params, threads: int, shared: int, name: str = "t", regs: int = 250) -> list[str]:
    """Directives; ``params`` are (name, type) pairs at offsets 8 bytes apart."""
    out = [f".kernel {name}"]
    out += [f".param {n} {t} c[0x{8 * i:x}]" for i, (n, t) in enumerate(params)]
    return out + [f".threads {threads}", f".regs {regs}", f".shared {shared}", ".local 0", ""]


def movs(r0: int, values) -> list[str]:
    """``ALU.MOV.IMM`` of ``values`` into R[r0], R[r0+1], ..."""
    return [f"ALU.MOV.IMM R{r0 + i}, {int(v) & 0xFFFFFFFF}" for i, v in enumerate(values)]


def tme_desc(r0: int, param: int, element: str, dims, strides, fill_nan=False) -> list[str]:
    """A TME descriptor in R[r0 : r0 + 3 + 2 * rank] (r0 even) whose base is pointer
    parameter number ``param``; ``dims`` in elements, ``strides`` in bytes (outermost
    first)."""
    rank = len(dims)
    return [f"ALU.MOV.B64 R{r0}, c[0x{8 * param:x}]"] + \
        movs(r0 + 2, [desc_info(element, rank, fill_nan), *dims, *strides])


def box_word(box, swizzle: int) -> str:
    return f"0x{pack_box(box, swizzle):x}"


def per_block_regs(r0: int, param: int, count: int, tmp: int = 230) -> list[str]:
    """R[r0 : r0 + count] = row ``SR_CTAID.X`` of int32 table parameter ``param``
    (blocks, count) (uses R[tmp : tmp + 3 * count + 4])."""
    idx, adr = tmp + 2, (tmp + 3 + count) // 2 * 2
    return [f"S2R R{tmp}, SR_CTAID.X",
            f"ALU.IMUL.S32 R{tmp}, R{tmp}, {count}",
            f"ALU.IOTA.S32 R[{idx}:{idx + count}], R{tmp}, 1",
            f"ALU.IMAD.WIDE.S32 R[{adr}:{adr + 2 * count}], R[{idx}:{idx + count}], 4, "
            f"c[0x{8 * param:x}]",
            f"LSU.LD.GLOBAL.B32 R[{r0}:{r0 + count}], [R[{adr}:{adr + 2 * count}]]"]


def _words_per_thread(nbytes: int, threads: int) -> int:
    assert nbytes % (4 * threads) == 0, (nbytes, threads)
    return nbytes // (4 * threads)


def shared_io(op: str, nbytes: int, threads: int, param: int) -> list[str]:
    """Copy the block's first ``nbytes`` of shared memory to (op "dump") or from (op
    "fill") row ``SR_CTAID.X`` of uint8 parameter ``param`` (blocks, nbytes); thread t
    moves words t*K .. t*K+K-1 (uses R[160:248])."""
    out = ["S2R R160, SR_TID.X", "S2R R161, SR_CTAID.X"]
    k = _words_per_thread(nbytes, threads)
    for c0 in range(0, k, 16):
        n = min(16, k - c0)
        out += [f"ALU.IMUL.S32 R162, R160, {4 * k}",
                f"ALU.IADD.S32 R162, R162, {4 * c0}",
                f"ALU.IOTA.S32 R[164:{164 + n}], R162, 4",
                f"ALU.IMAD.S32 R163, R161, {nbytes}, R162",
                f"ALU.IOTA.S32 R[180:{180 + n}], R163, 4",
                f"ALU.IMAD.WIDE.S32 R[196:{196 + 2 * n}], R[180:{180 + n}], 1, c[0x{8 * param:x}]"]
        if op == "dump":
            out += [f"LSU.LD.SHARED.B32 R[232:{232 + n}], [R[164:{164 + n}]]",
                    f"LSU.ST.GLOBAL.B32 [R[196:{196 + 2 * n}]], R[232:{232 + n}]"]
        else:
            out += [f"LSU.LD.GLOBAL.B32 R[232:{232 + n}], [R[196:{196 + 2 * n}]]",
                    f"LSU.ST.SHARED.B32 [R[164:{164 + n}]], R[232:{232 + n}]"]
    return out


# ---------------------------------------------------------------- numpy references
def box_ref(tensor: np.ndarray, coords, box, fill) -> np.ndarray:
    """The box of ``tensor`` at ``coords`` (out-of-range elements = ``fill``), as the
    raw bits (uint of the element size)."""
    u = np.dtype(f"u{tensor.dtype.itemsize}")
    bits = tensor.view(u)
    idx = np.indices(box).reshape(len(box), -1).T + np.asarray(coords)
    inside = ((idx >= 0) & (idx < np.asarray(tensor.shape))).all(axis=1)
    out = np.full(len(idx), fill, u)
    out[inside] = bits[tuple(idx[inside].T)]
    return out.reshape(box)


def unswizzle(image: np.ndarray, start: int, nelems: int, size: int, swizzle: int):
    """Elements 0 .. nelems-1 (bits, uint<size>) of a box written at ``start`` of a
    shared-memory image (uint8) with ``swizzle``."""
    phys = swizzle_address(start + np.arange(nelems) * size, swizzle)
    raw = image[(phys[:, None] + np.arange(size)).ravel()]
    return raw.view(np.dtype(f"u{size}"))


def place(image: np.ndarray, stored: np.ndarray, start: int, stride: int, swizzle: int):
    """Write matrix ``stored`` (rows, cols) into a shared-memory image (uint8) with rows
    ``stride`` bytes apart, swizzled."""
    size = stored.dtype.itemsize
    phys = operand_addresses(start, stride, *stored.shape, size, swizzle)
    raw = np.ascontiguousarray(stored).view(np.uint8).reshape(stored.shape + (size,))
    image[(phys[..., None] + np.arange(size)).reshape(-1)] = raw.reshape(-1)


# ---------------------------------------------------------------- a pipelined GEMM
def gemm_listing(M: int, N: int, K: int, BM: int = 64, BN: int = 64, BK: int = 64,
                 swizzle: int = 64) -> str:
    """C (M x N f32) = A (M x K bf16) @ B (K x N bf16), warp-specialized: warps 0-3 (a
    WarpSquad) consume, warp 4 produces. Two stages; AsyncBarriers 0/1 are the stages'
    "full" barriers (one producer arrival plus the TME bytes), 2/3 their "empty" ones
    (four consumer arrivals). Grid (M / BM, N / BN); parameters A, B, C."""
    from mutile.backends.pinghu.isa.tensor_memory import pack_smem_desc
    E, KT = BM * BN // 128, K // BK
    a_bytes, b_bytes = BM * BK * 2, BK * BN * 2
    stage = a_bytes + b_bytes
    desc_a = pack_smem_desc(0, BK * 2, swizzle)
    desc_b = pack_smem_desc(a_bytes, BN * 2, swizzle)
    assert E <= BN and BN & (BN - 1) == 0
    return lines(head([("A", "ptr"), ("B", "ptr"), ("C", "ptr")], 160, 2 * stage, "gemm"), [
        "S2R R0, SR_TID.X", "S2R R1, SR_WARPID", "S2R R2, SR_LANEID",
        "S2R R3, SR_CTAID.X", f"ALU.IMUL.S32 R4, R3, {BM}",
        "S2R R3, SR_CTAID.Y", f"ALU.IMUL.S32 R5, R3, {BN}",
        loc(10, "full, empty = barriers(2, 1), barriers(2, 4)"),
        "ALU.ISETP.EQ.S32 P0, R0, 0",
        "@P0 ASYNC.BAR.INIT 0, 1", "@P0 ASYNC.BAR.INIT 1, 1",
        "@P0 ASYNC.BAR.INIT 2, 4", "@P0 ASYNC.BAR.INIT 3, 4",
        "BAR.SYNC 0",
        "ALU.MOV.IMM R30, 0",
        "ALU.ISETP.EQ.S32 P1, R1, 4",
        "@P1 BRA L_producer",
        loc(20, "acc = zeros((BM, BN))"),
        f"ALU.MOV.IMM R[64:{64 + E}], 0",
        "L_cloop:",
        "ALU.LOP.AND.B32 R31, R30, 1", "ALU.SHR.U32 R32, R30, 1", "ALU.LOP.AND.B32 R32, R32, 1",
        loc(22, "full[s].wait(phase)"),
        "ASYNC.BAR.WAIT R31, R32",
        f"ALU.IMUL.S32 R38, R31, {stage >> 4}",
        f"ALU.IADD.S32 R39, R38, {desc_b}",
        f"ALU.IADD.S32 R38, R38, {desc_a}",
        loc(23, "acc = dot(a[s], b[s], acc)"),
        f"SQMMA.M{BM}N{BN}K{BK}.F32.BF16.BF16 R[64:{64 + E}], R38, R39, 1, 0, 0",
        "SQMMA.WAIT",
        loc(24, "empty[s].arrive()"),
        "ALU.IADD.S32 R34, R31, 2",
        "ASYNC.BAR.ARRIVE RZ, R34",
        "ALU.IADD.S32 R30, R30, 1", f"ALU.ISETP.LT.S32 P2, R30, {KT}", "@P2 BRA L_cloop",
        loc(26, "store(C, acc)"),
        f"ALU.IMUL.S32 R40, R0, {E}",
        f"ALU.SHR.U32 R41, R40, {BN.bit_length() - 1}",
        f"ALU.LOP.AND.B32 R42, R40, {BN - 1}",
        "ALU.IADD.S32 R41, R41, R4", f"ALU.IMUL.S32 R41, R41, {N}",
        "ALU.IADD.S32 R41, R41, R42", "ALU.IADD.S32 R41, R41, R5",
        f"ALU.IOTA.S32 R[100:{100 + E}], R41, 1",
        f"ALU.IMAD.WIDE.S32 R[132:{132 + 2 * E}], R[100:{100 + E}], 4, c[0x10]",
        f"LSU.ST.GLOBAL.B32 [R[132:{132 + 2 * E}]], R[64:{64 + E}]",
        "EXIT",
        "L_producer:",
        loc(30, "a_desc, b_desc = tensor_descriptor(A), tensor_descriptor(B)"),
        "ALU.ISETP.EQ.S32 P3, R2, 0",
        *tme_desc(8, 0, "bf16", (M, K), (2 * K, 2)),
        *tme_desc(16, 1, "bf16", (K, N), (2 * N, 2)),
        "L_ploop:",
        "ALU.LOP.AND.B32 R31, R30, 1", "ALU.SHR.U32 R32, R30, 1", "ALU.LOP.AND.B32 R32, R32, 1",
        "ALU.LOP.XOR.B32 R35, R32, 1", "ALU.IADD.S32 R34, R31, 2",
        loc(32, "empty[s].wait(phase ^ 1)"),
        "ASYNC.BAR.WAIT R34, R35",
        f"ALU.IMUL.S32 R36, R31, {stage}", f"ALU.IADD.S32 R37, R36, {a_bytes}",
        f"ALU.IMUL.S32 R25, R30, {BK}", "ALU.MOV.B32 R24, R4",
        "ALU.MOV.B32 R26, R25", "ALU.MOV.B32 R27, R5",
        loc(34, "full[s].expect(BYTES)"),
        f"@P3 ASYNC.BAR.ADD_TRANS R31, {stage}",
        loc(35, "a[s] = tme_load(a_desc, (m0, k))"),
        f"@P3 TME.LD.TILE.2D R36, R[8:15], R[24:26], R31, {box_word((BM, BK), swizzle)}",
        loc(36, "b[s] = tme_load(b_desc, (k, n0))"),
        f"@P3 TME.LD.TILE.2D R37, R[16:23], R[26:28], R31, {box_word((BK, BN), swizzle)}",
        loc(37, "full[s].arrive()"),
        "@P3 ASYNC.BAR.ARRIVE RZ, R31",
        "ALU.IADD.S32 R30, R30, 1", f"ALU.ISETP.LT.S32 P2, R30, {KT}", "@P2 BRA L_ploop",
        "EXIT"])


def gemm_ref(A, B) -> np.ndarray:
    """The k-ordered f32 result SQMMA computes (exact bf16 products, one f32 rounding per
    k step)."""
    a, b = A.astype(np.float32), B.astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for kk in range(a.shape[1]):
        acc += a[:, kk:kk + 1] * b[kk:kk + 1, :]
    return acc


# ---------------------------------------------------------------- TME and SQMMA listings
NP = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "u8": np.uint8,
      "f64": np.float64, "f8e4m3": ml_dtypes.float8_e4m3fn, "i16": np.int16}


def tme_load_listing(tensor, box, swizzle, shared, smem, threads=64, fill_nan=False,
                     dump=True, wait=True, add=None, extra=()) -> str:
    """Thread 0 of each block loads the box at its block's row of coordinate table C
    into shared ``smem`` (AsyncBarrier 5, one arrival), every warp waits, the block's
    shared memory is dumped to row ``SR_CTAID.X`` of Y. Parameters X, Y, C."""
    el = next(k for k, v in NP.items() if np.dtype(v) == tensor.dtype)
    R, size = tensor.ndim, tensor.dtype.itemsize
    strides = list(tensor.strides)
    nbytes = int(np.prod(box)) * size
    d1 = 8 + desc_words(R)
    coords = f"R[24:{24 + R}]" if R > 1 else "R24"
    return lines(head([("X", "ptr"), ("Y", "ptr"), ("C", "ptr")], threads, shared), [
        "S2R R0, SR_TID.X",
        *tme_desc(8, 0, el, tensor.shape, strides, fill_nan),
        *per_block_regs(24, 2, R),
        "ALU.MOV.IMM R2, 5", f"ALU.MOV.IMM R3, {smem}",
        "ALU.ISETP.EQ.S32 P0, R0, 0",
        loc(3, "bar = barrier(1)"),
        "@P0 ASYNC.BAR.INIT R2, 1",
        "BAR.SYNC 0",
        loc(5, "bar.expect(BYTES)"),
        f"@P0 ASYNC.BAR.ADD_TRANS R2, {nbytes if add is None else add}",
        loc(6, "x = tme_load(desc, coords)"),
        f"@P0 TME.LD.TILE.{R}D R3, R[8:{d1}], {coords}, R2, {box_word(box, swizzle)}",
        "@P0 ASYNC.BAR.ARRIVE RZ, R2",
        *extra,
        loc(8, "bar.wait(0)"),
        *(["ASYNC.BAR.WAIT R2, 0"] if wait else []),
        *(shared_io("dump", shared, threads, 1) if dump else [])])


DT = {"BF16": ml_dtypes.bfloat16, "F16": np.float16, "TF32": np.float32,
      "E4M3": ml_dtypes.float8_e4m3fn, "E5M2": ml_dtypes.float8_e5m2, "S8": np.int8,
      "U8": np.uint8}
A_AT, B_AT = 0, 16384


def operand(rng, t: str, shape) -> np.ndarray:
    if t == "S8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if t == "U8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    scale = {"E4M3": 4.0, "E5M2": 4.0}.get(t, 1.0)
    return (rng.standard_normal(shape) * scale).astype(DT[t])


def as_f32(x: np.ndarray, t: str) -> np.ndarray:
    """The values SQMMA multiplies: f32 operands round to tf32 (nearest even, 10 mantissa
    bits; the test data is finite)."""
    if t == "TF32":
        bits = np.ascontiguousarray(x).view(np.uint32).astype(np.uint64)
        bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
        return bits.astype(np.uint32).view(np.float32)
    return x.astype(np.float32)


def stored(A, B, k, trans, swizzle):
    """The shared image holding A (128 x k) at 0 and B (k x 128) at 16384 as ``trans``
    says, and the two SQMMA descriptor words."""
    img = np.zeros(32768, np.uint8)
    sa, sb = A.dtype.itemsize, B.dtype.itemsize
    a_st, a_stride = (A.T, 128 * sa) if trans & 1 else (A, k * sa)
    b_st, b_stride = (B.T, k * sb) if trans & 2 else (B, 128 * sb)
    place(img, np.ascontiguousarray(a_st), A_AT, a_stride, swizzle)
    place(img, np.ascontiguousarray(b_st), B_AT, b_stride, swizzle)
    return img, pack_smem_desc(A_AT, a_stride, swizzle), pack_smem_desc(B_AT, b_stride, swizzle)


def d_io(op: str, E: int, off: int, param: int) -> list[str]:
    """Load or store the D group R[0:E]: squad thread t, element e <-> entry off + t*E + e
    of parameter ``param`` (32-bit elements)."""
    out = ["S2R R230, SR_TID.X"]
    for c0 in range(0, E, 32):
        n = min(32, E - c0)
        out += [f"ALU.IMUL.S32 R231, R230, {E}", f"ALU.IADD.S32 R231, R231, {off + c0}",
                f"ALU.IOTA.S32 R[128:{128 + n}], R231, 1",
                f"ALU.IMAD.WIDE.S32 R[160:{160 + 2 * n}], R[128:{128 + n}], 4, c[0x{8 * param:x}]",
                f"LSU.LD.GLOBAL.B32 R[{c0}:{c0 + n}], [R[160:{160 + 2 * n}]]" if op == "LD" else
                f"LSU.ST.GLOBAL.B32 [R[160:{160 + 2 * n}]], R[{c0}:{c0 + n}]"]
    return out


def sqmma_listing(shapes, k, ta, tb, acc, trans, descs, fence=True) -> tuple[str, list]:
    """One squad runs an SQMMA of every (m, n, scale, neg) of ``shapes`` on the operands
    in shared memory (filled from parameter I), D initialized from D0 when scale is 1,
    results to Y. Returns the text and the offsets of each result."""
    body, offs, off = [*shared_io("fill", 32768, 128, 0)], [], 0
    body += ["FENCE.ASYNC.SHARED"] if fence else []
    body += ["BAR.SYNC 0", *movs(240, descs)]
    for m, n, scale, neg in shapes:
        E = m * n // 128
        body += d_io("LD", E, off, 1) if scale else []
        body += [loc(20, "acc = dot(a, b, acc)"),
                 f"SQMMA.M{m}N{n}K{k}.{acc}.{ta}.{tb} R[0:{E}], R240, R241, {scale}, {trans}, "
                 f"{neg}",
                 loc(21, "wait(acc)"), "SQMMA.WAIT", *d_io("ST", E, off, 2)]
        offs.append(off)
        off += m * n
    return lines(head([("I", "ptr"), ("D0", "ptr"), ("Y", "ptr")], 128, 32768), body), offs


def sqmma_squads(threads=256, stagger=False) -> str:
    """Every squad of two blocks: D = A_s @ B for its own A (at squad * 8192) and one B:
    M64N32K16 bf16. ``stagger``: warps 2, 3 of each squad reach the SQMMA later."""
    da = pack_smem_desc(0, 32, 0)
    db = pack_smem_desc(16384, 64, 32)
    late = ["S2R R5, SR_WARPID", "ALU.LOP.AND.B32 R5, R5, 2", "ALU.ISETP.NE.S32 P5, R5, 0",
            "@!P5 BRA L_go", "NOP", "NOP", "L_go:"] if stagger else []
    return lines(head([("I", "ptr"), ("Y", "ptr")], threads, 32768), [
        *shared_io("fill", 32768, threads, 0), "FENCE.ASYNC.SHARED", "BAR.SYNC 0",
        "S2R R4, SR_SQUADID", "ALU.IMUL.S32 R4, R4, 512", f"ALU.IADD.S32 R240, R4, {da}",
        f"ALU.MOV.IMM R241, {db}", *late,
        "SQMMA.M64N32K16.F32.BF16.BF16 R[0:16], R240, R241, 0, 0, 0", "SQMMA.WAIT",
        "S2R R230, SR_TID.X", "S2R R231, SR_CTAID.X", f"ALU.IMAD.S32 R230, R231, {threads}, R230",
        "ALU.IMUL.S32 R230, R230, 16", "ALU.IOTA.S32 R[128:144], R230, 1",
        "ALU.IMAD.WIDE.S32 R[160:192], R[128:144], 4, c[0x8]",
        "LSU.ST.GLOBAL.B32 [R[160:192]], R[0:16]"])
