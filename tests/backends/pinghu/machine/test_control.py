"""Control flow on the interpreter: divergence and reconvergence (SSY/BRA/SYNC/EXIT),
loops whose lanes leave at different iterations, block-uniform branches that differ
between blocks, BAR.SYNC with shared-memory exchange across warps, special registers,
guards (plain and predicate runs), waves of resident blocks, stats."""
import numpy as np
import pytest

from mutile.backends.pinghu.machine.state import decode
from mutile.backends.pinghu.machine.scheduler import execute
from mutile.backends.pinghu.machine.device import Machine, MachineParams

from ....conftest import assert_bits_equal, random_data
from .interp_kit import binary, header, run

COVERS = {"BRA", "SSY", "SYNC", "EXIT", "NOP", "BAR.SYNC", "S2R"}
STORE_R4 = """        S2R R1, SR_CTAID.X
        S2R R0, SR_TID.X
        ALU.IMAD.S32 R1, R1, {threads}, R0
        ALU.IMAD.WIDE.S32 R2, R1, 4, c[0x0]
        LSU.ST.GLOBAL.B32 [R2], R4
"""


def test_if_else_and_loop_divergence():
    """Even lanes take the then-path, odd the else-path; a loop leaves lanes at different
    iterations (lane t runs t % 5 + 1 iterations); everything reconverges."""
    text = header([("Y", "ptr")]) + """        S2R R0, SR_TID.X
        ALU.LOP.AND.B32 R1, R0, 1
        ALU.ISETP.EQ.S32 P0, R1, 0
        SSY L_join
        @!P0 BRA L_else
        ALU.IADD.S32 R4, R0, 1000
        SYNC
L_else:
        ALU.IADD.S32 R4, R0, 2000
        SYNC
L_join:
        ALU.MOV.IMM R5, 0
        ALU.MOV.IMM R6, 0
        ALU.IREM.S32 R7, R0, 5
        SSY L_exit
L_head:
        ALU.ISETP.GT.S32 P1, R6, R7
        @P1 SYNC
        ALU.IADD.S32 R5, R5, R6
        ALU.IADD.S32 R6, R6, 1
        BRA L_head
L_exit:
        ALU.IMAD.S32 R4, R5, 100000, R4
""" + STORE_R4.format(threads=64)
    y = np.full(128, -1, np.int32)
    run(text, [y], (2, 1, 1))
    t = np.arange(128) % 64
    m = t % 5
    assert_bits_equal(y, (np.where(t % 2 == 0, t + 1000, t + 2000)
                          + 100000 * (m * (m + 1) // 2)).astype(np.int32), "divergence")


def test_nested_divergence_with_early_exit():
    """Lanes exit inside a divergent branch of a loop; the others finish the loop, the
    exited lanes leave every stack entry (no store from them)."""
    text = header([("Y", "ptr")]) + """        S2R R0, SR_TID.X
        ALU.MOV.IMM R4, 0
        ALU.MOV.IMM R6, 0
        SSY L_done
L_loop:
        ALU.ISETP.GE.S32 P0, R6, 6
        @P0 SYNC
        ALU.LOP.AND.B32 R7, R0, 7
        ALU.ISETP.EQ.S32 P1, R7, R6
        SSY L_next
        @!P1 BRA L_skip
        ALU.ISETP.EQ.S32 P2, R7, 3
        @P2 EXIT
        ALU.IADD.S32 R4, R4, 100
        SYNC
L_skip:
        ALU.IADD.S32 R4, R4, 1
        SYNC
L_next:
        ALU.IADD.S32 R6, R6, 1
        BRA L_loop
L_done:
""" + STORE_R4.format(threads=64)
    y = np.full(64, -1, np.int32)
    run(text, [y], (1, 1, 1))
    t7 = np.arange(64) & 7
    want = np.where(t7 < 6, 100 + 5, 6).astype(np.int32)
    want[t7 == 3] = -1
    assert_bits_equal(y, want, "early exit")


def test_blocks_take_different_block_uniform_paths():
    """Block-uniform branches on SR_CTAID.X: even blocks add, odd blocks loop ctaid times;
    warps of different blocks sit at different pcs and still finish correctly."""
    text = header([("Y", "ptr")], threads=128) + """        S2R R0, SR_TID.X
        S2R R8, SR_CTAID.X
        ALU.LOP.AND.B32 R9, R8, 1
        ALU.ISETP.EQ.S32 P0, R9, 0
        @P0 BRA L_even
        ALU.MOV.IMM R4, 0
        ALU.MOV.IMM R6, 0
L_loop:
        ALU.ISETP.GE.S32 P1, R6, R8
        @P1 BRA L_store
        ALU.IADD.S32 R4, R4, R0
        ALU.IADD.S32 R6, R6, 1
        BRA L_loop
L_even:
        ALU.IMAD.S32 R4, R8, 1000, R0
L_store:
""" + STORE_R4.format(threads=128)
    y = np.full(7 * 128, -1, np.int32)
    stats = run(text, [y], (7, 1, 1))
    b, t = np.divmod(np.arange(7 * 128), 128)
    assert_bits_equal(y, np.where(b % 2 == 0, b * 1000 + t, b * t).astype(np.int32), "paths")
    assert stats.blocks == 7


@pytest.mark.parametrize("sanitize", [False, True])
def test_barrier_exchanges_shared_memory_across_warps(sanitize, rng):
    """Each thread writes shared[tid]; after BAR.SYNC it reads the slot of the thread 32
    further on (another warp), in a block-uniform loop of ctaid + 1 rounds."""
    x = random_data(np.int32, (3 * 128,), rng)
    text = header([("Y", "ptr"), ("X", "ptr")], threads=128, shared=512) + """\
        S2R R0, SR_TID.X
        S2R R8, SR_CTAID.X
        ALU.IMAD.S32 R1, R8, 128, R0
        ALU.IMAD.WIDE.S32 R2, R1, 4, c[0x8]
        LSU.LD.GLOBAL.B32 R4, [R2]
        ALU.IADD.S32 R5, R0, 32
        ALU.LOP.AND.B32 R5, R5, 127
        ALU.SHL.B32 R5, R5, 2
        ALU.SHL.B32 R7, R0, 2
        ALU.MOV.IMM R6, 0
L_round:
        LSU.ST.SHARED.B32 [R7], R4
        BAR.SYNC 0
        LSU.LD.SHARED.B32 R4, [R5]
        BAR.SYNC 0
        ALU.IADD.S32 R6, R6, 1
        ALU.ISETP.LE.S32 P0, R6, R8
        @P0 BRA L_round
""" + STORE_R4.format(threads=128)
    y = np.full(3 * 128, -1, np.int32)
    run(text, [y, x], (3, 1, 1), sanitize=sanitize)
    b, t = np.divmod(np.arange(3 * 128), 128)
    assert_bits_equal(y, x[b * 128 + (t + 32 * (b + 1)) % 128], "exchange")


def test_exited_warps_do_not_hold_a_barrier():
    """Warp 1 exits; warp 0 passes BAR.SYNC (the barrier waits only for non-exited
    threads)."""
    text = header([("Y", "ptr")]) + """        S2R R0, SR_TID.X
        S2R R9, SR_WARPID
        ALU.ISETP.EQ.S32 P0, R9, 1
        @P0 EXIT
        BAR.SYNC 3
        ALU.MOV.B32 R4, R0
""" + STORE_R4.format(threads=64)
    y = np.full(64, -1, np.int32)
    run(text, [y], (1, 1, 1))
    assert_bits_equal(y, np.where(np.arange(64) < 32, np.arange(64), -1).astype(np.int32), "")


def test_special_registers():
    """Every special register in a 3-D grid of 128-thread blocks."""
    names = ["SR_TID.X", "SR_LANEID", "SR_WARPID", "SR_SQUADID", "SR_CTAID.X", "SR_CTAID.Y",
             "SR_CTAID.Z", "SR_NCTAID.X", "SR_NCTAID.Y", "SR_NCTAID.Z", "SR_NTID.X"]
    grid = (2, 3, 2)
    nb = 12
    body = """        S2R R0, SR_TID.X
        S2R R10, SR_CTAID.X
        S2R R11, SR_CTAID.Y
        S2R R12, SR_CTAID.Z
        ALU.IMAD.S32 R13, R12, 3, R11
        ALU.IMAD.S32 R13, R13, 2, R10
        ALU.IMAD.S32 R1, R13, 128, R0
"""
    for i, n in enumerate(names):
        body += f"""        S2R R4, {n}
        ALU.IADD.S32 R5, R1, {i * nb * 128}
        ALU.IMAD.WIDE.S32 R2, R5, 4, c[0x0]
        LSU.ST.GLOBAL.B32 [R2], R4
"""
    y = np.full((len(names), nb, 128), -1, np.int32)
    run(header([("Y", "ptr")], threads=128) + body, [y], grid)
    blk, t = np.meshgrid(np.arange(nb), np.arange(128), indexing="ij")
    want = [t, t % 32, t // 32, t // 128, blk % 2, (blk // 2) % 3, blk // 6,
            np.full_like(t, 2), np.full_like(t, 3), np.full_like(t, 2), np.full_like(t, 128)]
    for n, got, w in zip(names, y, want):
        assert_bits_equal(got, w.astype(np.int32), n)


def test_guards_plain_negated_and_predicate_runs(rng):
    """@P on a run, @!P[...] element-wise, @PT always, @!PT never; unguarded elements keep
    their old values."""
    x = random_data(np.float32, (4, 64), rng)
    text = header([("Y", "ptr"), ("X", "ptr")]) + """        S2R R0, SR_TID.X
        ALU.IOTA.S32 R[16:20], R0, 64
        ALU.IMAD.WIDE.S32 R[24:32], R[16:20], 4, c[0x8]
        LSU.LD.GLOBAL.B32 R[8:12], [R[24:32]]
        ALU.IOTA.S32 R[32:36], 0, 1
        ALU.LOP.AND.B32 R40, R0, 3
        ALU.ISETP.LT.S32 P[0:4], R[32:36], R40
        ALU.ISETP.LT.S32 P7, R0, 16
        @!P[0:4] ALU.FADD.F32 R[8:12], R[8:12], 1.0
        @P7 ALU.FMUL.F32 R[8:12], R[8:12], 2.0
        @PT ALU.FADD.F32 R[8:12], R[8:12], 0.5
        @!PT ALU.MOV.IMM R[8:12], 0
        ALU.IMAD.WIDE.S32 R[24:32], R[16:20], 4, c[0x0]
        LSU.ST.GLOBAL.B32 [R[24:32]], R[8:12]
"""
    y = np.full((4, 64), np.nan, np.float32)
    run(text, [y, x], (1, 1, 1))
    e, t = np.meshgrid(np.arange(4), np.arange(64), indexing="ij")
    want = np.where(e < (t & 3), x, x + np.float32(1))
    want = np.where(t < 16, want * np.float32(2), want) + np.float32(0.5)
    assert_bits_equal(y, want.astype(np.float32), "guards")


def test_waves_of_resident_blocks_and_stats():
    """More blocks than fit at once run in waves with the same results; stats count
    blocks, waves and instructions per unit; decoding is cached on the program."""
    text = header([("Y", "ptr")]) + """        S2R R0, SR_TID.X
        S2R R8, SR_CTAID.X
        ALU.IMAD.S32 R4, R8, 3, R0
        NOP
""" + STORE_R4.format(threads=64)
    p = binary(text)
    y = np.full(10 * 64, -1, np.int32)
    small = Machine(MachineParams(max_resident_threads=192))
    stats = execute(p, [y], (10, 1, 1), machine=small)
    b, t = np.divmod(np.arange(640), 64)
    assert_bits_equal(y, (b * 3 + t).astype(np.int32), "waves")
    assert (stats.blocks, stats.waves) == (10, 4)
    assert stats.warp_instructions == 20 * (len(p.instructions) + 1)
    assert stats.by_unit == {"S2R": 80, "ALU": 60, "LSU": 20, "BRA": 20 * 2}   # NOP, EXIT
    assert decode(p) is decode(p)
