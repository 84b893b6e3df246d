"""Micro-benchmarks of the cycle model, one per unit, as ISA listings (issue 12 §4).

Each measures a slope: the same listing with its body repeated ``N`` and ``2N`` times, so
``cycles(2N) - cycles(N)`` is the cost of ``N`` repetitions alone. A dependent chain (each
instruction reads the previous one's result) costs ``N * latency``; an independent stream
on one warp ``N * ii`` (the pipe's initiation interval); 32 warps of independent streams
fill the MP's pipes, ``N * warps * ii / subcores``. Every expected figure is read from the
machine file, and every test runs twice: on the shipped file and on a what-if file whose
latencies, intervals and memory figures all differ, so an equality cannot be a
coincidence of the defaults. TME copies and SQMMAs are timed in the pipelined GEMM
through the runtime (their slices in the record)."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from mutile.kernels import pinghu_gemm as pg

from .timing_kit import listing, pointers, profiled, slope, timed, timing_of, write_machine

N = 16
WHAT_IF = """
[latency.cycles]
source = "test: every latency changed"
[latency.cycles.value]
alu = 5
alu64 = 7
fp64 = 11
imul = 9
div = 45
sfu = 19
cvt = 8
ld_shared = 33
shfl = 23
bar = 25
sqmma = 40
[rates.ii]
source = "test: every interval changed"
value = { alu64 = 3, fp64 = 6, imul = 3, div = 17, sfu = 5, cvt = 3, shfl = 3, lsu = 2 }
[rates.sqmma_flops_per_cycle]
value = { bf16 = 4096, e4m3 = 32768 }
[memory]
hbm_latency = { value = 620, source = "test" }
l2_latency = { value = 270, source = "test" }
l1_bytes_per_cycle = { value = 64, source = "test" }
tme_bytes_per_cycle = { value = 256, source = "test" }
tme_latency = { value = 70, source = "test" }
[device]
mp_count = { value = 1, source = "test: one MP, so utilization is that MP's" }
"""
ONE_MP = '[device]\nmp_count = { value = 1, source = "test: one MP" }\n'


@pytest.fixture(params=["default", "what-if"])
def machine(request, tmp_path):
    """A machine file path: the shipped numbers on one MP, or the what-if file."""
    return write_machine(tmp_path, f"{request.param}.toml",
                         ONE_MP if request.param == "default" else WHAT_IF)


def out_array():
    return np.zeros(64, np.float32)


# (instruction, latency class, pipe): the chain reads and writes R2 (and R3 for pairs)
CHAINS = [("ALU.FADD.F32 R2, R2, 1.5", "alu", "alu"),
          ("ALU.IADD.S32 R2, R2, 7", "alu", "alu"),
          ("ALU.IMUL.S32 R2, R2, 3", "imul", "imul"),
          ("ALU.IDIV.S32 R2, R2, 3", "div", "div"),
          ("ALU.IADD.S64 R2, R2, 5", "alu64", "alu64"),
          ("ALU.FADD.F64 R2, R2, R4", "fp64", "fp64"),
          ("SFU.EX2.F32 R2, R2", "sfu", "sfu"),
          ("CVT.F16.F32 R2, R2", "cvt", "cvt"),
          ("SHFL.IDX.B32 R2, R2, 3", "shfl", "shfl")]
PROLOGUE = "ALU.MOV.IMM R2, 0.5\nALU.MOV.IMM R3, 0\nALU.MOV.IMM R4, 0\nALU.MOV.IMM R5, 0"


def chain(ins: str, threads: int = 32):
    return lambda n: listing(PROLOGUE + "\n" + "\n".join([ins] * n), threads=threads)


def stream(ins: str, threads: int = 32):
    """``ins`` with its destination rotating over R[8..40) (pairs: even registers) and
    its sources R2, R4: no instruction reads another's result."""
    def make(n):
        body = [re.sub(r"^(\S+) R2,", lambda m: f"{m.group(1)} R{8 + 2 * (i % 16)},", ins)
                for i in range(n)]
        return listing(PROLOGUE + "\n" + "\n".join(body), threads=threads)
    return make


@pytest.mark.parametrize("ins,cls,pipe", CHAINS, ids=[c[0].split()[0] for c in CHAINS])
def test_dependent_chain_measures_the_latency(machine, ins, cls, pipe):
    t = timing_of(machine)
    s, a, b = slope(chain(ins), N, lambda: [out_array()], machine=machine)
    assert s == t.latency[cls]                       # e.g. alu 4, sfu 16, div 40 cycles
    # the wait is a scoreboard stall: latency - 1 cycles after each issue
    assert b.stalls["scoreboard"] - a.stalls["scoreboard"] == N * (t.latency[cls] - 1)
    assert b.issued - a.issued == N and a.bound == "latency"


@pytest.mark.parametrize("ins,cls,pipe", CHAINS, ids=[c[0].split()[0] for c in CHAINS])
def test_independent_stream_measures_the_initiation_interval(machine, ins, cls, pipe):
    t = timing_of(machine)
    ii = t.ii[pipe]
    s, a, b = slope(stream(ins), N, lambda: [out_array()], machine=machine)
    assert s == max(ii, 1.0)                         # e.g. sfu 4, fp64 8, alu 1 cycle
    assert b.stalls["issue"] - a.stalls["issue"] == N * (max(ii, 1.0) - 1)
    assert b.stalls["scoreboard"] == a.stalls["scoreboard"]


@pytest.mark.parametrize("ins,unit,pipe", [("SFU.EX2.F32 R2, R4", "SFU", "sfu"),
                                           ("ALU.FADD.F32 R2, R4, 1.5", "ALU", "alu"),
                                           ("ALU.FADD.F64 R2, R4, R4", "ALU", "fp64")],
                         ids=["SFU", "ALU", "fp64"])
def test_many_warps_reach_the_mp_throughput(machine, ins, unit, pipe):
    t = timing_of(machine)
    warps = 32
    per = warps * t.ii[pipe] / t.subcores           # e.g. SFU: 32 warps * 4 / 4 = 32
    s, a, b = slope(stream(ins, threads=32 * warps), N, lambda: [out_array()],
                    machine=machine)
    # the pipe, or the issue slots (ALU); the composition's windows (docs/cycle-model.md)
    # cost the prologue's latency once more when the stream is throughput-bound: within
    # 0.2% of the slope (fp64 measures 64.06 for 64)
    assert s == pytest.approx(max(per, warps / t.issue_per_cycle), rel=2e-3)
    assert b.bound in (unit, "ISSUE")
    # the one MP's unit is busy (almost) all the time: prologue and EXIT aside
    prologue = 4 * warps * t.ii["alu"] / t.subcores if unit == "ALU" else 0.0
    demand = 2 * N * warps * t.ii[pipe] / t.subcores + prologue
    assert b.utilization[unit] == pytest.approx(demand / b.cycles)
    assert b.utilization[unit] > 0.85
    # stalls: one warp alone would issue every ii cycles; the rest is contention
    assert b.stalls["issue"] > a.stalls["issue"]


# ---------------------------------------------------------------- shared memory
SHARED_CASES = [("B32", 4, 1), ("B32", 0, 1), ("B32", 8, 2), ("B32", 128, 32),
                ("B64", 8, 2), ("B64", 256, 32), ("B128", 16, 4)]


def shared_chain(kind: str, stride: int):
    """Each lane's shared word at ``laneid * stride`` holds its own address; the chain
    loads it into the address register, N times."""
    r = {"B32": "R2", "B64": "R2", "B128": "R4"}[kind]

    def make(n):
        body = ["S2R R1, SR_LANEID", f"ALU.IMUL.S32 {r}, R1, {stride}",
                f"LSU.ST.SHARED.{kind} [{r}], {r}"]
        body += [f"LSU.LD.SHARED.{kind} {r}, [{r}]"] * n
        return listing("\n".join(body), shared=max(32 * stride, 16) + 16)
    return make


@pytest.mark.parametrize("kind,stride,fronts", SHARED_CASES,
                         ids=[f"{k}-stride{s}" for k, s, _ in SHARED_CASES])
def test_shared_bank_conflicts_from_the_addresses(machine, kind, stride, fronts):
    t = timing_of(machine)
    s, a, b = slope(shared_chain(kind, stride), N, lambda: [out_array()], machine=machine)
    # latency grows by one cycle per extra wavefront: 4 B stride 30, 128 B stride 61
    assert s == t.latency["ld_shared"] + fronts - 1
    # SHARED demand: one MP-cycle per wavefront (util * cycles * MPs = wavefronts)
    waves = lambda r: r.utilization["SHARED"] * r.cycles * t.mp_count   # noqa: E731
    assert waves(b) - waves(a) == pytest.approx(N * fronts)
    assert b.stalls["scoreboard"] - a.stalls["scoreboard"] == N * (s - 1)


def test_lsu_pipe_interval_comes_from_the_file(machine):
    """An independent stream of shared stores issues every ``ii.lsu`` cycles."""
    t = timing_of(machine)

    def make(n):
        body = ["S2R R1, SR_LANEID", "ALU.SHL.B32 R2, R1, 2"]
        body += [f"LSU.ST.SHARED.B32 [R2+{128 * (i % 8)}], R1" for i in range(n)]
        return listing("\n".join(body), shared=1024)
    s, _, _ = slope(make, N, lambda: [out_array()], machine=machine)
    assert s == max(t.ii["lsu"], 1.0)


# ---------------------------------------------------------------- global memory
def chase_listing(n: int) -> str:
    """Every lane follows the pointer chain at P[0], n loads deep."""
    return listing("ALU.MOV.B64 R2, c[0x0]\n" + "\n".join(["LSU.LD.GLOBAL.B64 R2, [R2]"] * n))


def chase_memory(step: int, n: int) -> np.ndarray:
    """A chain whose element ``j * step`` points to element ``(j + 1) * step``: with a
    step of one 32-byte sector every load touches a fresh sector; step 0 points at
    itself (every load after the first hits L2)."""
    a = np.zeros(max(1, step) * (n + 2), np.int64)
    p = pointers(a)
    for j in range(n + 1):
        a[j * step] = p[(j + 1) * step]
    return a


@pytest.mark.parametrize("where", ["L2 hit", "HBM miss"])
def test_global_pointer_chase(machine, where):
    t = timing_of(machine)
    step = 0 if where == "L2 hit" else t.sector // 8
    lat = t.l2_latency if where == "L2 hit" else t.hbm_latency
    a = timed(chase_listing(N), [chase_memory(step, 2 * N)], machine=machine)
    b = timed(chase_listing(2 * N), [chase_memory(step, 2 * N)], machine=machine)
    # one 32-byte sector per load: memory latency plus its bytes over the LSU-to-L1 path
    per = lat + t.sector / t.l1_per_cycle           # 250.25 (hit), 500.25 (miss) cycles
    assert b.cycles - a.cycles == N * per
    assert b.stalls["memory"] - a.stalls["memory"] == N * (per - 1)
    assert b.hbm_bytes - a.hbm_bytes == (N * t.sector if where == "HBM miss" else 0)
    assert a.hbm_bytes == (t.sector * N if where == "HBM miss" else t.sector)


def test_l2_reuse_between_blocks(tmp_path):
    """Two blocks follow the same chain of N fresh sectors. In one wave they run at the
    same time: both wait for HBM at every step (the sectors are on their way), whatever
    order the interpreter runs them in. In two waves (one block per MP) the second block
    finds every sector in L2."""
    t = timing_of(None)
    files = {k: write_machine(tmp_path, f"{k}.toml", ONE_MP + extra) for k, extra in [
        ("one-wave", ""),
        ("one-wave-one-block-at-a-time", "[model]\nmax_resident_threads = { value = 32 }\n"),
        ("two-waves", "max_blocks_per_mp = { value = 1 }\n")]}
    step = t.sector // 8
    alone = timed(chase_listing(N), [chase_memory(step, N)], (1, 1, 1), files["one-wave"])
    rec = {k: timed(chase_listing(N), [chase_memory(step, N)], (2, 1, 1), f)
           for k, f in files.items()}
    assert rec["one-wave"].cycles == rec["one-wave-one-block-at-a-time"].cycles == alone.cycles
    # the same chain from L2 (the last load's latency is on no chain: nothing reads it)
    hit = alone.cycles - (N - 1) * (t.hbm_latency - t.l2_latency)
    assert rec["two-waves"].cycles == alone.cycles + hit
    for r in rec.values():                          # each sector crosses HBM once
        assert r.hbm_bytes == alone.hbm_bytes == N * t.sector


# ---------------------------------------------------------------- barrier
def test_bar_sync_costs_its_latency(machine):
    t = timing_of(machine)
    make = lambda n: listing("\n".join(["BAR.SYNC 0"] * n), threads=128)   # noqa: E731
    s, a, b = slope(make, N, lambda: [out_array()], machine=machine)
    assert s == t.latency["bar"]                     # 20 cycles, issue to release
    assert b.stalls["barrier"] - a.stalls["barrier"] == N * 4 * (t.latency["bar"] - 1)


def test_bar_sync_releases_at_the_last_arrival(machine):
    """Warp 0 runs a chain of n dependent adds before the barrier, warp 1 goes straight
    to it: the release, and warp 1's wait, follow warp 0's chain."""
    t = timing_of(machine)

    def make(n):
        body = ["S2R R1, SR_WARPID", "ALU.ISETP.NE.S32 P0, R1, 0", "ALU.MOV.IMM R2, 0.5",
                "@P0 BRA L_bar"] + ["ALU.FADD.F32 R2, R2, 1.5"] * n + ["BAR.SYNC 0"]
        return listing("\n".join(body), threads=64).replace("        BAR.SYNC",
                                                            "L_bar:\n        BAR.SYNC")
    s, a, b = slope(make, N, lambda: [out_array()], machine=machine)
    assert s == t.latency["alu"]
    assert b.stalls["barrier"] - a.stalls["barrier"] == N * t.latency["alu"]


# ---------------------------------------------------------------- TME and SQMMA
@pytest.mark.parametrize("dtype,rate_key", [(ml_dtypes.bfloat16, "bf16"),
                                            (ml_dtypes.float8_e4m3fn, "e4m3")],
                         ids=["bf16", "e4m3"])
def test_tme_copy_and_sqmma_durations(machine, rng, dtype, rate_key):
    """The pipelined GEMM (one block, 16 k-steps: long enough that its main loop, not the
    epilogue's bank-conflicted store of C, bounds it): every TME copy lasts its latency, the
    memory latency and its bytes at the engine's rate; every SQMMA its latency and
    2*m*n*k flops at the MP's rate for the operand type."""
    t = timing_of(machine)
    a = rng.standard_normal((64, 1024)).astype(dtype)
    b = rng.standard_normal((1024, 64)).astype(dtype)
    c, (r,) = profiled(lambda: pg.gemm(a, b, stages=2), machine=machine)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-3)
    assert r.bound == "latency"                     # so slices are not stretched
    box = 64 * 64 * np.dtype(dtype).itemsize
    loads = [s for s in r.slices if s.name == "TME load"]
    assert len(loads) == 2 * 16                      # A and B boxes per k-step
    want = t.tme_latency + t.hbm_latency + box / t.tme_per_cycle   # 664 cycles (bf16)
    assert [s.dur for s in loads] == [want] * len(loads)
    # the copies of a block queue on its engine: starts at least bytes/rate apart
    starts = sorted(s.start for s in loads)
    assert min(np.diff(starts)) >= box / t.tme_per_cycle
    # the store of C issues in the epilogue, whose window the bank-conflicted c_s.store
    # stretches (shared wavefronts bound it): its slice is at least its own duration
    store = [s for s in r.slices if s.name == "TME store"]
    assert len(store) == 1
    assert store[0].dur >= t.tme_latency + t.hbm_latency + 64 * 64 * 4 / t.tme_per_cycle
    mmas = [s for s in r.slices if s.name.startswith("SQMMA")]
    assert mmas
    for s in mmas:
        m, n, k = map(int, re.match(r"SQMMA (\d+)x(\d+)x(\d+)", s.name).groups())
        assert s.dur == t.latency["sqmma"] + 2 * m * n * k / t.sqmma_rate[rate_key]
    assert r.flops == 2 * 64 * 64 * 1024 and r.dtype == rate_key
    # utilization of the one MP's engines: SQMMA busy for the flops at its rate, TME
    # for the bytes at its rate
    assert r.utilization["SQMMA"] * r.cycles == pytest.approx(r.flops / t.sqmma_rate[rate_key])
    assert r.utilization["TME"] * r.cycles == pytest.approx(
        (32 * box + 64 * 64 * 4) / t.tme_per_cycle)
