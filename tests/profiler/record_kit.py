"""Hand-made launch records, consistent as the cycle model's must be: per-line and per-pc
rows that sum to the launch's warp-cycles and stalls, slices on every kind of track, a
utilization timeline in buckets. Values are random (``rng``) so that no test passes on a
coincidence of round numbers."""
from __future__ import annotations

import numpy as np

from mutile import machines
from mutile.backends.pinghu.machine.timing.record import (STALLS, UTILIZATION_UNITS,
                                                          LaunchRecord, LineRow, PcRow, Slice)

CLOCK = machines.default().value("device", "clock_hz")
OVERHEAD = machines.default().value("device", "launch_overhead_us") * 1e-6 * CLOCK
FILE = "/src/attention_variant.py"
SOURCES = {12: "q = ml.load(Q + offs)", 17: "s = ml.dot(q, k)", 21: "p = ml.exp(s - m)",
           25: "acc = ml.dot(p, v, acc)", 30: "ml.store(O + offs, acc)"}


def _split(total: float, parts: int, rng) -> np.ndarray:
    """``total`` split into ``parts`` positive pieces that sum to it exactly (floats)."""
    w = rng.uniform(0.2, 1.0, parts)
    pieces = total * w / w.sum()
    pieces[-1] = total - pieces[:-1].sum()
    return pieces


def make_record(rng, kernel="attn_fwd", grid=(8, 4, 1), cycles=None, flops=None,
                hbm_bytes=None, sampled=False, dtype="bf16", buckets=6, file=FILE,
                overhead=OVERHEAD) -> LaunchRecord:
    """A record of one launch of ``kernel`` with ``len(SOURCES)`` source lines, two pcs
    per line, a slice per track kind and a timeline of ``buckets`` buckets."""
    cycles = float(cycles if cycles is not None else rng.integers(20_000, 90_000))
    warps = 4 * int(np.prod(grid))
    warp_cycles = cycles * warps * float(rng.uniform(0.6, 0.9))
    issued = warp_cycles * float(rng.uniform(0.1, 0.3))
    stall_total = _split(warp_cycles - issued, len(STALLS), rng)
    stalls = dict(zip(STALLS, stall_total))
    # rows: one per source line; each stall reason and the issued cycles split over them
    lines = sorted(SOURCES)
    per_line_issued = _split(issued, len(lines), rng)
    per_line_stalls = {s: _split(v, len(lines), rng) for s, v in stalls.items()}
    by_line, by_pc = [], []
    for i, line in enumerate(lines):
        st = {s: float(per_line_stalls[s][i]) for s in STALLS}
        wc = float(per_line_issued[i]) + sum(st.values())
        by_line.append(LineRow(file, line, SOURCES[line], wc, float(per_line_issued[i]), st))
        for half in range(2):            # two instructions per line: the halves of the row
            pc = 2 * i + half
            by_pc.append(PcRow(pc, f"OP{pc}.F32 R{pc}, R{pc + 1}", file, line,
                               int(rng.integers(100, 5000)), wc / 2, per_line_issued[i] / 2,
                               {s: v / 2 for s, v in st.items()}))
    flops = float(flops if flops is not None else rng.uniform(1e9, 5e9))
    hbm = float(hbm_bytes if hbm_bytes is not None else rng.uniform(1e6, 2e7))
    peak_tflops = 56 * CLOCK * 8192 / 1e12
    util = {u: float(rng.uniform(0.01, 0.95)) for u in UTILIZATION_UNITS}
    bucket = cycles / buckets
    timeline = {u: rng.uniform(0, 1, buckets) for u in ("SQMMA", "TME", "HBM")}
    slices = [Slice(("MP", 0), "block (0, 0, 0)", 0.0, cycles * 0.9, {"block": [0, 0, 0]}),
              Slice(("warp", 0, (0, 0, 0), 1), "barrier wait", cycles * 0.1, cycles * 0.2,
                    {"barrier": 3, "phase": 1}),
              Slice(("unit", 0, "TME"), "TME copy 16384 B", cycles * 0.05, cycles * 0.3,
                    {"bytes": np.int64(16384)}),
              Slice(("unit", 1, "SQMMA"), "SQMMA 64x64x16", cycles * 0.4, cycles * 0.1, {})]
    blocks = int(np.prod(grid))
    return LaunchRecord(
        kernel=kernel, grid=tuple(grid), sampled=sampled, blocks=blocks,
        blocks_simulated=max(1, blocks // 4) if sampled else blocks, cycles=cycles,
        clock_hz=CLOCK, flops=flops, dtype=dtype, hbm_bytes=hbm, peak_tflops=peak_tflops,
        peak_hbm_gbps=1600.0, utilization=util, warp_cycles=warp_cycles, stalls=stalls,
        issued=issued, by_line=by_line, by_pc=by_pc,
        occupancy={"blocks_per_mp": 2, "warps_per_mp": 8, "limit": "shared memory",
                   "fraction": 0.125},
        waves=1, launch_overhead_cycles=overhead, machine_hash=machines.default().hash,
        bound="SQMMA", slices=slices, timeline=timeline, bucket_cycles=bucket,
        instructions=int(rng.integers(1000, 100000)))
