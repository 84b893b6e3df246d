"""From per-warp timelines and per-block demands to a launch's time (:func:`launch_record`).

Blocks run in waves (:mod:`.occupancy`). On one MP in one wave, the time is the longer of
the longest warp timeline of its blocks (*latency*-bound) and, for every MP resource, the
demand its blocks put on it over its rate (issue slots, ALU, SFU, LSU, shared-memory
wavefronts, TME, SQMMA, WMMA: *throughput*-bound); the device's L2 and HBM bandwidth bound
every MP of the wave. A wave lasts as long as its slowest MP; waves run back to back. When
a resource bound exceeds the latency bound the MP's timelines are stretched to fit (each
interval by the same factor): the added warp-cycles are stalls on that resource (*memory*
for LSU, shared memory, TME, L2, HBM; *issue* for the others), attributed to the
instructions in proportion to their demand on it. Warps that exited while their block is
still resident are *idle*.

A sampled launch simulates its first blocks; every wave not fully simulated is estimated
MP by MP: each MP's blocks in that wave (their number), at the mean demand and mean
latency bound of the simulated blocks that ran on the same MP; the per-line and per-unit
totals are the simulated ones scaled by blocks / blocks simulated.
"""
from __future__ import annotations

import numpy as np

from .params import D, DEMAND, DEVICE_UNITS, MP_UNITS
from .record import STALLS, LaunchRecord, LineRow, PcRow, Slice

MEMORY_UNITS = ("LSU", "SHARED", "TME", "L2", "HBM")
BUCKETS = 400


def pipe_key(cls: str) -> str:
    from .params import PIPE_OF_CLASS
    return PIPE_OF_CLASS.get(cls, "alu")


def block_stats(m, st) -> dict:
    """What one interpreter wave leaves for the composition: per block its id, longest
    warp timeline, summed warp timelines, demands, flops; the trace slices and busy
    chunks with global block ids."""
    nb, wpb = len(st.block_ids), m.wpb
    end = m.clock.reshape(nb, wpb)
    out = {"block": st.block_ids.copy(), "chain": end.max(axis=1), "csum": end.sum(axis=1),
           "dem": m.wdem.reshape(nb, wpb, -1).sum(axis=1),
           "flops": m.flops.reshape(nb, wpb).sum(axis=1), "wpb": wpb}
    out["busy"] = [(u, st.block_ids[w // wpb], ti, c) for u, w, ti, c in m.busy]
    m.busy = []
    return out


def _groups(m, blocks):
    p = m.plan
    return (blocks // p.per_wave) * m.t.mp_count + (blocks % p.per_wave) % m.t.mp_count


def launch_record(m) -> LaunchRecord:
    t, p = m.t, m.plan
    outs = m.blocks_out
    prog = m._program
    n_pc = len(m.issued_pc)
    if not outs:
        return _empty(m)
    blk = np.concatenate([o["block"] for o in outs])
    chain = np.concatenate([o["chain"] for o in outs])
    csum = np.concatenate([o["csum"] for o in outs])
    dem = np.concatenate([o["dem"] for o in outs])
    flops = np.concatenate([o["flops"] for o in outs])
    wpb = outs[0]["wpb"]
    P = t.mp_count
    g = _groups(m, blk)
    G = int(g.max()) + 1
    ch_g = np.zeros(G)
    np.maximum.at(ch_g, g, chain)
    cs_g = np.bincount(g, csum, G)
    full_g = np.bincount(g, chain * wpb, G)
    nb_g = np.bincount(g, minlength=G)
    dem_g = np.zeros((G, len(DEMAND)))
    np.add.at(dem_g, g, dem)
    mp_idx = [D[u] for u in MP_UNITS]
    dev_idx = [D[u] for u in DEVICE_UNITS]
    rates = np.array([t.l2_per_cycle, t.hbm_per_cycle])
    waves_sim = -(-len(blk) // p.per_wave) if p.sampled else p.waves
    k_g = np.arange(G) // P
    dev_k = np.zeros((max(waves_sim, int(k_g.max()) + 1), 2))
    np.add.at(dev_k, k_g, dem_g[:, dev_idx])
    dev_k = (dev_k / rates).max(axis=1)
    bounds = np.column_stack([ch_g, dem_g[:, mp_idx], np.broadcast_to(dev_k[k_g, None],
                                                                       (G, 1))])
    labels = ("latency",) + MP_UNITS + ("HBM",)
    T_mp = bounds.max(axis=1)
    which = bounds.argmax(axis=1)
    dev_which = np.where(dem_g[:, D["HBM"]] / t.hbm_per_cycle >= dem_g[:, D["L2"]] /
                         t.l2_per_cycle, "HBM", "L2")
    bound_g = [labels[i] if labels[i] != "HBM" else str(dev_which[j])
               for j, i in enumerate(which)]
    s_g = np.where(ch_g > 0, T_mp / np.maximum(ch_g, 1e-300), 1.0)
    present = nb_g > 0
    # waves: fully simulated ones from their groups; the others estimated
    nblocks, per_wave = p.blocks, p.per_wave
    wave_T, wave_start = [], []
    mp_dem, mp_chain = _per_mp_means(np.arange(G) % P, (blk % per_wave) % P, dem, ch_g,
                                     present, P)
    start = 0.0
    for k in range(p.waves):
        n_k = min(per_wave, nblocks - k * per_wave)
        sim_k = int(np.count_nonzero((blk // per_wave) == k))
        wave_start.append(start)
        if sim_k == n_k:
            sel = present & (k_g == k)
            T = float(T_mp[sel].max())
        else:                       # MP q holds the wave's blocks q, q + P, ... (< n_k)
            j = np.array([len(range(q, n_k, P)) for q in range(P)], np.float64)
            busy = j > 0
            mp_T = np.maximum(mp_chain, (j[:, None] * mp_dem[:, mp_idx]).max(axis=1))
            dev_T = ((j[:, None] * mp_dem[:, dev_idx]).sum(axis=0) / rates).max()
            T = max(float(mp_T[busy].max()), float(dev_T))
        wave_T.append(T)
        start += T
    cycles = start
    f = nblocks / len(blk)
    # stalls: measured, plus contention and idle from the stretch
    extra = {u: 0.0 for u in labels[1:] + ("L2",)}
    for j in np.flatnonzero(present & (s_g > 1)):
        extra[bound_g[j]] += (s_g[j] - 1.0) * cs_g[j]
    idle = float((s_g * (full_g - cs_g))[present].sum())
    issued = m.issued_pc.copy()
    d = np.diff(m.sums, axis=1)             # t0 - clock, t1 - t0, issue - t1
    stall = {"memory": d[:, 0].copy(), "scoreboard": d[:, 1].copy(), "issue": d[:, 2].copy(),
             "barrier": m.stall_pc["barrier"].copy()}
    for u, e in extra.items():
        if e <= 0:
            continue
        w = m.pc_dem[:, D[u]]
        share = w / w.sum() if w.sum() > 0 else issued / max(issued.sum(), 1)
        stall["memory" if u in MEMORY_UNITS else "issue"] += e * share
    for r in stall:
        stall[r] *= f
    issued *= f
    idle *= f
    by_pc, by_line = _tables(m, prog, issued, stall, idle, n_pc)
    stalls = {r: float(stall[r].sum()) for r in STALLS if r != "idle"}
    stalls["idle"] = idle
    warp_cycles = float(issued.sum()) + sum(stalls.values())
    total_dem = dem.sum(axis=0) * f
    util = {}
    for u in ("SQMMA", "WMMA", "ALU", "SFU", "LSU", "SHARED", "TME"):
        util[u] = float(total_dem[D[u]] / (cycles * P)) if cycles > 0 else 0.0
    util["HBM"] = float(total_dem[D["HBM"]] / (cycles * t.hbm_per_cycle)) if cycles else 0.0
    dtype = max(m.flop_dtype, key=m.flop_dtype.get) if m.flop_dtype else None
    slowest = int(np.argmax(np.where(present, T_mp, -1)))
    occ = {"blocks_per_mp": p.occ, "warps_per_mp": p.occ * wpb, "limit": p.limit,
           "fraction": min(1.0, p.occ * wpb / t.occupancy["max_warps_per_mp"])}
    rec = LaunchRecord(
        kernel=m._kernel_name, grid=m._grid, sampled=p.sampled, blocks=nblocks,
        blocks_simulated=len(blk), cycles=cycles, clock_hz=t.clock_hz,
        flops=float(flops.sum() * f), dtype=dtype, hbm_bytes=float(total_dem[D["HBM"]]),
        peak_tflops=t.peak_flops(dtype) / 1e12, peak_hbm_gbps=t.peak_hbm / 1e9,
        utilization=util, warp_cycles=warp_cycles, stalls=stalls, issued=float(issued.sum()),
        by_line=by_line, by_pc=by_pc, occupancy=occ, waves=p.waves,
        launch_overhead_cycles=t.launch_overhead, machine_hash=t.file.hash,
        bound=bound_g[slowest], instructions=int(m.issued_pc.sum()))
    gi = {"s": s_g, "start": np.array(wave_start), "P": P}
    rec.slices = _slices(m, gi)
    rec.timeline, rec.bucket_cycles = _timeline(m, outs, gi, cycles)
    return rec


def _per_mp_means(g_mp, b_mp, dem, ch_g, present, P):
    """Per MP (``P`` of them): the mean demand of the simulated blocks it ran (``b_mp``:
    each block's MP) and the mean latency bound of its simulated (``present``) groups
    (``g_mp``: each group's MP); an MP that ran no simulated block takes the launch's
    means. A wave not simulated is estimated MP by MP from these: block ``b`` of every
    wave runs on MP ``b % P``, so work that depends on the block's position in the grid
    (the causal attention's rows) lands on the same MPs in every wave."""
    cnt = np.bincount(b_mp, minlength=P)
    mp_dem = np.zeros((P, dem.shape[1]))
    np.add.at(mp_dem, b_mp, dem)
    ran = cnt > 0
    mp_dem[ran] /= cnt[ran, None]
    mp_dem[~ran] = dem.mean(axis=0)
    gc = np.bincount(g_mp[present], minlength=P)
    mp_chain = np.bincount(g_mp[present], ch_g[present], P)
    mp_chain = np.where(gc > 0, mp_chain / np.maximum(gc, 1), ch_g[present].mean())
    return mp_dem, mp_chain


def _place(m, blocks, times, gi):
    g = _groups(m, blocks)
    k = g // gi["P"]
    return gi["start"][k] + gi["s"][g] * times, g % gi["P"]


def _slices(m, gi) -> list:
    out = []
    for blocks, warps, name, start, end in m.slices:
        s0, mp = _place(m, blocks, start, gi)
        s1, _ = _place(m, blocks, end, gi)
        unit = name.split()[0] in ("TME", "SQMMA")
        for b, w, a, z, q in zip(blocks.tolist(), warps.tolist(), s0.tolist(), s1.tolist(),
                                 mp.tolist()):
            track = ("unit", q, name.split()[0]) if unit else ("warp", q, b, w)
            out.append(Slice(track, name, a, max(z - a, 0.0), {"block": b, "warp": w}))
    return out


def _timeline(m, outs, gi, cycles):
    if cycles <= 0:
        return {}, 0.0
    bucket = cycles / BUCKETS
    out = {}
    for o in outs:
        for u, blocks, ti, c in o["busy"]:
            at, _ = _place(m, blocks, ti, gi)
            b = np.minimum((at / bucket).astype(np.int64), BUCKETS - 1)
            w = np.broadcast_to(np.asarray(c, np.float64), b.shape)
            name = DEMAND[u]
            out[name] = out.get(name, np.zeros(BUCKETS)) + np.bincount(b, w, BUCKETS)
    cap = bucket * gi["P"]
    return {k: np.minimum(v / cap, 1.0) for k, v in out.items()}, bucket


def _tables(m, prog, issued, stall, idle, n_pc):
    steps = m._steps
    by_pc, lines = [], {}
    reasons = ("memory", "scoreboard", "issue", "barrier")
    for pc in range(n_pc):
        if issued[pc] == 0 and all(stall[r][pc] == 0 for r in reasons):
            continue
        s = {r: float(stall[r][pc]) for r in reasons}
        if pc < len(steps):
            st = steps[pc]
            loc = st.ins.loc
            file, line, text = (loc.file, loc.line, st.source or "") if loc else \
                (None, None, "")
            itext = st.text
        else:
            file, line, text, itext = None, None, "(end of program)", "EXIT"
        total = float(issued[pc]) + sum(s.values())
        by_pc.append(PcRow(pc, itext, file, line, int(m._by_pc[pc]), total, float(issued[pc]),
                           s))
        key = (file, line)
        row = lines.get(key)
        if row is None:
            src = _source_text(text)
            row = lines[key] = LineRow(file, line, src, 0.0, 0.0, dict.fromkeys(STALLS, 0.0))
        row.warp_cycles += total
        row.issued += float(issued[pc])
        for r, v in s.items():
            row.stalls[r] += v
    if idle > 0:
        s = dict.fromkeys(STALLS, 0.0)
        s["idle"] = idle
        lines[("idle", None)] = LineRow(None, None, "(warps that exited, their block still "
                                        "resident)", idle, 0.0, s)
    rows = sorted(lines.values(), key=lambda r: -r.warp_cycles)
    return by_pc, rows


def _source_text(comment: str) -> str:
    """The Python source of a ``file.py:LINE  source`` location comment."""
    parts = comment.split("  ", 1)
    return parts[1].strip() if len(parts) == 2 else comment


def _empty(m) -> LaunchRecord:
    t, p = m.t, m.plan
    return LaunchRecord(kernel=m._kernel_name, grid=m._grid, sampled=False, blocks=0,
                        blocks_simulated=0, cycles=0.0, clock_hz=t.clock_hz, flops=0.0,
                        dtype=None, hbm_bytes=0.0, peak_tflops=t.peak_flops(None) / 1e12,
                        peak_hbm_gbps=t.peak_hbm / 1e9,
                        utilization=dict.fromkeys(("SQMMA", "WMMA", "ALU", "SFU", "LSU",
                                                   "SHARED", "TME", "HBM"), 0.0),
                        warp_cycles=0.0, stalls=dict.fromkeys(STALLS, 0.0), issued=0.0,
                        by_line=[], by_pc=[], occupancy={"blocks_per_mp": p.occ,
                                                         "warps_per_mp": 0, "limit": p.limit,
                                                         "fraction": 0.0},
                        waves=0, launch_overhead_cycles=t.launch_overhead,
                        machine_hash=t.file.hash, bound="latency")
