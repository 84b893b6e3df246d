"""Sampled launches (issue 12 §2): on mid-size problems -- a machine of 4 MPs, so ~10
waves stay cheap to simulate in full -- the estimate from the sampled waves is within
3% of simulating every block, for the TME GEMM and for pointer kernels (a latency-bound
chase, and the causal attention, whose blocks do unequal work by row); and the sampling
modes set ``record.sampled`` as documented."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.machines as machines
from mutile.kernels import attention_basic as fa
from mutile.kernels import pinghu_gemm as pg

from .timing_kit import chase, check_record, profiled, write_machine

FOUR_MPS = '[device]\nmp_count = { value = 4, source = "test: a small machine" }\n'
SAMPLE_WAVES = machines.default().value("model", "sample_waves")  # "wave" simulates


@pytest.fixture(scope="module")
def four_mps(tmp_path_factory):
    return write_machine(tmp_path_factory.mktemp("mp4"), "mp4.toml", FOUR_MPS)


def _gemm():
    """TME GEMM 640 x 704 x 2048: 110 blocks of 64 x 64, 3 per MP: 9 full waves and a
    partial one."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((640, 2048)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((2048, 704)).astype(ml_dtypes.bfloat16)
    return lambda: pg.gemm(a, b, stages=3)


def _causal_attention():
    """Causal attention, 38 heads x 128 rows: 152 blocks, 4 per MP (9.5 waves); a block's
    work grows with its row block (1 to 4 key blocks), and row block x runs on MP x."""
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((38, 128, 32)).astype(np.float32) for _ in range(3))
    return lambda: fa.attention(q, k, v, causal=True, block_m=32, block_n=32,
                                backend="pinghu")


def _chase():
    """1220 blocks of 2 warps, each thread 4 dependent loads at random: latency-bound,
    32 blocks per MP (9.5 waves)."""
    rng = np.random.default_rng(13)
    nxt = rng.permutation(1 << 20).astype(np.int32)
    out = np.zeros(1220 * 64, np.int32)
    return lambda: chase[(1220,)](nxt, out, 4, CHAINS=1, BLOCK=64, num_warps=2,
                                  backend="pinghu")


KERNELS = {"gemm": _gemm, "causal_attention": _causal_attention, "chase": _chase}


@pytest.fixture(scope="module", params=sorted(KERNELS))
def full_and_sampled(request, four_mps):
    launch = KERNELS[request.param]()
    _, (full,) = profiled(launch, machine=four_mps, sample=False)
    _, (wave,) = profiled(launch, machine=four_mps, sample="wave")
    _, (auto,) = profiled(launch, machine=four_mps, sample=None)
    return request.param, launch, full, wave, auto


def test_one_wave_estimates_the_whole_grid_within_3_percent(full_and_sampled):
    name, _, full, wave, auto = full_and_sampled
    for r in (full, wave, auto):
        check_record(r)
    per_wave = full.occupancy["blocks_per_mp"] * 4
    assert full.waves >= 9 and full.blocks % per_wave != 0     # and a partial last wave
    assert not full.sampled and full.blocks_simulated == full.blocks
    assert wave.sampled and wave.blocks_simulated == SAMPLE_WAVES * per_wave
    assert wave.cycles == pytest.approx(full.cycles, rel=0.03), name
    # the totals are extrapolated from the simulated blocks
    assert wave.flops == pytest.approx(full.flops, rel=1e-9)
    assert wave.warp_cycles == pytest.approx(full.warp_cycles, rel=0.05)


# Kernels whose later waves reuse what earlier waves brought into L2 more than the
# sampled waves do (the chase's random sectors: each wave finds more of them in L2): the
# unsimulated waves are estimated from the last sampled wave, so the sampled HBM bytes are
# too many. Known limitation of the sampling (the chase's cycles are not HBM-bound);
# strict, so this list must shrink when the estimate learns about reuse.
COLD_SAMPLE = {"chase"}


def test_sampled_hbm_bytes(full_and_sampled, request):
    name, _, full, wave, _ = full_and_sampled
    if name in COLD_SAMPLE:
        request.applymarker(pytest.mark.xfail(strict=True, reason="reuse across waves"))
    assert wave.hbm_bytes == pytest.approx(full.hbm_bytes, rel=0.03)


def test_automatic_sampling_of_a_large_grid(full_and_sampled):
    """sample=None: more than auto_sample_waves (4) waves -> the first wave simulated."""
    _, _, full, wave, auto = full_and_sampled
    assert full.waves > 4
    assert auto.sampled and auto.blocks_simulated == wave.blocks_simulated
    assert auto.cycles == wave.cycles


def test_a_number_of_blocks(full_and_sampled, four_mps):
    name, launch, full, wave, _ = full_and_sampled
    n = wave.blocks_simulated + 5                    # a wave and part of the next
    _, (r,) = profiled(launch, machine=four_mps, sample=n)
    check_record(r)
    assert r.sampled and r.blocks_simulated == n
    assert r.cycles == pytest.approx(full.cycles, rel=0.03), name


@mutile.jit
def scale(X, Y, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs) * 2.0)


@pytest.mark.parametrize("waves,sample,sampled", [(4, None, False), (5, None, True),
                                                  (12, False, False), (2, 3, True),
                                                  (3, "wave", True), (2, "wave", False)],
                         ids=["4-waves-auto", "5-waves-auto", "12-waves-off", "3-blocks",
                              "wave-of-3", "wave-of-2"])
def test_sampling_modes(rng, four_mps, waves, sample, sampled):
    per_wave = 4 * 32                                # 4 MPs x 32 one-warp blocks
    blocks = waves * per_wave
    x = rng.standard_normal(32 * blocks).astype(np.float32)
    y = np.full_like(x, np.nan)
    _, (r,) = profiled(lambda: scale[(blocks,)](x, y, BLOCK=32, num_warps=1,
                                                backend="pinghu"),
                       machine=four_mps, sample=sample)
    check_record(r)
    assert r.occupancy["blocks_per_mp"] == 32 and r.waves == waves
    assert r.sampled is sampled
    sampled_n = SAMPLE_WAVES * per_wave
    want = {None: sampled_n if sampled else blocks, False: blocks, "wave": sampled_n}.get(
        sample, sample)
    assert r.blocks_simulated == min(want, blocks)
    done = 32 * r.blocks_simulated
    np.testing.assert_array_equal(y[:done], x[:done] * np.float32(2.0))
    assert np.isnan(y[done:]).all()                  # blocks not simulated do not run
