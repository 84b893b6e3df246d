"""Sensitivity of the cycle model (issue 12 §4): changes a kernel writer makes, and
what-if machine files, move the modelled time in the direction real hardware would, by a
rough size each test states (the measured figure in its comment)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.machines as machines
import mutile.language.pinghu as ph
from mutile.kernels import pinghu_gemm as pg

from .timing_kit import (chase, check_record, listing, profiled, timed, timing_of,
                         write_machine)


# ---------------------------------------------------------------- software pipelining
def test_gemm_stages_hide_the_tme_latency(rng):
    """64x64 tile, K = 1024 (16 k-steps): with one stage every step waits for its copies
    (~660 cycles of TME latency); three stages keep two steps of copies in flight.
    Expected: at least 40% fewer cycles (measured 17017 -> 7068, -58%), most of the
    AsyncBarrier wait gone."""
    a = rng.standard_normal((64, 1024)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((1024, 64)).astype(ml_dtypes.bfloat16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rec = {}
    for stages in (1, 2, 3):
        c, (r,) = profiled(lambda: pg.gemm(a, b, stages=stages))
        np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)
        check_record(r)
        rec[stages] = r
    assert rec[1].cycles > rec[2].cycles > rec[3].cycles
    assert rec[3].cycles < 0.6 * rec[1].cycles
    assert rec[3].stalls["barrier"] < 0.25 * rec[1].stalls["barrier"]
    # the same flops in fewer cycles: utilization rises by the inverse ratio
    assert rec[3].utilization["SQMMA"] > rec[1].utilization["SQMMA"] / 0.6


# ---------------------------------------------------------------- bank conflicts
@mutile.jit
def rows_through_shared(X, Y, R: ml.constexpr, C: ml.constexpr, SWIZZLE: ml.constexpr):
    """Y = X through a shared R x C f32 tile. With one warp and R = 32 each thread holds
    one row, so each shared access of the warp touches one column: lanes 4*C bytes
    apart, all in one bank unless the tile is swizzled."""
    offs = ml.arange(0, R)[:, None] * C + ml.arange(0, C)[None, :]
    buf = ph.alloc_shared((R, C), ml.float32, swizzle=SWIZZLE)
    buf.store(ml.load(X + offs))
    ph.sync_warps()
    ml.store(Y + offs, buf.load())


def test_swizzled_tile_read_column_wise_beats_the_unswizzled_one(rng):
    """A 32 x 64 f32 tile (256-byte rows) read a column at a time (and written four
    columns at a time). Unswizzled: every column is 32 words of one bank, 32 wavefronts
    per access. The 16-byte swizzle spreads a column over 8 bank groups: 4 wavefronts
    (the 32- and 64-byte swizzles: 8 and 16). Expected: 8x fewer wavefronts (2560 -> 320),
    at least 2x fewer cycles."""
    t = timing_of(None)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    fronts, cycles = {}, {}
    for sw in (0, 16, 32, 64):
        y = np.full_like(x, np.nan)
        _, (r,) = profiled(lambda: rows_through_shared[(1,)](x, y, R=32, C=64, SWIZZLE=sw,
                                                             num_warps=1, backend="pinghu"))
        np.testing.assert_array_equal(y, x)
        check_record(r)
        fronts[sw] = r.utilization["SHARED"] * r.cycles * t.mp_count
        cycles[sw] = r.cycles
    # a load per element row; the store moves a 16-byte chunk per lane (LSU.ST.SHARED.B128,
    # four columns at a time), whose lanes' conflicts fall in the same ratios
    accesses = 32 * 64 / 32 + 32 * 64 * 4 / 16 / 32
    assert fronts[0] == pytest.approx(accesses * 32)
    assert fronts[16] == pytest.approx(accesses * 4)
    assert fronts[32] == pytest.approx(accesses * 8)
    assert fronts[64] == pytest.approx(accesses * 16)
    assert cycles[0] > 2 * cycles[16]
    assert cycles[0] > cycles[64] > cycles[32] > cycles[16]


# ---------------------------------------------------------------- latency hiding
def test_more_warps_hide_the_latency_of_a_dependent_loop(rng):
    """128 chains of 8 dependent loads, in one block: 1 warp following 4 chains each,
    2 warps 2, or 4 warps 1. The warps' chains overlap, so time falls with the warps.
    Expected: 4 warps at least 3x faster than 1 (measured 16158 -> 4241 cycles)."""
    nxt = rng.permutation(1 << 16).astype(np.int32)
    ref = np.arange(128)
    for _ in range(8):
        ref = nxt[ref]
    cycles = {}
    for warps in (1, 2, 4):
        out = np.full(128, -1, np.int32)
        _, (r,) = profiled(lambda: chase[(1,)](nxt, out, 8, CHAINS=4 // warps, BLOCK=32 * warps,
                                               num_warps=warps, backend="pinghu"))
        np.testing.assert_array_equal(out, ref)
        check_record(r)
        assert r.bound == "latency" and r.stalls["memory"] > 0.9 * sum(r.stalls.values())
        cycles[warps] = r.cycles
    assert cycles[1] > 1.8 * cycles[2] > 1.8 * 1.8 * cycles[4]
    assert cycles[1] > 3 * cycles[4]


# ---------------------------------------------------------------- bandwidth
@mutile.jit
def copy(X, Y, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs))


def test_streaming_copy_reaches_hbm_bandwidth(rng):
    """A 7 MiB copy over 7168 blocks (8 waves of 896): sampled (the first wave simulated),
    bound by HBM. Expected: at least 80% of the 1.6 TB/s (measured 100%)."""
    blocks, block = 56 * 16 * 8, 256
    x = rng.standard_normal(blocks * block).astype(np.float32)
    y = np.full_like(x, np.nan)
    _, (r,) = profiled(lambda: copy[(blocks,)](x, y, BLOCK=block, num_warps=4,
                                               backend="pinghu"), sample=None)
    check_record(r)
    sample_waves = machines.default().value("model", "sample_waves")
    assert r.sampled and r.waves == 8 and r.blocks_simulated == sample_waves * r.blocks // 8
    assert r.hbm_bytes == pytest.approx(2 * x.nbytes, rel=1e-4)   # read, written back
    assert r.utilization["HBM"] >= 0.8
    assert r.hbm_gbps >= 0.8 * r.peak_hbm_gbps
    assert r.bound == "HBM"
    done = r.blocks_simulated * block                         # the simulated blocks' part
    np.testing.assert_array_equal(y[:done], x[:done])


# ---------------------------------------------------------------- occupancy
def occupancy_listing(regs: int) -> str:
    """Each thread of 32 per block copies one word; ``regs`` registers per thread
    declared (255: a kernel whose live tiles fill every thread's share of the register
    file)."""
    body = """
        S2R R1, SR_TID.X
        S2R R2, SR_CTAID.X
        ALU.IMAD.S32 R1, R2, 32, R1
        ALU.IMAD.WIDE.S32 R4, R1, 4, c[0x0]
        LSU.LD.GLOBAL.B32 R3, [R4]
        ALU.IMAD.WIDE.S32 R4, R1, 4, c[0x8]
        LSU.ST.GLOBAL.B32 [R4], R3"""
    return listing(body, threads=32, regs=regs, params=(("X", "ptr"), ("Y", "ptr")))


def test_register_heavy_kernel_loses_occupancy_and_time(rng):
    """The same one-warp copy with 16 or 255 registers per thread over 64 x 56 blocks
    (each run simulates its first wave, sample="wave"). Light: 32 blocks per MP (the
    block limit), 2 waves. Heavy: 65536 / (255 * 32) = 8 blocks per MP (limit
    "registers"), 8 waves. Each wave is latency-bound (one load, one store: ~540 cycles;
    even the light wave moves only 460 KB, ~320 cycles of HBM). Expected: the heavy one at
    least 3x slower (measured 4x: 4288 vs 1072 cycles)."""
    t = timing_of(None)
    blocks = 64 * t.mp_count
    rec = {}
    for regs in (16, 255):
        x = rng.standard_normal(32 * blocks).astype(np.float32)
        y = np.full_like(x, np.nan)
        r = timed(occupancy_listing(regs), [x, y], (blocks, 1, 1), sample="wave")
        check_record(r)
        done = r.blocks_simulated * 32                  # the simulated blocks' words
        np.testing.assert_array_equal(y[:done], x[:done])
        assert np.isnan(y[done:]).all()
        rec[regs] = r
    light, heavy = rec[16], rec[255]
    assert heavy.occupancy["blocks_per_mp"] == t.occupancy["register_file"] // (255 * 32) == 8
    assert heavy.occupancy["limit"] == "registers"
    assert light.occupancy["blocks_per_mp"] == 32 and light.occupancy["limit"] == "blocks"
    assert (light.waves, heavy.waves) == (2, 8)
    assert heavy.occupancy["fraction"] < light.occupancy["fraction"]
    assert heavy.bound == light.bound == "latency"
    assert heavy.hbm_bytes == pytest.approx(light.hbm_bytes, rel=1e-3)   # the same work
    assert heavy.cycles > 3 * light.cycles


# ---------------------------------------------------------------- what-if machine files
@mutile.jit
def tme_stream(x_desc, n, BM: ml.constexpr, BN: ml.constexpr, STAGES: ml.constexpr):
    """One warp streams n boxes of BM x BN f32 through STAGES shared buffers by TME,
    STAGES copies in flight (it only waits for them: the copies are the whole work)."""
    bufs = ph.alloc_shared((STAGES, BM, BN), x_desc.dtype)
    full = ph.alloc_barriers(STAGES, arrive_warps=1)
    row0 = ml.program_id(0) * n * BM
    for s in ml.static_range(STAGES):
        if s < n:
            ph.barrier_expect_tx(full[s], BM * BN * 4)
            ph.tme_load(x_desc, [row0 + s * BM, 0], bufs[s], full[s])
    for k in range(n):
        s = k % STAGES
        ph.barrier_wait(full[s], (k // STAGES) & 1)
        nk = k + STAGES
        if nk < n:
            ph.barrier_expect_tx(full[s], BM * BN * 4)
            ph.tme_load(x_desc, [row0 + nk * BM, 0], bufs[s], full[s])


def _stream_cycles(rng, stages, machine):
    x = rng.standard_normal((64 * 16, 128)).astype(np.float32)
    d = mutile.TensorDescriptor(x, [64, 128])
    _, (r,) = profiled(lambda: tme_stream[(1,)](d, 16, BM=64, BN=128, STAGES=stages,
                                                num_warps=1, backend="pinghu"),
                       machine=machine)
    check_record(r)
    return r


@pytest.fixture
def what_if(tmp_path):
    return {"tme2x": write_machine(tmp_path, "tme2x.toml", "[memory]\ntme_bytes_per_cycle = "
                                   "{ value = 256, source = \"what if: twice the TME rate\" }\n"),
            "hbm_half": write_machine(tmp_path, "hbm_half.toml", "[memory]\nhbm_latency = "
                                      "{ value = 250, source = \"what if: half the latency\" }\n")}


def test_twice_the_tme_rate_speeds_up_a_tme_bound_stream(rng, what_if):
    """16 copies of 32 KiB, 5 in flight: the engine's 256 cycles per copy dominate (the
    ~860 cycles of latency are hidden). Expected: twice the TME rate at least 30% faster
    (measured 4815 -> 3109 cycles), half the HBM latency under 10% (measured 4565)."""
    base = _stream_cycles(rng, 5, None)
    fast = _stream_cycles(rng, 5, what_if["tme2x"])
    near = _stream_cycles(rng, 5, what_if["hbm_half"])
    assert fast.cycles < 0.7 * base.cycles
    assert 0.9 * base.cycles < near.cycles < base.cycles
    # the busy engine: TME busy most of the time at the shipped rate
    t = timing_of(None)
    assert base.utilization["TME"] * base.cycles * t.mp_count == pytest.approx(
        16 * 64 * 128 * 4 / t.tme_per_cycle)


def test_half_the_hbm_latency_speeds_up_a_latency_bound_stream(rng, what_if):
    """The same stream with one copy in flight: each waits its 100 + 500 + 256 cycles.
    Expected: half the HBM latency at least 20% faster (measured 14201 -> 10201, the
    250 cycles saved 16 times), twice the TME rate less (measured 12153: 128 of 856)."""
    base = _stream_cycles(rng, 1, None)
    near = _stream_cycles(rng, 1, what_if["hbm_half"])
    fast = _stream_cycles(rng, 1, what_if["tme2x"])
    assert base.cycles - near.cycles == pytest.approx(16 * 250, rel=0.01)
    assert near.cycles < 0.8 * base.cycles
    assert near.cycles < fast.cycles < base.cycles
