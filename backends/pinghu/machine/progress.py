"""Whether a launch still makes progress: the no-progress detector and the watchdog.

**No progress.** The interpreter is deterministic: what a scheduling step does depends on
the machine state alone (every warp's pc, status, active and exited lanes, reconvergence
stack and barrier wait, the registers, predicates, shared and local memory, the
AsyncBarriers' counts and parities, the engines' pending work) and on global memory. So if
the state at one step boundary comes back later with no global-memory write in between,
the launch loops forever. :class:`Progress` samples the state's hash (128-bit blake2b)
every ``interval`` steps and finds a recurrence with Brent's cycle detection: the
*anchor* is the sample taken at the last power-of-two count of samples since the last
global write; a later sample equal to it is a cycle (of any period: a flag toggling
between two values is caught as surely as a value that never changes), reported at once
as a :class:`~mutile.errors.DeviceFault` naming the ISA and Python lines the warps loop
over. A launch whose state keeps changing (a counter, a store to global memory in every
iteration) is never stopped by it. Facts kept for messages or the sanitizer only
(completed-phase counts, sanitizer epochs, write stamps) are not state.

Cost: the first sample is after 1024 steps (most launches finish before), a sample hashes
about one copy of the registers and on-chip memory, and the interval doubles (up to 65536
steps) whenever a hash costs more than 1/64 of the time since the previous sample; a
sample right after a global write only notes the write, without hashing.

**Watchdog.** ``MUTILE_WATCHDOG=S`` (seconds, default 600, ``0`` off; the llvm backend
reads the same variable) bounds a launch's wall time: a launch still running after ``S``
seconds stops with a DeviceFault saying how long it ran, how many warp instructions it
retired and where its warps are. The clock is read every 64 steps.
"""
from __future__ import annotations

import hashlib
import math
import time

import numpy as np

from mutile.errors import DeviceFault
from mutile.watchdog import WATCHDOG_ENV, watchdog_seconds

CLOCK_EVERY = 64              # steps between reads of the clock
FIRST_SAMPLE = 1024           # steps before the first state sample
MAX_INTERVAL = 1 << 16        # most steps between two samples
COST_SHARE = 64               # a sample may cost 1/COST_SHARE of the time between samples
EXACT_PERIOD_BUDGET = 0.25    # seconds of hashing spent to find the exact period
RUN, BAR, DONE, ABAR = 0, 1, 2, 3


def state_digest(st) -> bytes:
    """The 128-bit hash of everything that decides what wave ``st`` does next (global
    memory aside)."""
    h = hashlib.blake2b(digest_size=16)
    for a in (st.R, st.P, st.pcs, st.status, st.active, st.exited, st.bar, st.bar_cnt,
              st.depth, st.shared_mem.buf, st.local_mem.buf):
        h.update(a)
    live = np.arange(st.stack_pc.shape[1]) < st.depth[:, None]
    h.update(np.where(live, st.stack_pc, -1))
    h.update(np.where(live, st.stack_mask, 0))
    u = st.asyn
    for a in (u.inited, u.count, u.pending, u.tx, u.phase & 1, u.wait_bar, u.wait_par):
        h.update(np.ascontiguousarray(a))
    for key in sorted(u.engines):
        u.engines[key].fingerprint(h)
    return h.digest()


class Progress:
    """The no-progress detector and the watchdog of one wave (see the module docstring).
    The event loop calls :meth:`tick` when its step count reaches the mark the previous
    call returned; ``step(issue)`` runs one scheduling step (for replaying a cycle)."""

    def __init__(self, st, machine, step, started: float):
        self.st, self.machine, self.step, self.started = st, machine, step, started
        self.limit = watchdog_seconds()
        self.deadline = started + self.limit if self.limit > 0 else math.inf
        self.interval = FIRST_SAMPLE
        self.next_sample = FIRST_SAMPLE
        self.writes = -1                 # global writes at the previous sample
        self.anchor = None               # (digest, step) of the anchor sample
        self.power = self.since = 0      # Brent: samples until the anchor moves, taken
        self.last = time.monotonic()

    def first_mark(self) -> int:
        return CLOCK_EVERY

    def tick(self, steps: int) -> int:
        """Step ``steps`` is reached: read the clock, maybe sample; the next mark."""
        now = time.monotonic()
        if now > self.deadline:
            self.watchdog(now, steps)
        if steps >= self.next_sample:
            self._sample(steps, now)
        return min(steps + CLOCK_EVERY, self.next_sample)

    def _sample(self, steps: int, now: float) -> None:
        self.next_sample = steps + self.interval
        writes = self.st.glob.writes
        if writes != self.writes:         # memory changed: start over, hash next time
            self.writes, self.anchor = writes, None
            return
        t0 = time.monotonic()
        d = state_digest(self.st)
        cost = time.monotonic() - t0
        if self.anchor is not None:
            self.since += 1
            if d == self.anchor[0]:
                self.no_progress(steps - self.anchor[1], d, cost)
            if self.since < self.power:
                return
            self.power *= 2
        else:
            self.power = 1
        self.anchor, self.since = (d, steps), 0
        if cost * COST_SHARE > now - self.last and self.interval < MAX_INTERVAL:
            self.interval *= 2
            self.next_sample = steps + self.interval
        self.last = time.monotonic()

    # ------------------------------------------------------------ reports
    def no_progress(self, distance: int, digest: bytes, cost: float):
        """Raise the fault of a state that recurs after ``distance`` steps: replay one
        cycle to learn its pcs (and its exact period, when hashing each step is cheap)."""
        st = self.st
        pcs: set = set()

        def record(pc, row, warps):
            pcs.add(pc)

        exact = cost * distance < EXACT_PERIOD_BUDGET
        period = distance
        for k in range(1, distance + 1):
            self.step(record)
            if exact and k < distance and state_digest(st) == digest:
                period = k
                break
        live = np.flatnonzero(st.status != DONE)
        running = live[st.status[live] == RUN]
        waiting = live[st.status[live] != RUN]
        loop = sorted(p for p in pcs if p < len(st.dec.steps))
        shown = [f"  {st._where(p)}" for p in loop[:12]]
        if len(loop) > 12:
            shown.append(f"  ... and {len(loop) - 12} more instructions")
        for p in sorted(set(st.pcs[waiting].tolist()))[:4]:
            n = int((st.pcs[waiting] == p).sum())
            shown.append(f"  {n} warp(s) wait at {st._where(p)}")
        first = int((running if running.size else live)[0])
        st.culprit = (first, None, int(st.pcs[first]))
        at = next((st.dec.steps[p].ins.loc for p in loop if st.dec.steps[p].ins.loc), None)
        raise DeviceFault(f"kernel '{st.name}': no progress: the machine returns to the same "
                          f"state every {period} scheduling steps, with no global-memory "
                          f"write in between (it loops forever); {running.size} warp(s) "
                          f"running, looping over\n" + "\n".join(shown), at)

    def watchdog(self, now: float, steps: int):
        """Raise the fault of a launch that ran past the watchdog's limit."""
        st = self.st
        live = np.flatnonzero(st.status != DONE)
        pcs = st.pcs[live]
        lines = []
        for p in sorted(set(pcs.tolist()))[:8]:
            ws = live[pcs == p]
            blk, w = divmod(int(ws[0]), st.warps_per_block)
            lines.append(f"  {ws.size} warp(s) (first: block {st.block_coords(blk)}, warp {w}) "
                         f"at {st._where(p)}")
        st.culprit = (int(live[0]), None, int(st.pcs[live[0]]))
        at = st.dec.steps[min(int(pcs.min()), len(st.dec.steps) - 1)].ins.loc
        raise DeviceFault(f"kernel '{st.name}': watchdog: still running after "
                          f"{now - self.started:.1f} s ({WATCHDOG_ENV}={self.limit:g}: raise "
                          f"{WATCHDOG_ENV} for longer runs, 0 turns it off); "
                          f"{self.machine.retired()} warp instructions retired; "
                          f"{live.size} warp(s) still running, at\n" + "\n".join(lines), at)
