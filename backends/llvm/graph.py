"""Replaying a captured graph on the llvm backend: one native job for every kernel.

:class:`GraphPlan` packs each captured launch's arguments once (the slots of
:func:`.launch.pack_args`) into a table of launch records (``native_pool.REC_*``), and a
replay hands that table to the worker threads in one post: each worker runs its share of
each kernel's programs, with a barrier after every kernel (capture order is dependency
order), so no Python runs between kernels. With ``overlap``, no barrier separates two
neighbouring kernels when neither writes an array the other touches (judged from the
arrays' byte ranges and the pointer parameters each kernel stores through). A replay
after :meth:`GraphPlan.set_arg` packs only the launches whose arrays changed.

A fault in kernel ``r`` ends the replay after the kernels before it have finished and
is raised as the launch would raise it, with ``graph_index = r``.
"""
from __future__ import annotations

import ctypes

import numpy as np

from mutile.watchdog import watchdog_seconds

from .launch import (CPUS, _grid3, _libc, pack_args, programs_address, raise_faults,
                     run_records)
from .native_pool import REC_BARRIER, REC_SIZE


SMALL_GRID = 64        # below this many programs in every kernel, one worker runs the graph


class GraphPlan:
    """The native form of a captured graph (see the module docstring)."""

    def __init__(self, kernels, args, grids, num_threads=None, overlap=False, stored=None):
        self.kernels = list(kernels)
        self.args = [list(a) for a in args]
        self.grids = [_grid3(g) for g in grids]
        self.stored = [set(s) for s in (stored or [()] * len(self.kernels))]
        self.overlap = overlap
        self.records = np.zeros((len(self.kernels), REC_SIZE), np.int64)
        self.packed = [None] * len(self.kernels)      # (slots, keep, ranges, extra)
        for i in range(len(self.kernels)):
            self._pack(i)
        totals = [gx * gy * gz for gx, gy, gz in self.grids]
        if num_threads is None and max(totals) < SMALL_GRID:
            num_threads = 1     # small kernels: barriers between threads cost more than they win
        self.nthreads = max(1, min(int(num_threads or CPUS), max(totals)))
        self.stack = max(k.frame_bytes for k in self.kernels)
        self.prints = any(k.prints for k in self.kernels)
        self._barriers()

    def _pack(self, i: int) -> None:
        k, extra = self.kernels[i], []
        slots, keep, ranges = pack_args(k.param_types, k.param_names, self.args[i], None, extra)
        self.packed[i] = (slots, keep, ranges, extra)
        gx, gy, gz = self.grids[i]
        self.records[i, :REC_BARRIER] = (programs_address(k), ctypes.addressof(slots),
                                         gx, gy, gz, gx * gy * gz)

    def _touched(self, i: int):
        """([lo, hi) ranges kernel ``i`` writes, the ranges it reads or writes)."""
        k, ranges = self.kernels[i], self.packed[i][2]
        writes, touches = [], []
        for p, r in enumerate(ranges):
            if r is None:
                continue
            touches.append(r)
            if p in self.stored[i]:
                writes.append(r)
        if self.packed[i][3]:           # AddressTable members: no overlap judged for them
            touches.append((0, 1 << 64))
        if k.int_pointers:              # pointers made from integers: anything
            writes.append((0, 1 << 64))
            touches.append((0, 1 << 64))
        return writes, touches

    def _barriers(self) -> None:
        """A barrier after each kernel, unless ``overlap`` and the next one is independent
        of every kernel since the last barrier."""
        n = len(self.kernels)
        self.records[:, REC_BARRIER] = 1
        if not self.overlap:
            return
        since = []                          # (writes, touches) since the last barrier
        for i in range(n):
            mine = self._touched(i)
            if since and any(_meet(w, mine[1]) or _meet(mine[0], t) for w, t in since):
                self.records[i - 1, REC_BARRIER] = 1
                since = []
            elif i:
                self.records[i - 1, REC_BARRIER] = 0
            since.append(mine)
        self.records[n - 1, REC_BARRIER] = 1

    def set_arg(self, i: int, position: int, value) -> None:
        """Launch ``i`` takes ``value`` as its argument ``position`` from the next replay."""
        self.args[i][position] = value
        self._pack(i)
        self._barriers()

    def replay(self) -> None:
        limit = watchdog_seconds()
        faults, where, stopped = run_records(self.records.ctypes.data, self.kernels,
                                             self.nthreads, self.stack, limit)
        if self.prints:
            _libc.fflush(None)
        bad = [w for w in where if w >= 0]
        if not bad and stopped is None:
            return
        r = min(bad) if bad else 0
        rows = [f for f, w in zip(faults, where) if w == r] if bad else faults
        slots, _, ranges, extra = self.packed[r]
        try:
            raise_faults(self.kernels[r], rows, ranges, self.grids[r], slots, extra,
                         stopped, limit)
        except Exception as e:
            e.graph_index = r
            raise


def _meet(a, b) -> bool:
    """Whether some range of ``a`` overlaps some range of ``b``."""
    return any(lo < hi2 and lo2 < hi for lo, hi in a for lo2, hi2 in b)
