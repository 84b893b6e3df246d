"""From per-warp timelines and per-block demands to a launch's time (:func:`launch_record`).

Blocks run in waves (:mod:`.occupancy`). On one MP in one wave, the time is the sum of
its windows (:mod:`.windows`): each the longest of its timelines' cycles (*latency*), its
demand on every MP resource over that resource's rate (issue slots, ALU, SFU, LSU,
shared-memory wavefronts, TME, SQMMA, WMMA) and the wave's L2 and HBM demand over their
bandwidth. A wave lasts as long as its slowest MP; waves run back to back. A stretched
window's added warp-cycles are stalls on the resource that bound it (*memory* for LSU,
shared memory, TME, L2, HBM; *issue* for the others), attributed to the instructions in
proportion to their demand on it. Warps that exited while their block is still resident
are *idle*.

A sampled launch simulates its first blocks (by default its first two waves); every wave
not fully simulated is estimated MP by MP, from the last fully simulated wave (whose L2
was warmed by the waves before it, like the waves after it): each MP's blocks in that
wave (their number), at the mean demand and mean time of that wave's blocks on the same
MP. Unit demands and flops add the unsimulated blocks at that wave's means; the per-line
tables are the simulated ones scaled by blocks / blocks simulated.
"""
from __future__ import annotations

import numpy as np

from . import session, windows
from .params import D, DEVICE_UNITS, MP_UNITS
from .record import STALLS, LaunchRecord, LineRow, PcRow, SliceTable

MEMORY_UNITS = ("LSU", "SHARED", "TME", "L2", "HBM")
BUCKETS = 400


def block_stats(m, st) -> dict:
    """What one interpreter wave leaves for the composition: per block its id, longest
    warp timeline, summed warp timelines, demands, flops and its windows
    (:func:`.windows.block_windows`)."""
    nb, wpb = len(st.block_ids), m.wpb
    end = m.clock.reshape(nb, wpb)
    chain = end.max(axis=1)
    out = {"block": st.block_ids.copy(), "chain": chain, "csum": end.sum(axis=1),
           "flops": m.flops.reshape(nb, wpb).sum(axis=1), "wpb": wpb}
    out.update(windows.block_windows(m, end, chain))
    out["dem"] = out["wdem"].sum(axis=1)
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
    dem = np.concatenate([o["dem"] for o in outs])
    flops = np.concatenate([o["flops"] for o in outs])
    wpb = outs[0]["wpb"]
    P = t.mp_count
    g = _groups(m, blk)
    G = int(g.max()) + 1
    nb_g = np.bincount(g, minlength=G)
    present = nb_g > 0
    k_g = np.arange(G) // P
    waves_sim = int(k_g.max()) + 1
    c = windows.Composition(t, g, G, waves_sim, windows.pad([o["wdem"] for o in outs]),
                            windows.pad([o["act"] for o in outs]),
                            windows.pad([o["res"] for o in outs]), chain, m.win)
    mp_idx = [D[u] for u in MP_UNITS]
    dev_idx = [D[u] for u in DEVICE_UNITS]
    rates = np.array([t.l2_per_cycle, t.hbm_per_cycle])
    # waves: fully simulated ones from their groups; the others estimated
    nblocks, per_wave = p.blocks, p.per_wave
    wave_T, wave_start = [], []
    # unsimulated waves are estimated from the last fully simulated wave (L2 warm, as in
    # the waves after it), or from every simulated block if no wave is whole
    whole = len(blk) // per_wave
    steady = (blk // per_wave) == whole - 1 if whole else np.ones(len(blk), bool)
    g_steady = present & ((k_g == whole - 1) if whole else True)
    mp_dem, mp_T = _per_mp_means(np.arange(G) % P, (blk[steady] % per_wave) % P,
                                 dem[steady], c.T, g_steady, P)
    start = 0.0
    for k in range(p.waves):
        n_k = min(per_wave, nblocks - k * per_wave)
        sim_k = int(np.count_nonzero((blk // per_wave) == k))
        wave_start.append(start)
        if sim_k == n_k:
            sel = present & (k_g == k)
            T = max(float(c.T[sel].max()), float(c.dev_floor[k]))
        else:                       # MP q holds the wave's blocks q, q + P, ... (< n_k)
            j = np.array([len(range(q, n_k, P)) for q in range(P)], np.float64)
            busy = j > 0
            est = np.maximum(mp_T, (j[:, None] * mp_dem[:, mp_idx]).max(axis=1))
            for q in np.flatnonzero(busy):          # the steady wave's group on MP q,
                gq = (whole - 1) * P + q if whole else -1   # its windows rescaled
                if whole and gq < G and present[gq]:
                    est[q] = c.estimate(gq, j[q] / nb_g[gq])
            dev_T = ((j[:, None] * mp_dem[:, dev_idx]).sum(axis=0) / rates).max()
            T = max(float(est[busy].max()), float(dev_T))
        wave_T.append(T)
        start += T
    cycles = start
    f = nblocks / len(blk)
    # stalls: measured, plus contention (window stretch) and idle
    extra = c.extra(nb_g * wpb)
    idle = c.idle()
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
    rest = nblocks - len(blk)                # blocks not simulated, at the steady means
    total_dem = dem.sum(axis=0) + rest * dem[steady].mean(axis=0)
    total_flops = float(flops.sum() + rest * flops[steady].mean())
    util = {}
    for u in ("SQMMA", "WMMA", "ALU", "SFU", "LSU", "SHARED", "TME"):
        util[u] = float(total_dem[D[u]] / (cycles * P)) if cycles > 0 else 0.0
    util["HBM"] = float(total_dem[D["HBM"]] / (cycles * t.hbm_per_cycle)) if cycles else 0.0
    dtype = max(m.flop_dtype, key=m.flop_dtype.get) if m.flop_dtype else None
    slowest = int(np.argmax(np.where(present, c.T, -1)))
    occ = {"blocks_per_mp": p.occ, "warps_per_mp": p.occ * wpb, "limit": p.limit,
           "fraction": min(1.0, p.occ * wpb / t.occupancy["max_warps_per_mp"])}
    rec = LaunchRecord(
        kernel=m._kernel_name, grid=m._grid, sampled=p.sampled, blocks=nblocks,
        blocks_simulated=len(blk), cycles=cycles, clock_hz=t.clock_hz,
        flops=total_flops, dtype=dtype, hbm_bytes=float(total_dem[D["HBM"]]),
        peak_tflops=t.peak_flops(dtype) / 1e12, peak_hbm_gbps=t.peak_hbm / 1e9,
        utilization=util, warp_cycles=warp_cycles, stalls=stalls, issued=float(issued.sum()),
        by_line=by_line, by_pc=by_pc, occupancy=occ, waves=p.waves,
        launch_overhead_cycles=session.launch_overhead_cycles(t),
        graph_node=session.current_graph_node(), machine_hash=t.file.hash,
        bound=c.bound(slowest), instructions=int(m.issued_pc.sum()))
    ws = np.array(wave_start)
    rec.wave_cycles = wave_T
    rec.slices = _slices(m, c, ws)
    rec.timeline, rec.bucket_cycles = _timeline(c, ws, cycles, t)
    return rec


def _per_mp_means(g_mp, b_mp, dem, T_g, present, P):
    """Per MP (``P`` of them): the mean demand of the simulated blocks it ran (``b_mp``:
    each block's MP) and the mean (windowed) time of its simulated (``present``) groups
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
    mp_T = np.bincount(g_mp[present], T_g[present], P)
    mp_T = np.where(gc > 0, mp_T / np.maximum(gc, 1), T_g[present].mean())
    return mp_dem, mp_T


def _slices(m, c, wave_start) -> SliceTable:
    out = SliceTable()
    for blocks, warps, name, start, end in m.slices:
        g = _groups(m, blocks)
        unit = name.split()[0] in ("TME", "SQMMA")
        s0 = c.place(g, start, wave_start)
        # an engine's operation keeps its modelled duration (a window stretched by
        # another resource does not slow the engine); a warp's wait stretches with it
        s1 = s0 + (end - start) if unit else c.place(g, end, wave_start)
        out.add(name, unit, blocks, warps, g % c.P, s0, np.maximum(s1 - s0, 0.0))
    return out


def _timeline(c, wave_start, cycles, t):
    """Busy fraction per unit in :data:`BUCKETS` buckets of the launch: each window's
    demand spread over its stretched extent (MP units over all MPs; L2, HBM over their
    bandwidth)."""
    if cycles <= 0:
        return {}, 0.0
    bucket = cycles / BUCKETS
    G, nw, _ = c.dem.shape
    g = np.repeat(np.arange(G), nw)
    a = (wave_start[g // c.P] + c.start.ravel())
    z = a + c.d.ravel()
    lo = np.minimum((a / bucket).astype(np.int64), BUCKETS - 1)
    hi = np.minimum((np.maximum(z - 1e-9, a) / bucket).astype(np.int64), BUCKETS - 1)
    span = (hi - lo + 1).astype(np.float64)
    out = {}
    caps = {u: bucket * c.P for u in MP_UNITS}
    caps.update(L2=bucket * t.l2_per_cycle, HBM=bucket * t.hbm_per_cycle)
    for u in MP_UNITS + DEVICE_UNITS:
        w = c.dem[:, :, D[u]].ravel() / span
        if not w.any():
            continue
        # spread each window's share over buckets lo .. hi (difference array)
        diff = np.bincount(lo, w, BUCKETS + 1) - np.bincount(hi + 1, w, BUCKETS + 1)
        out[u] = np.minimum(np.cumsum(diff)[:BUCKETS] / caps[u], 1.0)
    return out, bucket


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
                        waves=0, launch_overhead_cycles=session.launch_overhead_cycles(t),
                        graph_node=session.current_graph_node(),
                        machine_hash=t.file.hash, bound="latency")
