"""The asynchronous checks of the sanitizer (``execute(..., sanitize=True)``): each
misuse planted in a small listing (or in the pipelined GEMM of ``async_kit``) is reported
naming both sides by ISA line and Python line; correct listings report nothing."""
import numpy as np
import pytest

from mutile.errors import DeviceFault

from .async_kit import (box_ref, gemm_listing, gemm_ref, lines, loc, operand, sqmma_listing,
    sqmma_squads, stored, tme_load_listing)
from .interp_kit import run
from .test_async import ROWS


def report(text, args, grid=(1, 1, 1)) -> str:
    """The sanitizer's report on ``text`` (which must run cleanly without it)."""
    with pytest.raises(DeviceFault) as e:
        run(text, args, grid, sanitize=True)
    return str(e.value)


def gemm_args(rng, M=64, N=64, K=128):
    A = operand(rng, "BF16", (M, K))
    B = operand(rng, "BF16", (K, N))
    return [A, B, np.full((M, N), np.nan, np.float32)], (M // 64, N // 64, 1)


# ---------------------------------------------------------------- correct listings
@pytest.mark.parametrize("M, N, K", [(64, 64, 64), (128, 64, 256)])
def test_no_report_on_a_correct_pipelined_gemm(M, N, K, rng):
    args, grid = gemm_args(rng, M, N, K)
    run(gemm_listing(M, N, K), args, grid, sanitize=True)
    assert np.array_equal(args[2], gemm_ref(args[0], args[1]))


def test_no_report_on_tme_landed_bytes_read_after_the_wait(rng):
    """Landed bytes count as written; every warp waited, so every warp may read."""
    x = rng.standard_normal((16, 64)).astype(np.float32)
    read = ["S2R R0, SR_TID.X", "ALU.SHL.B32 R40, R0, 2", "ALU.IADD.S32 R40, R40, 256",
            "LSU.LD.SHARED.B32 R41, [R40]",
            "ALU.IMAD.WIDE.S32 R42, R0, 4, c[0x8]", "LSU.ST.GLOBAL.B32 [R42], R41"]
    y = np.full(64, np.nan, np.float32)
    text = tme_load_listing(x, (4, 16), 0, 512, 256, dump=False) + lines(read)
    run(text, [x, y, np.zeros((1, 2), np.int32)], sanitize=True)
    assert np.array_equal(y, box_ref(x, (0, 0), (4, 16), 0).view(np.float32).ravel())


def test_no_report_when_one_warp_waits_and_a_block_barrier_follows(rng):
    """Observing a phase propagates through BAR.SYNC (happens-before): only warp 0
    waits, then the whole block passes a barrier and every warp reads."""
    x = rng.standard_normal((16, 64)).astype(np.float32)
    text = tme_load_listing(x, (4, 16), 0, 512, 256, dump=False).replace(
        "        ASYNC.BAR.WAIT R2, 0\n",
        "        S2R R9, SR_WARPID\n        ALU.ISETP.EQ.S32 P3, R9, 0\n"
        "        @P3 ASYNC.BAR.WAIT R2, 0\n        BAR.SYNC 1\n") \
        + lines(["S2R R0, SR_TID.X", "ALU.SHL.B32 R40, R0, 2", "ALU.IADD.S32 R40, R40, 256",
                 "LSU.LD.SHARED.B32 R41, [R40]"])
    run(text, [x, np.zeros(1), np.zeros((1, 2), np.int32)], sanitize=True)


@pytest.mark.parametrize("i", [0, 5, 12, 21, 26])
def test_no_report_on_sqmma_operands_written_and_fenced(i, rng):
    ta, tb, acc, k = ROWS[i]
    A, B = operand(rng, ta, (128, k)), operand(rng, tb, (k, 128))
    img, da, db = stored(A, B, k, i % 4, 64)
    text, _ = sqmma_listing([(64, 32, 0, 0), (64, 16, 0, 3)], k, ta, tb, acc, i % 4, (da, db))
    run(text, [img.reshape(1, -1), np.zeros(8192, np.float32), np.zeros(8192, np.float32)],
        sanitize=True)


# ---------------------------------------------------------------- (a) reads before the wait
def test_a_shared_load_before_the_wait_is_reported(rng):
    x = rng.standard_normal((16, 64)).astype(np.float32)
    early = [loc(7, "y = x[0, 0]"), "LSU.LD.SHARED.B32 R40, [R3]"]
    text = tme_load_listing(x, (4, 16), 0, 512, 256, dump=False, extra=early)
    run(text, [x, np.zeros(1), np.zeros((1, 2), np.int32)])           # no report without
    msg = report(text, [x, np.zeros(1), np.zeros((1, 2), np.int32)])
    assert msg.startswith("t.py:7:1: device fault: kernel 't': reads shared memory that the "
                          "TME copy at pc 18: @P0 TME.LD.TILE.2D R3, R[8:15], R[24:26], R2, ")
    assert "    // t.py:6  x = tme_load(desc, coords) has not been waited for" in msg
    assert "block (0, 0, 0), warp 0, lane 0" in msg
    assert "pc 20: LSU.LD.SHARED.B32 R40, [R3]    // t.py:7  y = x[0, 0]" in msg


def test_a_warp_that_did_not_wait_itself_is_reported(rng):
    """Warp 0 waits for the copy, then signals barrier 6; warp 1 waits only for barrier 6
    (it observed that phase, not the copy's) and reads the box."""
    x = rng.standard_normal((16, 64)).astype(np.float32)
    text = tme_load_listing(x, (4, 16), 0, 512, 256, dump=False).replace(
        "        @P0 ASYNC.BAR.INIT R2, 1\n",
        "        @P0 ASYNC.BAR.INIT R2, 1\n        @P0 ASYNC.BAR.INIT 6, 1\n").replace(
        "        ASYNC.BAR.WAIT R2, 0\n",
        "        S2R R9, SR_WARPID\n        ALU.ISETP.EQ.S32 P3, R9, 0\n"
        "        @P3 ASYNC.BAR.WAIT R2, 0\n        @P3 ASYNC.BAR.ARRIVE RZ, 6\n"
        "        @!P3 ASYNC.BAR.WAIT 6, 0\n") \
        + lines([loc(11, "y = x[1, 0]"), "ALU.IADD.S32 R40, R3, 64",
                 "LSU.LD.SHARED.B32 R41, [R40]"])
    args = [x, np.zeros(1), np.zeros((1, 2), np.int32)]
    run(text, args)
    msg = report(text, args)
    assert "reads shared memory that the TME copy at pc 19: @P0 TME.LD.TILE.2D" in msg
    assert "block (0, 0, 0), warp 1, lane 0 (thread 32 of the block)" in msg
    assert "LSU.LD.SHARED.B32 R41, [R40]    // t.py:11  y = x[1, 0]" in msg


def test_an_sqmma_that_waited_on_the_wrong_barrier_is_reported(rng):
    """The consumers wait on the other stage's "full" barrier: both stages' copies have
    landed by then, but the one the SQMMA reads was counted on a phase they never
    observed."""
    args, grid = gemm_args(rng)
    text = gemm_listing(64, 64, 128).replace(
        "        ASYNC.BAR.WAIT R31, R32\n",
        "        ALU.LOP.XOR.B32 R33, R31, 1\n        ASYNC.BAR.WAIT R33, R32\n")
    run(text, args, grid)
    msg = report(text, args, grid)
    assert msg.startswith("t.py:23:1: device fault: kernel 'gemm': the SQMMA reads shared "
                          "memory that the TME copy at pc ")
    assert "@P3 TME.LD.TILE.2D R36, R[8:15], R[24:26], R31, " in msg
    assert "// t.py:35  a[s] = tme_load(a_desc, (m0, k)) has not been waited for" in msg
    assert "SQMMA.M64N64K64.F32.BF16.BF16 R[64:96], R38, R39, 1, 0, 0    // t.py:23  acc = " \
           "dot(a[s], b[s], acc)" in msg


def test_a_tme_store_of_bytes_not_waited_for_is_reported(rng):
    x = rng.standard_normal((16, 64)).astype(np.float32)
    store = [loc(9, "tme_store(desc, coords, x)"),
             "@P0 TME.ST.TILE.2D R[8:15], R[24:26], R3, 0x42", "@P0 TME.ST.COMMIT",
             "TME.ST.WAIT"]
    text = tme_load_listing(x, (4, 16), 0, 512, 256, dump=False, wait=False, extra=store)
    msg = report(text, [x, np.zeros(1), np.zeros((1, 2), np.int32)])
    assert "the TME store reads shared memory that the TME copy at pc 18: @P0 " \
           "TME.LD.TILE.2D" in msg and "has not been waited for" in msg
    assert "@P0 TME.ST.TILE.2D R[8:15], R[24:26], R3, 66    // t.py:9  tme_store" in msg


# ---------------------------------------------------------------- (b) overwriting SQMMA operands
def squads_with(between: list[str]) -> str:
    return sqmma_squads(threads=128).replace(
        "SQMMA.M64N32K16.F32.BF16.BF16 R[0:16], R240, R241, 0, 0, 0\n        SQMMA.WAIT\n",
        "// t.py:30  acc = dot(a, b)\n"
        "        SQMMA.M64N32K16.F32.BF16.BF16 R[0:16], R240, R241, 0, 0, 0\n"
        + lines(between) + "        SQMMA.WAIT\n")


def test_a_store_over_a_pending_sqmma_operand_is_reported(rng):
    text = squads_with([loc(31, "a[0, 0] = 0"), "LSU.ST.SHARED.B32 [0x40], RZ"])
    args = [np.zeros((1, 32768), np.uint8), np.zeros(2048, np.float32)]
    run(text, args)
    msg = report(text, args)
    assert msg.startswith("t.py:31:1: device fault: kernel 't': this store overwrites shared "
                          "memory that the SQMMA at pc ")
    assert "SQMMA.M64N32K16.F32.BF16.BF16 R[0:16], R240, R241, 0, 0, 0    // t.py:30  acc = " \
           "dot(a, b) still reads" in msg
    assert "LSU.ST.SHARED.B32 [0x40], RZ    // t.py:31  a[0, 0] = 0" in msg


def test_a_tme_copy_over_a_pending_sqmma_operand_is_reported(rng):
    reload = ["S2R R0, SR_TID.X", "ALU.ISETP.EQ.S32 P0, R0, 0",
              "ALU.MOV.B64 R8, c[0x0]", "ALU.MOV.IMM R10, 38", "ALU.MOV.IMM R11, 64",
              "ALU.MOV.IMM R12, 64", "ALU.MOV.IMM R13, 256", "ALU.MOV.IMM R14, 4",
              "ALU.MOV.IMM R24, 0", "ALU.MOV.IMM R25, 0", "ALU.MOV.IMM R3, 16384",
              "ALU.MOV.IMM R2, 1", "@P0 ASYNC.BAR.INIT R2, 1",
              "@P0 ASYNC.BAR.ADD_TRANS R2, 256",
              loc(33, "b = tme_load(desc, (0, 0))"),
              "@P0 TME.LD.TILE.2D R3, R[8:15], R[24:26], R2, 0x42"]
    text = squads_with(reload)
    msg = report(text, [np.zeros((1, 32768), np.uint8), np.zeros(4096, np.float32)])
    assert "this TME copy overwrites shared memory that the SQMMA at pc " in msg
    assert "// t.py:30  acc = dot(a, b) still reads" in msg
    assert "@P0 TME.LD.TILE.2D R3, R[8:15], R[24:26], R2, 66    // t.py:33" in msg


# ---------------------------------------------------------------- (c) bytes, (d) phases, (e) arrivals
def test_more_bytes_than_expected_names_the_add_and_the_copy(rng):
    args, grid = gemm_args(rng)
    text = gemm_listing(64, 64, 128).replace("ADD_TRANS R31, 16384", "ADD_TRANS R31, 8192")
    msg = report(text, args, grid)
    assert "AsyncBarrier 0 received 8192 more transaction bytes than ADD_TRANS announced " \
           "for its phase (this TME copy brings 8192)" in msg
    assert "@P3 ASYNC.BAR.ADD_TRANS R31, 8192    // t.py:34  full[s].expect(BYTES)" in msg
    assert "@P3 TME.LD.TILE.2D R37, R[16:23], R[26:28], R31, " in msg and "t.py:36" in msg


def test_a_wait_on_a_phase_already_waited_for_is_reported(rng):
    """The consumers keep waiting for parity 0: at the third k step (stage 0 again) the
    wait passes at once on the old phase."""
    args, grid = gemm_args(rng, K=256)
    text = gemm_listing(64, 64, 256).replace("ASYNC.BAR.WAIT R31, R32", "ASYNC.BAR.WAIT R31, 0")
    msg = report(text, args, grid)
    assert msg.startswith("t.py:22:1: device fault: kernel 'gemm': waits on a phase of "
                          "AsyncBarrier 0 it has already waited for: the wait passes at once "
                          "and synchronizes with nothing new (wrong phase parity?)")
    assert "the earlier wait: pc 20: ASYNC.BAR.WAIT R31, 0    // t.py:22  full[s].wait" in msg


def test_the_empty_barrier_idiom_is_not_a_wrong_phase():
    """A first wait for parity 1 on a barrier that never completed a phase passes quietly;
    a second one observes nothing new."""
    text = lines([".kernel t", ".param Y ptr c[0x0]", ".threads 32", ".regs 8", ".shared 0",
                  ".local 0", "", "@PT ASYNC.BAR.INIT 2, 1",
                  loc(4, "empty.wait(1)"), "ASYNC.BAR.WAIT 2, 1"])
    run(text, [np.zeros(1)], sanitize=True)
    msg = report(text + lines([loc(5, "empty.wait(1)"), "ASYNC.BAR.WAIT 2, 1"]), [np.zeros(1)])
    assert "waits on a phase of AsyncBarrier 2 it has already waited for" in msg
    assert "pc 2: ASYNC.BAR.WAIT 2, 1    // t.py:5  empty.wait(1)" in msg
    assert "the earlier wait: pc 1: ASYNC.BAR.WAIT 2, 1    // t.py:4  empty.wait(1)" in msg


def test_more_arrivals_than_initialized_are_reported(rng):
    args, grid = gemm_args(rng)
    text = gemm_listing(64, 64, 128).replace("@P0 ASYNC.BAR.INIT 2, 4", "@P0 ASYNC.BAR.INIT 2, 2")
    msg = report(text, args, grid)
    assert msg.startswith("t.py:24:1: device fault: kernel 'gemm': AsyncBarrier 2 arrived on by "
                          "more warps than initialized (2): this ASYNC.BAR.ARRIVE brings 4 "
                          "warps, but the phase waits for 2 more")
    assert "initialized by: pc 10: @P0 ASYNC.BAR.INIT 2, 2    // t.py:10  full, empty" in msg
    assert "ASYNC.BAR.ARRIVE RZ, R34    // t.py:24  empty[s].arrive()" in msg


# ---------------------------------------------------------------- (f) fences, uninitialized operands
def test_sqmma_operands_written_without_a_fence_are_reported(rng):
    ta, tb, acc, k = ROWS[0]
    A, B = operand(rng, ta, (128, k)), operand(rng, tb, (k, 128))
    img, da, db = stored(A, B, k, 0, 0)
    text, _ = sqmma_listing([(64, 32, 0, 0)], k, ta, tb, acc, 0, (da, db), fence=False)
    args = [img.reshape(1, -1), np.zeros(2048, np.float32), np.zeros(2048, np.float32)]
    run(text, args)
    msg = report(text, args)
    assert "the SQMMA reads shared memory written by warp 0 with no FENCE.ASYNC.SHARED by the " \
           "writer in between" in msg
    assert "the write: pc " in msg and "LSU.ST.SHARED.B32 [R[164:180]], R[232:248]" in msg
    assert "// t.py:20  acc = dot(a, b, acc)" in msg


def test_sqmma_operands_never_written_are_reported():
    text = sqmma_squads(threads=128).replace("        FENCE.ASYNC.SHARED\n", "")
    text = text.replace("LSU.ST.SHARED.B32 [R[164:180]], R[232:248]", "NOP")
    msg = report(text, [np.zeros((1, 32768), np.uint8), np.zeros(2048, np.float32)])
    assert "uninitialized shared memory read: the SQMMA reads shared address 0x0, which no " \
           "thread of the block has written" in msg


def test_bf16_gemm_result_unchanged_under_the_sanitizer(rng):
    """The sanitizer observes; the numbers are the same."""
    A = operand(rng, "BF16", (64, 64))
    B = operand(rng, "BF16", (64, 64))
    c1, c2 = (np.full((64, 64), np.nan, np.float32) for _ in range(2))
    run(gemm_listing(64, 64, 64), [A, B, c1])
    run(gemm_listing(64, 64, 64), [A, B, c2], sanitize=True)
    assert np.array_equal(c1, c2) and not np.isnan(c1).any()
