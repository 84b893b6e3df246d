"""Pinghu's asynchronous engines on the interpreter, from hand-written listings: TME loads
(1-D .. 5-D boxes, out-of-bounds fill, swizzle) and stores, their alignment faults,
AsyncBarrier phases and arrivals, waits that yield, counted block barriers, SQMMA for
every row against numpy, a pipelined GEMM, and the deadlock report."""
import numpy as np
import pytest

from mutile.backends.pinghu.isa import INSTRS
from mutile.backends.pinghu.isa.table import SQMMA_TYPES
from mutile.ir.ops_pinghu import SQMMA_MN, SQMMA_TF32_KMAJOR_MN
from mutile.backends.pinghu.isa.tensor_memory import desc_words, fill_bits, pack_smem_desc
from mutile.errors import DeviceFault

from .async_kit import (NP, as_f32, box_ref, box_word, gemm_listing, gemm_ref, head, lines, loc,
    movs, operand, place, shared_io, sqmma_listing, sqmma_squads, stored, tme_desc,
    tme_load_listing, unswizzle)
from .interp_kit import run

COVERS = {r.mnemonic for r in INSTRS if r.unit in ("TME", "ASYNC", "SQMMA", "FENCE")} \
    | {"BAR.SYNC.CNT"}


def fault(text, args, grid=(1, 1, 1), **kw) -> str:
    with pytest.raises(DeviceFault) as e:
        run(text, args, grid, **kw)
    return str(e.value)


# ---------------------------------------------------------------- TME loads
def padded(rng, shape, dtype) -> np.ndarray:
    """Random values of ``shape`` as a view of a buffer whose rows are padded to 16
    bytes (so every outer byte stride is a multiple of 16), the padding NaN/0xEE."""
    dt = np.dtype(dtype)
    row = -(-shape[-1] * dt.itemsize // 16) * 16 // dt.itemsize
    if dt.kind in "iu":
        buf = rng.integers(1, 127, shape[:-1] + (row,)).astype(dt)
    else:
        buf = (rng.standard_normal(shape[:-1] + (row,)) * 8).astype(dt)
    buf[..., shape[-1]:] = 0xEE if dt.kind in "iu" else np.nan
    return buf[..., :shape[-1]]


CASES = {   # rank: (element, tensor shape, box, per-block coordinates)
    1: ("f32", (100,), (64,), [(-8,), (60,)]),
    2: ("bf16", (20, 40), (8, 16), [(-3, 30), (15, -5)]),
    3: ("u8", (5, 7, 40), (2, 4, 32), [(4, -1, 20), (0, 5, -16)]),
    4: ("f16", (3, 4, 5, 20), (2, 2, 4, 8), [(2, -1, 3, 15), (-1, 3, 0, 0)]),
    5: ("f32", (2, 3, 3, 4, 6), (2, 2, 2, 2, 4), [(1, 2, -1, 3, 4), (0, 0, 2, -1, -2)]),
}


@pytest.mark.parametrize("rank", sorted(CASES))
@pytest.mark.parametrize("swizzle", [0, 16, 32, 64])
@pytest.mark.parametrize("fill_nan", [False, True])
def test_tme_load_box(rank, swizzle, fill_nan, rng):
    """Each block's box at negative and past-the-end coordinates: elements inside the
    tensor are copied, the others filled (0 or NaN), written row-major and swizzled at a
    256-byte aligned shared address."""
    el, shape, box, coords = CASES[rank]
    x = padded(rng, shape, NP[el])
    size = x.dtype.itemsize
    nbytes = int(np.prod(box)) * size
    smem, shared = 256, 256 + -(-nbytes // 256) * 256
    y = np.zeros((2, shared), np.uint8)
    c = np.array(coords, np.int32)
    run(tme_load_listing(x, box, swizzle, shared, smem, fill_nan=fill_nan), [x, y, c], (2, 1, 1))
    fill = fill_bits(el, fill_nan)
    for b in range(2):
        got = unswizzle(y[b], smem, int(np.prod(box)), size, swizzle).reshape(box)
        want = box_ref(x, coords[b], box, fill)
        assert np.array_equal(got, want), f"block {b}"
        assert not y[b, :smem].any(), "bytes before the box stay untouched"


def test_tme_box_read_with_the_wrong_swizzle_is_wrong(rng):
    x = rng.standard_normal((64, 64)).astype(np.float32)
    y = np.zeros((1, 4096), np.uint8)
    c = np.array([[8, 16]], np.int32)
    run(tme_load_listing(x, (16, 16), 64, 4096, 1024), [x, y, c])
    want = box_ref(x, (8, 16), (16, 16), 0).ravel()
    assert np.array_equal(unswizzle(y[0], 1024, 256, 4, 64), want)
    for wrong in (0, 16, 32):
        assert not np.array_equal(unswizzle(y[0], 1024, 256, 4, wrong), want), wrong


@pytest.mark.parametrize("swizzle", [0, 16, 32, 64])
def test_threads_read_the_box_at_swizzled_addresses(swizzle, rng):
    """Every thread reads box element t (row t // 32, column t % 32 of a 4 x 32 f32 box
    at shared 0x300) with LSU.LD.SHARED at the address it swizzles itself:
    ``addr ^ ((addr >> 8) & (256 / G - 1)) * G``."""
    x = rng.standard_normal((16, 48)).astype(np.float32)
    y = np.full(128, np.nan, np.float32)
    c = np.array([[5, 9]], np.int32)
    units = 256 // swizzle if swizzle else 1
    sw = ["ALU.SHR.U32 R41, R40, 8", f"ALU.LOP.AND.B32 R41, R41, {units - 1}",
          f"ALU.IMUL.S32 R41, R41, {swizzle}", "ALU.LOP.XOR.B32 R40, R40, R41"] \
        if swizzle else []
    read = ["ALU.SHL.B32 R40, R0, 2", "ALU.IADD.S32 R40, R40, 768", *sw,
            "LSU.LD.SHARED.B32 R42, [R40]",
            "ALU.IMAD.WIDE.S32 R44, R0, 4, c[0x8]", "LSU.ST.GLOBAL.B32 [R44], R42"]
    text = tme_load_listing(x, (4, 32), swizzle, 1280, 768, threads=128, dump=False) \
        + lines(read)
    run(text, [x, y, c])
    assert np.array_equal(y, box_ref(x, (5, 9), (4, 32), 0).view(np.float32).ravel())


def test_a_read_before_the_wait_sees_stale_bytes(rng):
    """Copies land lazily, at the first moment no warp can run (here: at the wait), so a
    read before the wait sees the old contents, as hardware may."""
    x = rng.standard_normal(64).astype(np.float32)
    y = np.full((1, 512), 0xAB, np.uint8)
    early = shared_io("dump", 256, 64, 1)
    run(tme_load_listing(x, (64,), 0, 512, 256, wait=False, dump=False, extra=early)
        + lines(["ASYNC.BAR.WAIT R2, 0"]), [x, y, np.zeros((1, 1), np.int32)])
    assert not y[0, :256].any()


# ---------------------------------------------------------------- TME stores
def tme_store_listing(shape, box, swizzle, coords, commit=True) -> str:
    """A box of f32 from X (at coordinates (0, 0)) is loaded into shared 0x100, then
    stored with TME.ST to Z at ``coords``; parameters X, Z."""
    R = len(shape)
    nbytes = int(np.prod(box)) * 4
    return lines(head([("X", "ptr"), ("Z", "ptr")], 64, 256 + nbytes), [
        "S2R R0, SR_TID.X",
        *tme_desc(8, 0, "f32", shape, [4 * int(np.prod(shape[i + 1:])) for i in range(R)]),
        *tme_desc(16, 1, "f32", shape, [4 * int(np.prod(shape[i + 1:])) for i in range(R)]),
        *movs(30, [0] * R), *movs(40, coords),
        "ALU.MOV.IMM R2, 0", "ALU.MOV.IMM R3, 256", "ALU.ISETP.EQ.S32 P0, R0, 0",
        "@P0 ASYNC.BAR.INIT R2, 1", "BAR.SYNC 0",
        f"@P0 ASYNC.BAR.ADD_TRANS R2, {nbytes}",
        f"@P0 TME.LD.TILE.{R}D R3, R[8:{8 + desc_words(R)}], R[30:{30 + R}], R2, "
        f"{box_word(box, swizzle)}",
        "@P0 ASYNC.BAR.ARRIVE RZ, R2", "ASYNC.BAR.WAIT R2, 0",
        loc(12, "tme_store(z_desc, coords, tile)"),
        f"@P0 TME.ST.TILE.{R}D R[16:{16 + desc_words(R)}], R[40:{40 + R}], R3, "
        f"{box_word(box, swizzle)}",
        *(["@P0 TME.ST.COMMIT", "TME.ST.WAIT"] if commit else [])])


@pytest.mark.parametrize("swizzle", [0, 32, 64])
@pytest.mark.parametrize("coords", [(0, 0), (-3, 10), (13, -8)])
def test_tme_store_round_trip_drops_out_of_bounds(swizzle, coords, rng):
    x = rng.standard_normal((16, 24)).astype(np.float32)
    z = np.full((16, 24), np.nan, np.float32)
    run(tme_store_listing(x.shape, (8, 16), swizzle, coords), [x, z])
    want = np.full_like(z, np.nan)
    src = x[:8, :16]
    r0, c0 = coords
    for i in range(8):
        for j in range(16):
            if 0 <= r0 + i < 16 and 0 <= c0 + j < 24:
                want[r0 + i, c0 + j] = src[i, j]
    assert np.array_equal(np.isnan(z), np.isnan(want)) and np.array_equal(z[~np.isnan(z)],
                                                                            want[~np.isnan(want)])


def test_uncommitted_stores_land_when_the_warp_exits(rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    z = np.full((8, 16), np.nan, np.float32)
    run(tme_store_listing(x.shape, (8, 16), 0, (0, 0), commit=False), [x, z])
    assert np.array_equal(z, x)


def test_a_store_to_a_read_only_array_faults(rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    z = np.zeros((8, 16), np.float32)
    z.flags.writeable = False
    msg = fault(tme_store_listing(x.shape, (8, 16), 0, (0, 0)), [x, z])
    assert "global store to read-only parameter 'Z'" in msg and "t.py:12" in msg


# ---------------------------------------------------------------- TME faults
def _bad(x, box=(8, 16), swizzle=0, shared=1024, smem=256, edit=lambda t: t, **kw):
    c = np.zeros((1, x.ndim), np.int32)
    return fault(edit(tme_load_listing(x, box, swizzle, shared, smem, dump=False, **kw)),
                 [x, np.zeros((1, 16), np.uint8), c])


def test_tme_alignment_and_bounds_faults():
    x = np.zeros((32, 32), np.float32)
    msg = _bad(x, smem=128)
    assert "misaligned TME load: shared address 0x80 is not a multiple of 256" in msg
    assert "pc 18: @P0 TME.LD.TILE.2D R3" in msg and msg.startswith("t.py:6:1")
    msg = _bad(x, smem=768)
    assert "TME load out of shared memory: the box 8x16 (512 bytes) at shared address " \
           "0x300 does not fit the block's 1024 bytes" in msg
    msg = _bad(x, edit=lambda t: t.replace("ALU.MOV.B64 R8, c[0x0]", "ALU.MOV.B64 R8, c[0x0]"
                                           "\n        ALU.IADD.S64 R8, R8, 2"))
    assert "the descriptor's global base address" in msg and "is not a multiple of 4" in msg
    msg = _bad(x, edit=lambda t: t.replace("ALU.MOV.IMM R13, 128", "ALU.MOV.IMM R13, 130"))
    assert "byte stride 130 of dimension 0 is not a multiple of 4" in msg
    msg = _bad(x, edit=lambda t: t.replace("ALU.MOV.IMM R14, 4", "ALU.MOV.IMM R14, 8"))
    assert "the innermost byte stride 8 is not the element size 4" in msg
    msg = _bad(x, box=(8, 2))
    assert "the box's innermost dimension (2 elements of 4 bytes) is not a multiple of 16 " \
           "bytes" in msg
    msg = _bad(x, box=(1, 4))
    assert "TME load of a box too small: 1x4 elements of 4 bytes are 16 bytes; a TME box is " \
           "at least 32 bytes" in msg
    msg = _bad(x, edit=lambda t: t.replace("ALU.MOV.IMM R10, 38", "ALU.MOV.IMM R10, 22"))
    assert "the TME descriptor has rank 1; this instruction copies a 2-D box" in msg


@pytest.mark.parametrize("box, coords", [((8, 16), [(0, 0), (27, 20)]),
                                         ((1, 8), [(31, 24), (-1, 3)])])
def test_tme_copies_a_4_byte_aligned_tensor(box, coords, rng):
    """The machine file's TME global alignment is 4 bytes, not 16: a tensor whose base is
    4 bytes into its array and whose rows are 132 bytes apart (neither a multiple of 16)
    loads correctly, also a box of the smallest size (32 bytes), inside and across the
    tensor's edges; the shared rows stay multiples of 16 bytes."""
    full = rng.standard_normal((32, 33)).astype(np.float32)
    x = full[:, 1:]                                       # strides (132, 4)
    nbytes = int(np.prod(box)) * 4
    smem, shared = 256, 256 + -(-nbytes // 256) * 256
    y = np.full((2, shared), 0x5A, np.uint8)
    text = tme_load_listing(x, box, 0, shared, smem).replace(
        "ALU.MOV.B64 R8, c[0x0]", "ALU.MOV.B64 R8, c[0x0]\n        ALU.IADD.S64 R8, R8, 4")
    assert "ALU.MOV.IMM R13, 132" in text
    run(text, [full, y, np.array(coords, np.int32)], (2, 1, 1))
    for b in range(2):
        got = unswizzle(y[b], smem, int(np.prod(box)), 4, 0).reshape(box)
        assert np.array_equal(got, box_ref(x, coords[b], box, 0)), f"block {b}"


def test_tme_elements_stay_naturally_aligned():
    """4-byte alignment is TME's; this model's memory still needs each element at a
    multiple of its size (as LSU accesses do): an f64 tensor 4 bytes off faults."""
    x = np.zeros((8, 8), np.float64)
    msg = _bad(x, box=(4, 4), edit=lambda t: t.replace(
        "ALU.MOV.B64 R8, c[0x0]", "ALU.MOV.B64 R8, c[0x0]\n        ALU.IADD.S64 R8, R8, 4"))
    assert "the descriptor's global base address" in msg and \
        "is not a multiple of the element size 8" in msg


def test_tme_global_out_of_bounds_names_the_array():
    x = np.zeros((32, 32), np.float32)
    msg = _bad(x[:20], edit=lambda t: t.replace("ALU.MOV.IMM R11, 20", "ALU.MOV.IMM R11, 40"),
               box=(32, 16), shared=4096)
    assert "out-of-bounds global load of 4 bytes" in msg
    assert "element (20, 0) of the box, coordinates (20, 0)" in msg
    assert "past the end of parameter 'X' (2560 bytes, 20 x 32 x float32)" in msg
    assert msg.startswith("t.py:6:1") and "TME.LD.TILE.2D" in msg


@pytest.mark.parametrize("bar, text", [
    ("63", "AsyncBarrier 63 is reserved"),
    ("64", "AsyncBarrier id 64 out of range (0 .. 62; 63 is reserved)")])
def test_barrier_ids_are_checked(bar, text):
    x = np.zeros((32, 32), np.float32)
    assert text in _bad(x, edit=lambda t: t.replace("ALU.MOV.IMM R2, 5", f"ALU.MOV.IMM R2, "
                                                                         f"{bar}"))


def test_a_barrier_used_before_init_faults():
    x = np.zeros((32, 32), np.float32)
    msg = _bad(x, edit=lambda t: t.replace("@P0 ASYNC.BAR.INIT R2, 1", "NOP"))
    assert "AsyncBarrier 5 is used before ASYNC.BAR.INIT" in msg and "ADD_TRANS" in msg


def test_more_bytes_than_announced_is_a_fault_naming_both_lines():
    x = np.zeros((32, 32), np.float32)
    msg = _bad(x, add=256)
    assert "AsyncBarrier 5 received 256 more transaction bytes than ADD_TRANS announced " \
           "for its phase (this TME copy brings 512)" in msg
    assert "ADD_TRANS: pc 17: @P0 ASYNC.BAR.ADD_TRANS R2, 256    // t.py:5  bar.expect" in msg
    assert "pc 18: @P0 TME.LD.TILE.2D R3, R[8:15], R[24:26], R2, " in msg and "t.py:6" in msg


def test_fewer_bytes_than_announced_is_a_deadlock_naming_the_add():
    x = np.zeros((32, 32), np.float32)
    msg = _bad(x, add=600)
    assert "deadlock: no warp can make progress; 1 block(s) wait" in msg
    assert "warp 0 waits at ASYNC.BAR.WAIT for the phase of AsyncBarrier 5 with parity 0 " \
           "(pc 20)" in msg
    assert "AsyncBarrier 5: 0 phase(s) completed (parity 0), 0 of 1 arrival(s) and 88 " \
           "transaction byte(s) pending (ADD_TRANS at pc 17)" in msg
    assert "pc 20: ASYNC.BAR.WAIT R2, 0    // t.py:8  bar.wait(0)" in msg
    assert "pc 17: @P0 ASYNC.BAR.ADD_TRANS R2, 600    // t.py:5  bar.expect(BYTES)" in msg
    assert msg.startswith("t.py:8:1")


# ---------------------------------------------------------------- AsyncBarriers
ROUNDS = 5
PING_PONG = lines(head([("Y", "ptr"), ("P", "ptr")], 64, 256), [
    "S2R R0, SR_TID.X", "S2R R1, SR_WARPID", "S2R R2, SR_LANEID",
    "ALU.ISETP.EQ.S32 P0, R0, 0", "ALU.ISETP.EQ.S32 P2, R2, 0",
    loc(2, "ping, pong = barrier(1), barrier(1)"),
    "@P0 ASYNC.BAR.INIT 0, 1", "@P0 ASYNC.BAR.INIT 1, 1", "BAR.SYNC 0",
    "ALU.MOV.IMM R10, 0", "ALU.MOV.IMM R11, 0",
    "ALU.ISETP.EQ.S32 P1, R1, 1", "@P1 BRA L_pong",
    "L_ping:",
    "ALU.IMUL.S32 R12, R10, 2",
    "@P2 LSU.ST.SHARED.B32 [0x0], R12",
    loc(6, "phase = ping.arrive()"),
    "ASYNC.BAR.ARRIVE R13, 0",
    "ALU.IMAD.WIDE.S32 R20, R10, 4, c[0x8]", "@P2 LSU.ST.GLOBAL.B32 [R20], R13",
    "ALU.LOP.AND.B32 R14, R10, 1",
    loc(8, "pong.wait(r & 1)"),
    "ASYNC.BAR.WAIT 1, R14",
    "LSU.LD.SHARED.B32 R15, [0x4]", "ALU.IADD.S32 R11, R11, R15",
    "ALU.IADD.S32 R10, R10, 1", f"ALU.ISETP.LT.S32 P3, R10, {ROUNDS}", "@P3 BRA L_ping",
    "ALU.MOV.B64 R20, c[0x0]", "@P2 LSU.ST.GLOBAL.B32 [R20], R11",
    "EXIT",
    "L_pong:",
    "ALU.LOP.AND.B32 R14, R10, 1",
    loc(12, "ping.wait(r & 1)"),
    "ASYNC.BAR.WAIT 0, R14",
    "LSU.LD.SHARED.B32 R15, [0x0]", "ALU.IADD.S32 R15, R15, 1",
    "@P2 LSU.ST.SHARED.B32 [0x4], R15",
    "ASYNC.BAR.ARRIVE R13, 1",
    f"ALU.IADD.S32 R16, R10, {ROUNDS}",
    "ALU.IMAD.WIDE.S32 R20, R16, 4, c[0x8]", "@P2 LSU.ST.GLOBAL.B32 [R20], R13",
    "ALU.IADD.S32 R10, R10, 1", f"ALU.ISETP.LT.S32 P3, R10, {ROUNDS}", "@P3 BRA L_pong"])


@pytest.mark.parametrize("sanitize", [False, True])
def test_two_warps_ping_pong_through_barrier_phases(sanitize):
    """Warp 0 posts 2r in shared memory and arrives on barrier 0, then waits for the
    phase r of barrier 1; warp 1 answers 2r + 1. Each warp's wait must yield to the
    other warp. ARRIVE returns the parity before the arrival: r & 1."""
    y = np.full(1, -1, np.int32)
    p = np.full(2 * ROUNDS, -1, np.int32)
    run(PING_PONG, [y, p], sanitize=sanitize)
    assert y[0] == ROUNDS * ROUNDS
    assert list(p) == [r & 1 for r in range(ROUNDS)] * 2


def arrivals(count: int, extra=()) -> str:
    """4 warps; AsyncBarrier 3 counts ``count`` warps; every warp arrives once (one
    instruction) and stores the returned parity, then the phase count is observed with
    waits."""
    return lines(head([("P", "ptr")], 128, 0), [
        "S2R R0, SR_TID.X", "S2R R1, SR_WARPID", "ALU.ISETP.EQ.S32 P0, R0, 0",
        loc(3, f"bar = barrier({count})"),
        f"@P0 ASYNC.BAR.INIT 3, {count}", "BAR.SYNC 0",
        *extra,
        loc(5, "bar.arrive()"),
        "ASYNC.BAR.ARRIVE R4, 3",
        "ALU.IMAD.WIDE.S32 R6, R0, 4, c[0x0]", "LSU.ST.GLOBAL.B32 [R6], R4"])


def test_arrivals_count_warps_and_spill_into_the_next_phase():
    p = np.full(128, -1, np.int32)
    run(arrivals(4), [p])
    assert (p == 0).all()
    run(arrivals(2), [p])             # warps 0, 1 complete phase 0; warps 2, 3 phase 1
    assert list(p[::32]) == [0, 0, 1, 1]


def test_an_arrival_on_a_phase_waiting_for_bytes_faults():
    msg = fault(arrivals(1, ["@P0 ASYNC.BAR.ADD_TRANS 3, 16"]), [np.zeros(128, np.int32)])
    assert "AsyncBarrier 3 arrived on by more warps than initialized (1): its phase already " \
           "has every arrival and waits only for 16 transaction bytes" in msg
    assert "initialized by: pc 3: @P0 ASYNC.BAR.INIT 3, 1    // t.py:3  bar = barrier(1)" in msg
    assert "pc 6: ASYNC.BAR.ARRIVE R4, 3    // t.py:5  bar.arrive()" in msg
    assert "warp 1, lane 0" in msg


@pytest.mark.parametrize("count, n", [(0, 4), (5, 4)])
def test_init_checks_the_arrival_count(count, n):
    msg = fault(arrivals(count), [np.zeros(128, np.int32)])
    assert f"ASYNC.BAR.INIT with {count} arrivals per phase: a barrier of this block counts " \
           f"1 .. {n} warps" in msg


def test_a_phase_that_never_completes_is_a_deadlock():
    text = arrivals(4).replace("        ASYNC.BAR.ARRIVE R4, 3\n",
                               "        @P0 ASYNC.BAR.ARRIVE R4, 3\n") \
        + lines([loc(9, "bar.wait(0)"), "ASYNC.BAR.WAIT 3, 0"])
    msg = fault(text, [np.zeros(128, np.int32)], (2, 1, 1))
    assert msg.startswith("t.py:9:1: device fault: kernel 't': deadlock: no warp can make "
                          "progress; 2 block(s) wait at barriers that can never complete")
    assert "block (0, 0, 0): warp 0 waits at ASYNC.BAR.WAIT for the phase of AsyncBarrier 3 " \
           "with parity 0 (pc 8), warp 1 waits at" in msg
    assert "    AsyncBarrier 3: 0 phase(s) completed (parity 0), 3 of 4 arrival(s) and 0 " \
           "transaction byte(s) pending" in msg
    assert "  pc 8: ASYNC.BAR.WAIT 3, 0    // t.py:9  bar.wait(0)" in msg


def test_waits_pass_on_completed_phases_and_block_on_the_current_one():
    """After two completed phases (parity 0 again) a wait for parity 1 passes, a wait for
    parity 0 blocks until the next phase completes (the last warp's second arrival)."""
    text = arrivals(4) + lines([
        "ASYNC.BAR.ARRIVE RZ, 3",                     # phase 1 completes
        "ASYNC.BAR.WAIT 3, 1",                        # phase 1 (parity 1) done: passes
        "ALU.ISETP.NE.S32 P1, R1, 3", "@P1 ASYNC.BAR.ARRIVE RZ, 3",
        "@P1 ASYNC.BAR.WAIT 3, 0",                    # warps 0-2 wait for phase 2 ...
        "ALU.ISETP.EQ.S32 P4, R1, 3", "@P4 ASYNC.BAR.ARRIVE R5, 3",   # ... warp 3 ends it
        "ALU.IADD.S32 R6, R6, 512", "ALU.MOV.IMM R5, 7", "LSU.ST.GLOBAL.B32 [R6], R5"])
    p = np.full(256, -1, np.int32)
    run(text, [p])
    assert (p[128:] == 7).all()


# ---------------------------------------------------------------- counted block barriers
def counted(n_pair: int) -> str:
    """Warps 0, 1 and warps 2, 3 exchange their thread ids through shared memory, each
    pair synchronized by its own BAR.SYNC.CNT (ids 1 and 2); then a full BAR.SYNC."""
    return lines(head([("Y", "ptr")], 128, 512), [
        "S2R R0, SR_TID.X", "S2R R1, SR_WARPID", "ALU.SHL.B32 R2, R0, 2",
        "LSU.ST.SHARED.B32 [R2], R0",
        "ALU.ISETP.LT.S32 P0, R1, 2", "@!P0 BRA L_hi",
        loc(4, "pair_barrier(0)"),
        f"BAR.SYNC.CNT 1, {n_pair}", "BRA L_read",
        "L_hi:",
        loc(6, "pair_barrier(1)"),
        f"BAR.SYNC.CNT 2, {n_pair}",
        "L_read:",
        "ALU.LOP.XOR.B32 R3, R2, 128", "LSU.LD.SHARED.B32 R4, [R3]",
        "BAR.SYNC 0",
        "ALU.IMAD.WIDE.S32 R6, R0, 4, c[0x0]", "LSU.ST.GLOBAL.B32 [R6], R4"])


@pytest.mark.parametrize("sanitize", [False, True])
def test_counted_barriers_synchronize_a_subset_of_warps(sanitize):
    y = np.full(128, -1, np.int32)
    run(counted(2), [y], (2, 1, 1), sanitize=sanitize)
    assert list(y) == [t ^ 32 for t in range(128)]


def test_a_counted_barrier_that_is_never_full_deadlocks():
    msg = fault(counted(3), [np.zeros(128, np.int32)])
    assert "warp 0 waits at BAR.SYNC.CNT 1, 3 (pc 6), warp 1 waits at BAR.SYNC.CNT 1, 3 " \
           "(pc 6), warp 2 waits at BAR.SYNC.CNT 2, 3 (pc 8)" in msg
    assert "pc 6: BAR.SYNC.CNT 1, 3    // t.py:4  pair_barrier(0)" in msg


def test_a_counted_barrier_larger_than_the_block_faults():
    assert "BAR.SYNC.CNT of 5 warps: the block has 4" in fault(counted(5),
                                                               [np.zeros(128, np.int32)])


# ---------------------------------------------------------------- SQMMA
ROWS = [(ta, tb, acc, k) for ta, tb, acc, ks in SQMMA_TYPES for k in ks]


@pytest.mark.parametrize("i", range(len(ROWS)), ids=lambda i: "{}.{}.{}-K{}".format(*ROWS[i]))
def test_sqmma_every_shape(i, rng):
    """Every M x N of the machine file with one type pair and K (so every SQMMA row runs;
    TF32's K-major-only shapes when trans is 2), scale 0 and 1 and the four negations
    varying, the four operand majors and swizzles varying over the type pairs: bit-exact
    against the k-ordered f32 rule (32-bit wrapping sums for S8 and U8) and within the f32
    rounding bound of the float64 product."""
    ta, tb, acc, k = ROWS[i]
    trans, swizzle = i % 4, (0, 64, 32, 16)[(i // 4) % 4]
    A, B = operand(rng, ta, (128, k)), operand(rng, tb, (k, 128))
    img, da, db = stored(A, B, k, trans, swizzle)
    mns = [mn for mn in SQMMA_MN if ta != "TF32" or trans == 2 or mn not in SQMMA_TF32_KMAJOR_MN]
    shapes = [(m, n, (j + i) % 2, (j + i // 2) % 4) for j, (m, n) in enumerate(mns)]
    text, offs = sqmma_listing(shapes, k, ta, tb, acc, trans, (da, db))
    total = sum(m * n for m, n, _, _ in shapes)
    if acc in ("S32", "U32"):
        d0 = rng.integers(-2**31, 2**31, total).astype(np.int32)
        y = np.full(total, 0x7EADBEEF, np.int32)
    else:
        d0 = (rng.standard_normal(total) * 4).astype(np.float32)
        y = np.full(total, np.nan, np.float32)
    run(text, [img.reshape(1, -1), d0, y])
    for (m, n, scale, neg), off in zip(shapes, offs):
        got = y[off:off + m * n].reshape(m, n)
        init = d0[off:off + m * n].reshape(m, n) if scale else np.zeros((m, n), d0.dtype)
        sa, sb = (-1 if neg & 1 else 1), (-1 if neg & 2 else 1)
        what = f"M{m}N{n}K{k} {ta}.{tb} scale {scale} neg {neg} trans {trans} swizzle {swizzle}"
        if acc in ("S32", "U32"):
            want = (sa * A[:m].astype(np.int64)) @ (sb * B[:, :n].astype(np.int64)) + init
            assert np.array_equal(got.view(np.uint32), (want & 0xFFFFFFFF).astype(np.uint32)), \
                what
            continue
        a, b = sa * as_f32(A[:m], ta), sb * as_f32(B[:, :n], tb)
        want = init.copy()
        for kk in range(k):
            want += a[:, kk:kk + 1] * b[kk:kk + 1, :]
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), what
        exact = a.astype(np.float64) @ b.astype(np.float64) + init
        bound = 2 * k * 2.0 ** -24 * (np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(init))
        assert (np.abs(got - exact) <= bound + 1e-30).all(), what


def test_sqmma_rows_are_the_machine_files_shapes():
    """The SQMMA rows have exactly the machine file's (M, N) per type pair, and the TF32
    rows of its K-major-only shapes take trans = 2 only: the assembler refuses others."""
    from mutile.backends.pinghu import assemble
    from mutile.backends.pinghu.isa.errors import AssemblyError
    from mutile.machines import default
    want = {tuple(mn) for mn in default().value("isa", "sqmma_mn")}
    assert len(want) == 11 and (16, 16) not in want and (64, 16) in want
    for ta, tb, acc, k in ROWS:
        got = {(r.attrs["m"], r.attrs["n"]) for r in INSTRS if r.unit == "SQMMA"
               and r.family == "SQMMA" and (r.attrs["a"], r.attrs["k"]) == (ta, k)
               and r.attrs["b"] == tb}
        assert got == want, (ta, tb, k)
    good = lines(head([], 128, 1024), ["SQMMA.M128N64K8.F32.TF32.TF32 R[0:64], R1, R2, 0, 2, 0"])
    assemble(good)
    with pytest.raises(AssemblyError) as e:
        assemble(good.replace("R2, 0, 2, 0", "R2, 0, 0, 0"))
    assert "immediate 0 out of range for kmajor (2 .. 2)" in str(e.value)
    with pytest.raises(AssemblyError) as e:
        assemble(good.replace("M128N64K8", "M16N16K8").replace("R[0:64]", "R[0:2]"))
    assert "SQMMA.M16N16K8.F32.TF32.TF32" in str(e.value)
    assemble(good.replace("TF32.TF32", "BF16.BF16").replace("K8", "K16")
             .replace("0, 2, 0", "0, 0, 3"))


@pytest.mark.parametrize("stagger", [False, True])
def test_sqmma_squads_of_several_blocks(stagger, rng):
    img = np.zeros((2, 32768), np.uint8)
    As = operand(rng, "BF16", (2, 2, 64, 16))
    B = operand(rng, "BF16", (2, 16, 32))
    for blk in range(2):
        for s in range(2):
            place(img[blk], As[blk, s], s * 8192, 32, 0)
        place(img[blk], B[blk], 16384, 64, 32)
    y = np.full((2, 2, 64, 32), np.nan, np.float32)
    run(sqmma_squads(stagger=stagger), [img, y], (2, 1, 1))
    for blk in range(2):
        for s in range(2):
            a, b = As[blk, s].astype(np.float32), B[blk].astype(np.float32)
            want = np.zeros((64, 32), np.float32)
            for kk in range(16):
                want += a[:, kk:kk + 1] * b[kk:kk + 1]
            assert np.array_equal(y[blk, s], want), (blk, s)


def test_sqmma_needs_a_whole_warp_squad():
    msg = fault(sqmma_squads(threads=64), [np.zeros((1, 32768), np.uint8),
                                           np.zeros(4096, np.float32)])
    assert "SQMMA needs a whole WarpSquad: warp 0 is in squad 0 (warps 0 .. 3), but the " \
           "block has 2 warps" in msg


def test_sqmma_operands_must_stay_in_shared_memory():
    text = sqmma_squads().replace(f"ALU.MOV.IMM R241, {pack_smem_desc(16384, 64, 32)}",
                                  f"ALU.MOV.IMM R241, {pack_smem_desc(32000, 64, 32)}")
    msg = fault(text, [np.zeros((1, 32768), np.uint8), np.zeros(8192, np.float32)])
    assert "SQMMA operand B reaches shared address 0x80fe, past the block's 32768 bytes" in msg
    assert "SQMMA.M64N32K16.F32.BF16.BF16 R[0:16], R240, R241, 0, 0, 0" in msg


def test_d_is_written_when_the_sqmma_completes(rng):
    """Before SQMMA.WAIT the accumulator registers still hold their old values."""
    text = sqmma_squads(threads=128).replace(
        "SQMMA.M64N32K16.F32.BF16.BF16 R[0:16], R240, R241, 0, 0, 0\n        SQMMA.WAIT\n",
        "ALU.MOV.IMM R[0:16], 7.0\n"
        "        SQMMA.M64N32K16.F32.BF16.BF16 R[0:16], R240, R241, 0, 0, 0\n")
    img = np.zeros((1, 32768), np.uint8)
    place(img[0], operand(rng, "BF16", (16, 32)), 16384, 64, 32)
    place(img[0], operand(rng, "BF16", (64, 16)), 0, 32, 0)
    y = np.full(2048, np.nan, np.float32)
    run(text, [img, y])
    assert (y == 7.0).all()


# ---------------------------------------------------------------- a pipelined GEMM
@pytest.mark.parametrize("M, N, K", [(64, 64, 64), (128, 128, 256)])
def test_warp_specialized_gemm(M, N, K, rng):
    """A producer warp streams A and B tiles with TME through two stages; a consumer
    WarpSquad accumulates with SQMMA (several k steps, the stages reused)."""
    A = operand(rng, "BF16", (M, K))
    B = operand(rng, "BF16", (K, N))
    C = np.full((M, N), np.nan, np.float32)
    run(gemm_listing(M, N, K), [A, B, C], (M // 64, N // 64, 1))
    assert np.array_equal(C.view(np.uint32), gemm_ref(A, B).view(np.uint32))
    exact = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(C - exact).max() <= 2 * K * 2.0 ** -24 * (np.abs(A.astype(np.float64))
                                                            @ np.abs(B.astype(np.float64))).max()
