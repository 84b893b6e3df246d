"""Pinghu's asynchronous machinery in the interpreter: AsyncBarriers, counted block
barriers, fences, and the scheduling glue of the asynchronous engines (TME copies in
:mod:`.tme`, the SQMMA unit in :mod:`.sqmma`).

Every row here is a *control-like* step (:class:`~..rows.Control` of kind ASYNC):
the scheduler runs it once for the warps at its pc, outside the converged fast path, and
it moves their pcs itself (a warp that waits stays at its ASYNC.BAR.WAIT with status
``ABAR``). Per wave (:class:`~..state.State`) an :class:`AsyncUnit` keeps every block's
64 AsyncBarriers as arrays ``(blocks, 64)``: initialized, arrivals per phase (warps),
pending arrivals, pending transaction bytes, completed phases since INIT (parity =
count & 1) and ``serial``, the completions ever (INIT does not reset it; the sanitizer
names phases by it). A phase completes when its pending arrivals and bytes are both 0:
the count advances, the arrivals re-arm and the warps waiting on it wake.

Engines register themselves on the unit (``engines``) the first time a warp issues to
them; when no warp can run, the scheduler calls :meth:`AsyncUnit.settle` (a *completion
event*: TME loads land, SQMMAs complete) before it reports a deadlock. Landing is lazy on
purpose: a read of shared memory before the wait sees stale bytes, as on hardware.
"""
from __future__ import annotations

import numpy as np

from mutile.errors import DeviceFault

from ...isa.operands import RZ, Reg
from ..rows import impl
from .engine import (ABAR, BAR, DONE, NBARS, RESERVED, RUN, Exec, advance, async_row, stepping_row,
                     thread_fault, values1, where)

class AsyncUnit:
    """The AsyncBarriers of a wave's blocks and the engines working for them."""

    def __init__(self, st):
        self.st = st
        nb, W = len(st.block_ids), st.nwarps
        shape = (nb, NBARS)
        self.inited = np.zeros(shape, bool)
        self.count, self.pending, self.tx, self.phase, self.serial = \
            (np.zeros(shape, np.int64) for _ in range(5))
        self.init_pc = np.full(shape, -1, np.int64)
        self.tx_pc = np.full(shape + (2,), -1, np.int64)     # first, last ADD_TRANS pc
        self.wait_bar = np.full(W, -1, np.int64)
        self.wait_par = np.zeros(W, np.int64)
        self.engines: dict = {}
        self.san = None
        if st.sanitizer is not None:
            from ..async_sanitizer import AsyncSanitizer
            self.san = st.sanitizer.asyn = AsyncSanitizer(st, self)

    def flat(self, name: str) -> np.ndarray:
        """A (blocks, 64) array as a flat view indexed by key ``block * 64 + id``."""
        return getattr(self, name).reshape(-1)

    # ------------------------------------------------------------ barriers
    def keys(self, ids: np.ndarray, threads: np.ndarray, pc: int,
             initialized: bool = True) -> np.ndarray:
        """Flat keys of barrier ``ids`` named by ``threads`` (checked: a valid id, not the
        reserved one, initialized unless ``initialized`` is False)."""
        st = self.st
        ids = ids.astype(np.int64)
        bad = (ids >= NBARS) | (ids == RESERVED)
        if bad.any():
            j = int(np.argmax(bad))
            b = int(ids[j])
            thread_fault(st, threads[j], pc, f"AsyncBarrier {b} is reserved" if b == RESERVED
                         else f"AsyncBarrier id {b} out of range (0 .. {NBARS - 2}; "
                              f"{RESERVED} is reserved)")
        keys = st.thread_block[threads] * NBARS + ids
        if initialized:
            bad = ~self.flat("inited")[keys]
            if bad.any():
                j = int(np.argmax(bad))
                thread_fault(st, threads[j], pc, f"AsyncBarrier {int(ids[j])} is used before "
                             f"ASYNC.BAR.INIT")
        return keys

    def check_done(self, keys: np.ndarray) -> None:
        """Complete the phases of barriers ``keys`` whose arrivals and bytes are all in."""
        if not len(keys):
            return
        keys = np.unique(keys)
        done = keys[(self.flat("pending")[keys] == 0) & (self.flat("tx")[keys] == 0)
                    & self.flat("inited")[keys]]
        if not done.size:
            return
        self.flat("phase")[done] += 1
        self.flat("serial")[done] += 1
        self.flat("pending")[done] = self.flat("count")[done]
        self.tx_pc.reshape(-1, 2)[done] = -1
        if self.st.timing is not None:
            self.st.timing.phase_done(done)
        if self.san is not None:
            self.san.phase_done(done // NBARS)
        self.wake(done)

    def wake(self, keys: np.ndarray) -> None:
        """Warps waiting on barriers ``keys`` whose awaited phase completed run again."""
        st = self.st
        ws = np.flatnonzero(st.status == ABAR)
        if not ws.size:
            return
        wk = (ws // st.warps_per_block) * NBARS + self.wait_bar[ws]
        go = np.isin(wk, keys) & ((self.flat("phase")[wk] & 1) != self.wait_par[ws])
        ws, wk = ws[go], wk[go]
        if not ws.size:
            return
        st.status[ws] = RUN
        if st.timing is not None:
            for pc in np.unique(st.pcs[ws]).tolist():
                at = st.pcs[ws] == pc
                st.timing.waited(ws[at], wk[at], pc)
        if self.san is not None:
            self.san.waited(ws, wk, st.pcs[ws], check=False)
        st.pcs[ws] += 1
        self.wait_bar[ws] = -1

    def arrive(self, keys: np.ndarray, threads: np.ndarray, pc: int) -> np.ndarray:
        """One arrival per entry of ``keys`` (in order; ``threads`` name the warps);
        returns each arrival's phase parity before it."""
        pending, phase = self.flat("pending"), self.flat("phase")
        if self.st.timing is not None:
            self.st.timing.arrive(keys, threads // 32)
        uk, cnt = np.unique(keys, return_counts=True)
        if (cnt <= pending[uk]).all():
            par = phase[keys] & 1
            pending[uk] -= cnt
            self.check_done(uk[pending[uk] == 0])
            return par
        if self.san is not None:
            j = int(np.argmax(cnt > pending[uk]))
            k = int(uk[j])
            self._too_many(k, threads[np.flatnonzero(keys == k)[0]], pc,
                           f"this ASYNC.BAR.ARRIVE brings {int(cnt[j])} warps, but the phase "
                           f"waits for {int(pending[k])} more: the extra arrivals would "
                           f"count in the next phase")
        par = np.empty(len(keys), np.int64)
        for i, k in enumerate(keys.tolist()):
            if pending[k] == 0:
                self._too_many(k, threads[i], pc, f"its phase already has every arrival and "
                               f"waits only for {int(self.flat('tx')[k])} transaction bytes")
            par[i] = phase[k] & 1
            pending[k] -= 1
            if pending[k] == 0:
                self.check_done(np.array([k]))
        return par

    def _too_many(self, k: int, thread: int, pc: int, why: str):
        st = self.st
        b, n = k % NBARS, int(self.flat("count")[k])
        thread_fault(st, thread, pc, f"AsyncBarrier {b} arrived on by more warps than "
                     f"initialized ({n}): {why}\n  initialized by: "
                     f"{where(st, self.flat('init_pc')[k])}")

    def note_tx(self, keys: np.ndarray, pc: int) -> None:
        """Remember ADD_TRANS ``pc`` as adding bytes to the current phase of ``keys``."""
        tp = self.tx_pc.reshape(-1, 2)
        first = tp[keys, 0] < 0
        tp[keys[first], 0] = pc
        tp[keys, 1] = pc

    def add_pcs(self, k: int) -> list[int]:
        """The ADD_TRANS pcs of the current phase of barrier ``k``."""
        return sorted({int(p) for p in self.tx_pc.reshape(-1, 2)[k] if p >= 0})

    # ------------------------------------------------------------ engines
    def settle(self) -> bool:
        """A completion event (no warp can run): every engine finishes its pending work.
        Returns whether there was any."""
        busy = [e for e in self.engines.values() if e.busy()]
        for e in busy:
            e.settle()
        return bool(busy)

    def exited(self, warps: np.ndarray) -> None:
        """Warps of ``warps`` that are done leave nothing pending behind."""
        if not self.engines:
            return
        done = warps[self.st.status[warps] == DONE]
        if done.size:
            for e in self.engines.values():
                e.exited(done)

    def finish(self) -> None:
        """The wave's warps are all done: pending copies land."""
        for e in self.engines.values():
            e.settle()

    # ------------------------------------------------------------ deadlock report
    def describe_barriers(self, blk: int, warps: np.ndarray) -> tuple[list[str], list[int]]:
        """Lines about the AsyncBarriers ``warps`` of block ``blk`` wait on, and the
        ADD_TRANS pcs of their pending bytes."""
        lines, pcs = [], []
        for b in sorted({int(self.wait_bar[g]) for g in warps if self.st.status[g] == ABAR}):
            k = blk * NBARS + b
            ph, tx = int(self.flat("phase")[k]), int(self.flat("tx")[k])
            adds = self.add_pcs(k) if tx else []
            add = f" (ADD_TRANS at pc {', '.join(map(str, adds))})" if adds else ""
            lines.append(f"    AsyncBarrier {b}: {ph} phase(s) completed (parity {ph & 1}), "
                         f"{int(self.flat('pending')[k])} of {int(self.flat('count')[k])} "
                         f"arrival(s) and {tx} transaction byte(s) pending{add}")
            pcs += adds
        return lines, pcs


def _waits_at(st, g: int) -> str:
    """What blocked warp ``g`` waits at."""
    if st.status[g] == ABAR:
        return f"waits at ASYNC.BAR.WAIT for the phase of AsyncBarrier " \
               f"{int(st.asyn.wait_bar[g])} with parity {int(st.asyn.wait_par[g])}"
    cnt = int(st.bar_cnt[g])
    return f"waits at BAR.SYNC.CNT {int(st.bar[g])}, {cnt}" if cnt else \
        f"waits at BAR.SYNC {int(st.bar[g])}"


def report_deadlock(st):
    """Raise the DeviceFault describing warps that wait forever: per blocked block, what
    each warp waits at, the state of the AsyncBarriers waited on (phase, pending arrivals
    and bytes), then the ISA and Python lines involved."""
    wpb = st.warps_per_block
    st2 = st.status.reshape(-1, wpb)
    blocked = np.flatnonzero(((st2 == BAR) | (st2 == ABAR)).any(axis=1))
    lines, pcs = [], []
    for blk in blocked[:4].tolist():
        parts = []
        for w in range(wpb):
            g = blk * wpb + w
            if st2[blk, w] == DONE:
                parts.append(f"warp {w} exited")
                continue
            pc = int(st.pcs[g])
            parts.append(f"warp {w} {_waits_at(st, g)} (pc {pc})")
            if pc not in pcs:
                pcs.append(pc)
        lines.append(f"  block {st.block_coords(blk)}: " + ", ".join(parts))
        more, adds = st.asyn.describe_barriers(blk, blk * wpb + np.arange(wpb))
        lines += more
        pcs += [p for p in adds if p not in pcs]
    if len(blocked) > 4:
        lines.append(f"  ... and {len(blocked) - 4} more blocked blocks")
    lines += [f"  {where(st, pc)}" for pc in pcs]
    first = int(blocked[0])
    g = first * wpb + int(np.argmax((st2[first] == BAR) | (st2[first] == ABAR)))
    st.culprit = (g, None, int(st.pcs[g]))              # for the core dump
    raise DeviceFault(f"kernel '{st.name}': deadlock: no warp can make progress; "
                      f"{len(blocked)} block(s) wait at barriers that can never complete\n"
                      + "\n".join(lines), st.dec.steps[pcs[0]].ins.loc)


# ---------------------------------------------------------------- AsyncBarrier rows
@impl("ASYNC.BAR.INIT")
def _bar_init(ins):
    b, n = ins.operands
    count = n.value

    def run(st, s, x):
        u = st.asyn
        keys = u.keys(values1(st, b, x.threads), x.threads, s.pc, initialized=False)
        if not 1 <= count <= st.warps_per_block:
            thread_fault(st, x.threads[0], s.pc, f"ASYNC.BAR.INIT with {count} arrivals per "
                         f"phase: a barrier of this block counts 1 .. {st.warps_per_block} "
                         f"warps")
        keys = np.unique(keys)
        u.flat("inited")[keys] = True
        u.flat("count")[keys] = count
        u.flat("pending")[keys] = count
        u.flat("tx")[keys] = 0
        u.flat("phase")[keys] = 0
        u.flat("init_pc")[keys] = s.pc
        u.tx_pc.reshape(-1, 2)[keys] = -1
        if u.san is not None:
            u.san.reinit(keys)
    return stepping_row(run)


@impl("ASYNC.BAR.ADD_TRANS")
def _bar_add(ins):
    b, n = ins.operands

    def run(st, s, x):
        u = st.asyn
        keys = u.keys(values1(st, b, x.threads), x.threads, s.pc)
        np.add.at(u.flat("tx"), keys, values1(st, n, x.threads).astype(np.int64))
        u.note_tx(keys, s.pc)
    return stepping_row(run)


@impl("ASYNC.BAR.ARRIVE")
def _bar_arrive(ins):
    d, b = ins.operands
    rows = None if isinstance(d, Reg) and d.n == RZ else slice(d.n, d.n + 1) \
        if isinstance(d, Reg) else slice(d.start, d.end)

    def run(st, s, x):
        u = st.asyn
        keys = u.keys(values1(st, b, x.first), x.first, s.pc)
        par = u.arrive(keys, x.first, s.pc)
        if rows is not None:
            st.R[rows, x.threads] = np.repeat(par, x.per_warp).astype(np.uint32)
            st.stamp(rows)
    return stepping_row(run)


@impl("ASYNC.BAR.WAIT")
def _bar_wait(ins):
    b, p = ins.operands

    def run(st, s, warps, ex, machine):
        x = Exec(warps, ex)
        advance(st, x.idle, s.pc)
        if not x.warps.size:
            return
        u = st.asyn
        keys = u.keys(values1(st, b, x.first), x.first, s.pc)
        par = values1(st, p, x.first).astype(np.int64) & 1
        go = (u.flat("phase")[keys] & 1) != par
        if u.san is not None and go.any():
            u.san.waited(x.warps[go], keys[go], np.full(int(go.sum()), s.pc), check=True)
        if st.timing is not None and go.any():
            st.timing.waited(x.warps[go], keys[go], s.pc)
        advance(st, x.warps[go], s.pc)
        wait = x.warps[~go]
        st.status[wait] = ABAR
        u.wait_bar[wait] = keys[~go] % NBARS
        u.wait_par[wait] = par[~go]
    return async_row(run)


# ---------------------------------------------------------------- counted barriers, fences
@impl("BAR.SYNC.CNT")
def _bar_count(ins):
    b, n = (v.value for v in ins.operands)

    def run(st, s, warps, ex, machine):
        x = Exec(warps, ex)
        advance(st, x.idle, s.pc)
        if not x.warps.size:
            return
        if not 1 <= n <= st.warps_per_block:
            thread_fault(st, x.first[0], s.pc, f"BAR.SYNC.CNT of {n} warps: the block has "
                         f"{st.warps_per_block}")
        st.status[x.warps] = BAR
        st.bar[x.warps] = b
        st.bar_cnt[x.warps] = n
        st.release(x.warps, machine)
    return async_row(run)


def release_counted(st, blocks: np.ndarray, machine) -> None:
    """Release, in ``blocks``, the warps waiting at a BAR.SYNC.CNT whose count is
    reached (the lowest-numbered waiting warps, as many as the count)."""
    wpb = st.warps_per_block
    ws = (blocks[:, None] * wpb + np.arange(wpb)).ravel()
    ws = ws[(st.status[ws] == BAR) & (st.bar_cnt[ws] > 0)]
    if not ws.size:
        return
    key = (ws // wpb) * 16 + st.bar[ws]
    for k in np.unique(key).tolist():
        group = ws[key == k]
        n = int(st.bar_cnt[group[0]])
        if len(group) < n:
            continue
        go = group[:n]
        pc = int(st.pcs[go[0]])
        st.status[go] = RUN
        st.bar[go] = -1
        st.bar_cnt[go] = 0
        st.pcs[go] += 1
        if st.sanitizer is not None:                # orders these warps' accesses
            st.sanitizer.epoch[k // 16] += 1
            if st.asyn.san is not None:
                st.asyn.san.join(go)
        machine.on_barrier(np.array([k // 16]), np.array([k % 16]), np.array([pc]), go)


@impl("FENCE.ASYNC.SHARED")
def _fence(ins):
    def run(st, s, x):
        if st.asyn.san is not None:
            st.asyn.san.fence(x.warps)
    return stepping_row(run)

