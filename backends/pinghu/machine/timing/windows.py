"""Windows of the composition: the throughput bounds applied window by window of a
block's timeline, so that a kernel's phases (a latency-bound loop, then a conflicted
epilogue) add up instead of hiding each other.

Every demand the model logs carries the cycle it was issued at (in its block's own
timeline); an MP resource's demand, in cycles of that resource, is spread over the
windows of the cycles it takes from then on (an SQMMA issued near a window's end busies
the next window too). The timelines are cut into windows of ``win`` cycles (chosen at the first wave
so that its longest block has at most :data:`WINDOWS` of them, a power of two of at least
:data:`MIN_WINDOW` cycles: much longer than any one instruction's demand, so a window's
demand is a rate, not an accident of where one instruction's issue fell). On one MP in one wave a window lasts the longest of: the cycles the
timelines spend in it, each MP resource's demand issued in it over its rate, and the
device's L2 and HBM demand of the whole wave in it over their bandwidth; a window in
which no timeline runs but demand was issued (a TME store draining after its warps
exited) lasts its demand. The MP's time is the sum of its windows; a window longer than
its timelines stretches them by its factor, and the added warp-cycles (of every warp of
the resident blocks) are stalls on the resource that bound it."""
from __future__ import annotations

import numpy as np

from .params import D, DEMAND, DEVICE_UNITS, MP_UNITS

WINDOWS = 256
MIN_WINDOW = 256.0
LABELS = ("latency",) + MP_UNITS + DEVICE_UNITS
_MP = [D[u] for u in MP_UNITS]
_DEV = [D[u] for u in DEVICE_UNITS]
_SPREAD_LIST = np.array(_MP)      # demands in MP-cycles, spread over the cycles they take
_MP_SET = frozenset(_MP)


def choose(chain_max: float) -> float:
    """The window (cycles) for blocks whose longest timeline is ``chain_max``."""
    return float(max(MIN_WINDOW, 2.0 ** np.ceil(np.log2(max(chain_max, 1.0) / WINDOWS))))


def block_windows(m, end: np.ndarray, chain: np.ndarray) -> dict:
    """Per block of the wave (``end``: its warps' timeline ends (blocks, warps), ``chain``
    their maximum): demand per window (blocks, windows, units), active warp-cycles and
    resident warp-cycles per window (blocks, windows), from the model's demand log."""
    if m.win is None:
        m.win = choose(float(chain.max()) if chain.size else 0.0)
    win, wpb = m.win, m.wpb
    nb, U = len(chain), len(DEMAND)
    top = float(chain.max()) if chain.size else 0.0
    log, m.busy = m.busy, []
    steps, m.steps_log = m.steps_log, []
    groups = []                             # (unit(s), warps, times, costs)
    if steps:                               # the instructions' fixed demands
        n = np.fromiter((e[2].shape[1] for e in steps), np.int64, len(steps))
        sw = np.concatenate([e[1] for e in steps])
        st = np.concatenate([e[2][3] for e in steps])       # issue times
        pcs = np.repeat(np.fromiter((e[0] for e in steps), np.int64, len(steps)), n)
        for u in np.flatnonzero(m.dvecs.any(axis=0)).tolist():
            groups.append((u, sw, st, m.dvecs[pcs, u]))     # (sw, st shared)
    if log:                                 # the demands of addresses and engines
        n = np.fromiter((len(e[2]) for e in log), np.int64, len(log))
        scalar = [isinstance(e[3], float) for e in log]
        cost = np.repeat(np.fromiter((e[3] if f else 0.0 for e, f in zip(log, scalar)),
                                     np.float64, len(log)), n)
        offs = np.concatenate([[0], np.cumsum(n)])
        for i in (i for i, f in enumerate(scalar) if not f):
            cost[offs[i]:offs[i + 1]] = log[i][3]
        groups.append((np.repeat(np.fromiter((e[0] for e in log), np.int64, len(log)), n),
                       np.concatenate([e[1] for e in log]),
                       np.concatenate([e[2] for e in log]).astype(np.float64), cost))
    spreads = []                            # MP-cycles of work: over the cycles they take
    for u, w, t, c in groups:
        mp = np.isin(u, _SPREAD_LIST) if isinstance(u, np.ndarray) else u in _MP_SET
        sp = mp & (c >= 1.0)                # (less: inside its window)
        spreads.append(sp if isinstance(sp, np.ndarray) else np.full(len(c), sp))
        top = max(top, float(t.max(initial=0.0)),
                  float((t + c)[spreads[-1]].max(initial=0.0)))
    nw = int(top // win) + 1
    dem = np.zeros(nb * nw * U)
    cells: dict = {}                        # id(times) -> window cell of each entry
    sp_parts = []
    for (u, w, t, c), sp in zip(groups, spreads):
        ck = cells.get(id(t))
        if ck is None:
            ck = cells[id(t)] = ((w // wpb) * nw, (t // win).astype(np.int64))
        cell, k0 = ck
        flat = (cell + k0) * U + u
        if sp.any():
            keep = ~sp
            dem += np.bincount(flat[keep], c[keep], nb * nw * U)
            uu = u[sp] if isinstance(u, np.ndarray) else np.full(int(sp.sum()), u)
            sp_parts.append((cell[sp], k0[sp], t[sp], c[sp], uu))
        else:
            dem += np.bincount(flat, c, nb * nw * U)
    if sp_parts:                            # split over the windows they cover
        cell, k0, ti, cost, unit = (np.concatenate(x) for x in zip(*sp_parts))
        for j in range(int(cost.max(initial=0.0) // win) + 2):
            lo = (k0 + j) * win
            part = np.clip(np.minimum(ti + cost, lo + win) - np.maximum(ti, lo), 0.0, None)
            k = np.minimum(k0 + j, nw - 1)
            dem += np.bincount((cell + k) * U + unit, part, nb * nw * U)
    edges = np.arange(nw) * win
    act = np.clip(end[:, :, None] - edges, 0.0, win).sum(axis=1)
    res = wpb * np.clip(chain[:, None] - edges, 0.0, win)
    return {"wdem": dem.reshape(nb, nw, U), "act": act, "res": res}


def pad(arrs: list, axis: int = 1) -> np.ndarray:
    """Concatenate per-wave arrays along blocks, padding their windows with zeros."""
    n = max(a.shape[axis] for a in arrs)
    out = []
    for a in arrs:
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, n - a.shape[axis])
        out.append(np.pad(a, widths))
    return np.concatenate(out)


class Composition:
    """The windows of every (wave, MP) group ``g`` of the simulated blocks: their
    durations ``d`` (groups, windows), stretch ``s``, the label of what bound each,
    the groups' times ``T`` and the waves' device-bound floor."""

    def __init__(self, t, g, G, waves, wdem, act, res, chain, win):
        P = t.mp_count
        nw = wdem.shape[1]
        self.win, self.P = win, P
        dem = np.zeros((G, nw, wdem.shape[2]))
        np.add.at(dem, g, wdem)
        self.act = np.zeros((G, nw))
        np.add.at(self.act, g, act)
        self.res = np.zeros((G, nw))
        np.add.at(self.res, g, res)
        ch = np.zeros(G)
        np.maximum.at(ch, g, chain)
        edges = np.arange(nw) * win
        length = np.clip(ch[:, None] - edges, 0.0, win)
        k = np.arange(G) // P
        rates = np.array([t.l2_per_cycle, t.hbm_per_cycle])
        dev = np.zeros((waves, nw, len(_DEV)))
        np.add.at(dev, k, dem[:, :, _DEV])
        dev = dev / rates
        self.dev_floor = dev.max(axis=2).sum(axis=1)          # per wave: device time
        devk = dev[k]                                          # (G, nw, 2)
        live = (length > 0) | (dem.sum(axis=2) > 0)
        cand = np.concatenate([length[:, :, None], dem[:, :, _MP], devk], axis=2)
        self.d = np.where(live, cand.max(axis=2), 0.0)
        self.which = cand.argmax(axis=2)
        self.s = np.where(length > 0, self.d / np.where(length > 0, length, 1.0), 1.0)
        self.length, self.dem = length, dem
        self.T = self.d.sum(axis=1)
        self.start = np.cumsum(self.d, axis=1) - self.d      # window starts (stretched)
        self.drain = live & (length == 0)

    def estimate(self, g: int, scale: float) -> float:
        """The time of group ``g``'s windows with its MP demands scaled by ``scale`` (an
        MP of the same wave position holding ``scale`` times as many blocks)."""
        dem = self.dem[g][:, _MP].max(axis=1) * scale
        live = (self.length[g] > 0) | (dem > 0)
        return float(np.where(live, np.maximum(self.length[g], dem), 0.0).sum())

    def extra(self, wpb_blocks: np.ndarray) -> dict:
        """Warp-cycles the stretch adds, by the resource that bound each window: every
        resident warp of a stretched window waits for that resource (a warp that exited
        waits with its block), and so does every warp of a group while its demand drains
        after its timelines ended (``wpb_blocks``: warps per group)."""
        out = dict.fromkeys(LABELS[1:], 0.0)
        add = (self.s - 1.0) * self.res + self.d * self.drain * wpb_blocks[:, None]
        for j in range(1, len(LABELS)):
            sel = self.which == j
            if sel.any():
                out[LABELS[j]] += float(add[sel].sum())
        return out

    def idle(self) -> float:
        """Idle warp-cycles: warps that exited while their block is resident, at the
        pace of their timelines (the stretch of those cycles is in :meth:`extra`)."""
        return float((self.res - self.act).sum())

    def bound(self, g: int) -> str:
        """What bound most of group ``g``'s time."""
        share = np.bincount(self.which[g], self.d[g], len(LABELS))
        return LABELS[int(np.argmax(share))]

    def place(self, g: np.ndarray, times: np.ndarray, wave_start: np.ndarray) -> np.ndarray:
        """Device cycles (from the launch's start) of block-timeline ``times`` in groups
        ``g``."""
        w = np.clip((np.asarray(times) // self.win).astype(np.int64), 0, self.d.shape[1] - 1)
        return wave_start[g // self.P] + self.start[g, w] + \
            (times - w * self.win) * self.s[g, w]
