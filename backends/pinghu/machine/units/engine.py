"""What the asynchronous units share: warp statuses, AsyncBarrier ids, the :class:`Exec`
of one asynchronous step, operand values, faults naming one thread, the row wrappers the
scheduler runs as control-like steps, and :class:`Engine`, the base of the TME and SQMMA
engines. :mod:`.barriers`, :mod:`.tme`, :mod:`.sqmma` and the async sanitizer import it."""
from __future__ import annotations

import numpy as np

from mutile.ir.ops_pinghu import BARRIER_IDS, USABLE_BARRIERS

from ...isa.operands import RZ, IntImm, Reg, Run
from ..rows import Control

RUN, BAR, DONE, ABAR = 0, 1, 2, 3       # warp status (the scheduler uses the first three)
# AsyncBarrier ids per block, and the reserved one (the last; the machine file has one)
NBARS, RESERVED = BARRIER_IDS, USABLE_BARRIERS
assert BARRIER_IDS - USABLE_BARRIERS == 1, "the interpreter reserves exactly one id"
LANES = np.arange(32)


# ---------------------------------------------------------------- helpers
def lane_bits(ex: np.ndarray) -> np.ndarray:
    """uint32 lane masks -> bool (warps, 32)."""
    m = np.ascontiguousarray(ex, np.uint32)
    return np.unpackbits(m.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little") \
        .astype(bool)


class Exec:
    """Who executes one asynchronous step: ``warps`` with at least one executing lane,
    ``idle`` the others, ``first`` the first executing lane's thread of each warp,
    ``threads`` every executing thread (warp by warp), ``per_warp`` their counts."""

    def __init__(self, warps: np.ndarray, ex: np.ndarray):
        go = ex != 0
        self.warps, self.idle = warps[go], warps[~go]
        self.mask = lane_bits(ex[go])
        self.first = self.warps * 32 + np.argmax(self.mask, axis=1)
        self.threads = (self.warps[:, None] * 32 + LANES)[self.mask]
        self.per_warp = self.mask.sum(axis=1)


def values(st, v, threads: np.ndarray) -> np.ndarray:
    """uint32 values of operand ``v`` (a register, a group ``R[a:b]`` as rows (b - a, n),
    RZ, or an immediate) for ``threads``."""
    if isinstance(v, IntImm):
        return np.full(len(threads), v.value & 0xFFFFFFFF, np.uint32)
    if isinstance(v, Reg):
        return np.zeros(len(threads), np.uint32) if v.n == RZ else st.R[v.n, threads]
    assert isinstance(v, Run), v
    return st.R[v.start:v.end, threads]


def values1(st, v, threads: np.ndarray) -> np.ndarray:
    """Like :func:`values`, a group of one register read as one row."""
    x = values(st, v, threads)
    return x[0] if x.ndim == 2 else x


class _One:
    """The selection of one thread, for :meth:`~..state.State.fault`."""
    __slots__ = ("t",)

    def __init__(self, t: int):
        self.t = t

    def thread(self, i):
        return self.t


def thread_fault(st, thread: int, pc: int, headline: str, info: dict | None = None):
    """Raise the core dump of ``thread`` (wave-wide index) at ``pc``."""
    st.pc = int(pc)
    st.fault(_One(int(thread)), 0, None, headline, info)


def where(st, pc: int) -> str:
    """``pc N: TEXT    // file.py:LINE  source`` of an instruction."""
    return st._where(int(pc))


def advance(st, warps: np.ndarray, pc: int) -> None:
    st.pcs[warps] = pc + 1


def async_row(fn):
    """Wrap ``fn(st, step, warps, ex, machine)`` as the scheduler's control descriptor."""
    return Control("ASYNC", fn=fn)


def stepping_row(fn):
    """An asynchronous row after which every warp at it moves on: ``fn(st, step, x)``
    runs with the :class:`Exec` ``x`` when at least one warp executes it."""
    def run(st, s, warps, ex, machine):
        x = Exec(warps, ex)
        advance(st, warps, s.pc)
        if x.warps.size:
            fn(st, s, x)
    return async_row(run)


# ---------------------------------------------------------------- the unit
class Engine:
    """One asynchronous engine of a wave (``KEY`` names it in ``st.asyn.engines``):
    ``busy`` (work pending), ``settle`` (complete it at a completion event),
    ``fingerprint`` (its pending work into a hash, for :mod:`..progress`)."""
    KEY = ""

    def __init__(self, st):
        self.st = st

    def fingerprint(self, h) -> None:
        """Feed everything that decides this engine's future work to hash ``h`` (every
        engine defines it: an engine the progress checker cannot see would let it call a
        waiting kernel hung)."""
        raise NotImplementedError(f"{type(self).__name__} does not define fingerprint()")

    @classmethod
    def of(cls, st) -> "Engine":
        """The wave's engine of this kind (made on first use)."""
        e = st.asyn.engines.get(cls.KEY)
        if e is None:
            e = st.asyn.engines[cls.KEY] = cls(st)
        return e
