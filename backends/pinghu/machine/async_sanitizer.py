"""The asynchronous half of the shared-memory sanitizer (``execute(..., sanitize=True)``).

Per shared byte of the wave it keeps the TME copy that writes (or wrote) it, the SQMMA
issue that reads it, and, for bytes written by a generic store, the writer's fence count
and pc; per warp and AsyncBarrier the latest phase (by serial) the warp has observed
through a wait. Every report is a :class:`~mutile.errors.DeviceFault` naming both sides
by ISA line and Python line, and the block and warp:

(a) a shared read (LSU.LD.SHARED, an SQMMA operand, a TME store source) of bytes a TME
    load is still writing, or that landed but whose phase the reading warp has not
    observed through ASYNC.BAR.WAIT, its own or one of its block's warps' before a
    BAR.SYNC they both passed (a generic write to such bytes is reported too);
(b) a shared write (LSU.ST.SHARED, a TME load issue) of bytes a pending SQMMA reads;
(c) transaction bytes below zero (always a fault: :mod:`.units.tme`);
(d) a wait that passes at once and observes no newer phase than the warp's previous
    wait on that barrier (the first wait, on a barrier that never completed a phase,
    with parity 1 is the "empty barrier" idiom and passes quietly);
(e) one ASYNC.BAR.ARRIVE bringing more warps than the phase still waits for
    (:meth:`.units.barriers.AsyncUnit.arrive`);
(f) an SQMMA operand or TME store source written by a generic store whose warp has not
    executed FENCE.ASYNC.SHARED since.

TME-landed bytes count as written for the uninitialized-read check, and asynchronous
reads go through the race checker as reads of the issuing warp. The race checker's
epochs advance when a phase of an AsyncBarrier completes (an approximation: accesses on
either side of any completed phase of the block count as ordered).
"""
from __future__ import annotations

import numpy as np

from .units.engine import NBARS, thread_fault, where
from .rows import fault_first


class _Table:
    """Growing integer columns (row ids are indices)."""

    def __init__(self, *names):
        self.n = 0
        self.cols = {k: np.zeros(16, np.int64) for k in names}

    def add(self, count: int, **vals) -> np.ndarray:
        while self.n + count > len(next(iter(self.cols.values()))):
            for k, v in self.cols.items():
                self.cols[k] = np.concatenate([v, np.zeros_like(v)])
        ids = np.arange(self.n, self.n + count)
        for k, v in vals.items():
            self.cols[k][ids] = v
        self.n += count
        return ids

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]


class AsyncSanitizer:
    """Checks (a)-(f) of the module docstring for one wave."""

    def __init__(self, st, unit):
        self.st, self.unit = st, unit
        self.gen = st.sanitizer
        nbytes, W = len(st.shared_mem.buf), st.nwarps
        self.tme = np.full(nbytes, -1, np.int64)       # TME copy id
        self.mma = np.full(nbytes, -1, np.int64)       # SQMMA group id
        self.wfence = np.full(nbytes, -1, np.int64)    # writer's fence count at the write
        self.wpc = np.full(nbytes, -1, np.int64)       # pc of the generic write
        self.fences = np.zeros(W, np.int64)
        self.seen = np.full((W, NBARS), -1, np.int64)   # serial of the latest observed phase
        self.dlast = np.full((W, NBARS), -1, np.int64)  # ... by the latest wait (since INIT)
        self.dpc = np.full((W, NBARS), -1, np.int64)
        self.copies = _Table("pc", "key", "serial")     # serial -1 until landed
        self.groups = _Table("pc", "left")              # SQMMA issues: warps not completed

    # ------------------------------------------------------------ barriers, fences
    def phase_done(self, blocks) -> None:
        self.gen.epoch[np.unique(blocks)] += 1

    def block_barrier(self, blocks) -> None:
        """A BAR.SYNC of ``blocks`` released: see :meth:`join`."""
        wpb = self.st.warps_per_block
        s = self.seen.reshape(-1, wpb, NBARS)
        s[blocks] = s[blocks].max(axis=1, keepdims=True)

    def join(self, warps) -> None:
        """``warps`` (of one block) passed a barrier together: what one of them observed
        through its waits, all of them have now observed (happens-before)."""
        self.seen[warps] = self.seen[warps].max(axis=0)

    def reinit(self, keys) -> None:
        wpb = self.st.warps_per_block
        for k in np.asarray(keys).tolist():
            ws = slice(k // NBARS * wpb, (k // NBARS + 1) * wpb)
            self.dlast[ws, k % NBARS] = -1

    def fence(self, warps) -> None:
        self.fences[warps] += 1

    def waited(self, warps, keys, pcs, check: bool) -> None:
        """``warps`` passed waits (at ``pcs``) on barriers ``keys``; ``check``: the waits
        passed at once (check (d))."""
        bar = keys % NBARS
        serial = self.unit.flat("serial")[keys]
        if check:
            stale = serial <= self.dlast[warps, bar]
            if stale.any():
                j = int(np.argmax(stale))
                w, b = int(warps[j]), int(bar[j])
                thread_fault(self.st, w * 32, pcs[j], f"waits on a phase of AsyncBarrier {b} "
                             f"it has already waited for: the wait passes at once and "
                             f"synchronizes with nothing new (wrong phase parity?)\n  the "
                             f"earlier wait: {where(self.st, self.dpc[w, b])}")
        self.seen[warps, bar] = np.maximum(self.seen[warps, bar], serial)
        self.dlast[warps, bar] = serial
        self.dpc[warps, bar] = pcs

    # ------------------------------------------------------------ TME copies
    def _unwaited(self, ids, warps) -> np.ndarray:
        """Whether the TME copies ``ids`` (>= 0) are unlanded or unobserved by ``warps``
        (arrays broadcasting together)."""
        serial = self.copies["serial"][ids]
        bar = self.copies["key"][ids] % NBARS
        return (serial < 0) | (self.seen[warps, bar] < serial + 1)

    def _copy_text(self, verb: str, copy: int) -> str:
        return f"{verb} shared memory that the TME copy at " \
               f"{where(self.st, self.copies['pc'][copy])} has not been waited for"

    def tme_issue(self, threads, pc, keys, byts) -> np.ndarray:
        """TME loads by ``threads`` will write bytes ``byts`` (copies, bytes): check (b),
        mark them; returns the copy ids."""
        self._pending_sqmma(threads, pc, byts, "this TME copy")
        ids = self.copies.add(len(threads), pc=pc, key=keys, serial=-1)
        self.tme[byts] = ids[:, None]
        return ids

    def tme_land(self, ids, keys, byts) -> None:
        self.copies["serial"][ids] = self.unit.flat("serial")[keys]
        self.tme[byts] = ids[:, None]
        g = self.gen
        g.init[byts] = True
        g.writer[byts] = -1
        g.reader[byts] = -1
        self.wpc[byts] = -1

    # ------------------------------------------------------------ SQMMA
    def sqmma_issue(self, threads, pc, byts) -> int:
        """An SQMMA issue by the warps of ``threads`` will read ``byts`` (warps, bytes)."""
        self.async_read(threads, pc, byts, "the SQMMA")
        gid = int(self.groups.add(1, pc=pc, left=len(threads))[0])
        self.mma[byts] = gid
        return gid

    def sqmma_done(self, gid: int, count: int) -> None:
        if gid >= 0:
            self.groups["left"][gid] -= count

    def _pending_sqmma(self, threads, pc, byts, what: str) -> None:
        gids = self.mma[byts]
        bad = (gids >= 0) & (self.groups["left"][np.maximum(gids, 0)] > 0)
        if bad.any():
            j = int(np.argmax(bad.any(axis=1)))
            g = int(gids[j][bad[j]][0])
            thread_fault(self.st, threads[j], pc, self._sqmma_text(what, g))

    def _sqmma_text(self, what: str, gid: int) -> str:
        return f"{what} overwrites shared memory that the SQMMA at " \
               f"{where(self.st, self.groups['pc'][gid])} still reads"

    # ------------------------------------------------------------ reads and writes
    def async_read(self, threads, pc, byts, what: str) -> None:
        """An asynchronous read (``what``) for the warps of ``threads`` (one per row) of
        bytes ``byts`` (rows, bytes): checks (a), (f), uninitialized bytes and races with
        generic writes; records the reads."""
        st, g = self.st, self.gen
        warps = (np.asarray(threads) // 32)[:, None]
        ids = self.tme[byts]
        bad = (ids >= 0) & self._unwaited(np.maximum(ids, 0), warps)
        if bad.any():
            j = int(np.argmax(bad.any(axis=1)))
            thread_fault(st, threads[j], pc, f"{what} " + self._copy_text(
                "reads", int(ids[j][bad[j]][0])))
        self._check_uninit(threads, pc, byts, what)
        wr = g.writer[byts]
        nofence = (wr >= 0) & (self.wfence[byts] == self.fences[np.maximum(wr, 0)])
        if nofence.any():
            j = int(np.argmax(nofence.any(axis=1)))
            e = int(np.argmax(nofence[j]))
            thread_fault(st, threads[j], pc, f"{what} reads shared memory written by warp "
                         f"{int(wr[j, e]) % st.warps_per_block} with no FENCE.ASYNC.SHARED "
                         f"by the writer in between\n  the write: "
                         f"{where(st, self.wpc[byts[j, e]])}")
        blocks = (byts // st.shared_mem.pad)
        ep = g.epoch[blocks]
        racy = (wr >= 0) & (wr != warps) & (g.wepoch[byts] == ep)
        if racy.any():
            j = int(np.argmax(racy.any(axis=1)))
            e = int(np.argmax(racy[j]))
            thread_fault(st, threads[j], pc, g._race(st, f"reads (by {what})", byts[j, e],
                                                     blocks[j, e], int(wr[j, e]), 1))
        r, same = g.reader[byts], g.repoch[byts] == ep
        g.reader[byts] = np.where(~same | (r == -1), warps, np.where(r == warps, r, -2))
        g.repoch[byts] = ep

    def _check_uninit(self, threads, pc, byts, what) -> None:
        bad = ~self.gen.init[byts]
        if bad.any():
            j = int(np.argmax(bad.any(axis=1)))
            b = int(byts[j][bad[j]][0])
            thread_fault(self.st, threads[j], pc, f"uninitialized shared memory read: {what} "
                         f"reads shared address 0x{b % self.st.shared_mem.pad:x}, which no "
                         f"thread of the block has written")

    def generic(self, st, sel, ins, b, pick, warp, write: bool) -> None:
        """An LSU shared access of bytes ``b`` (elements, nbytes) by ``warp`` (per
        element): checks (a) and, for a write, (b); a write makes the bytes generic."""
        ids = self.tme[b]
        bad = (ids >= 0) & self._unwaited(np.maximum(ids, 0), warp[:, None])
        if bad.any():
            fault_first(st, sel, ins, bad.any(axis=1), pick, lambda j: self._copy_text(
                "writes" if write else "reads", int(ids[j][bad[j]][0])))
        if not write:
            return
        gids = self.mma[b]
        bad = (gids >= 0) & (self.groups["left"][np.maximum(gids, 0)] > 0)
        if bad.any():
            fault_first(st, sel, ins, bad.any(axis=1), pick, lambda j: self._sqmma_text(
                "this store", int(gids[j][bad[j]][0])))
        self.tme[b] = -1
        self.wfence[b] = self.fences[warp][:, None]
        self.wpc[b] = st.pc
