"""Helpers of the cycle-model tests: ISA listings timed by the model, what-if machine
files, kernels run under ``mutile.profile`` and the invariants every record must keep.

A listing is timed by :func:`timed` (a :class:`TimingMachine` on the interpreter); its
record's ``cycles`` are compared between two lengths of the same body, so a slope is the
cost of the repeated instructions alone, whatever the prologue and ``EXIT`` cost.
"""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import machines
from mutile.backends.pinghu.machine.scheduler import execute
from mutile.backends.pinghu.machine.timing.model import TimingMachine
from mutile.backends.pinghu.machine.timing.params import Timing
from mutile.backends.pinghu.machine.timing.record import STALLS, UTILIZATION_UNITS

from ..interp_kit import binary

DEFAULT = Timing()


def write_machine(tmp_path, name: str, text: str) -> str:
    """A user machine file ``name`` in ``tmp_path`` holding ``text``; returns its path."""
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def listing(body: str, threads: int = 32, shared: int = 0, regs: int | None = None,
            params=(("P", "ptr"),), name: str = "t") -> str:
    """A kernel listing: directives, then ``body`` (instructions, one per line)."""
    lines = [f".kernel {name}"]
    lines += [f".param {n} {t} c[0x{8 * i:x}]" for i, (n, t) in enumerate(params)]
    lines += [f".threads {threads}"] + ([f".regs {regs}"] if regs else [])
    lines += [f".shared {shared}", ".local 0", ""]
    ins = [s.strip() for s in body.strip().splitlines() if s.strip()]
    return "\n".join(lines) + "\n" + "\n".join("        " + s for s in ins) + "\n"


def timed(text: str, args, grid=(1, 1, 1), machine=None, sample=None):
    """Run listing ``text`` under the cycle model; returns its LaunchRecord."""
    m = TimingMachine(machine, sample=sample)
    execute(binary(text), args, grid, machine=m)
    return m.record


def slope(make, n: int, args_of, grid=(1, 1, 1), machine=None):
    """(cycles(2n) - cycles(n)) / n for listings ``make(count)`` run with ``args_of()``,
    and the two records."""
    a = timed(make(n), args_of(), grid, machine)
    b = timed(make(2 * n), args_of(), grid, machine)
    return (b.cycles - a.cycles) / n, a, b


def profiled(fn, machine=None, sample=False):
    """Run ``fn()`` (Pinghu launches) under ``mutile.profile``; returns (its result,
    the records of its launches)."""
    with mutile.profile(machine=machine, sample=sample) as prof:
        out = fn()
    return out, prof.launches


def timing_of(machine) -> Timing:
    """The model's numbers of ``machine`` (a path, a MachineFile or None)."""
    return Timing(machines.load(machine)) if machine is not None else DEFAULT


def check_record(r) -> None:
    """The invariants of every launch record: utilizations in [0, 1], the per-line and
    per-pc tables summing to the totals, issued + stalls == warp-cycles, the roofline."""
    assert set(r.utilization) == set(UTILIZATION_UNITS)
    for u, v in r.utilization.items():
        assert 0.0 <= v <= 1.0 + 1e-12, (r.kernel, u, v)
    approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-6)    # noqa: E731
    assert r.issued + sum(r.stalls.values()) == approx(r.warp_cycles)
    assert set(r.stalls) == set(STALLS)
    assert sum(row.warp_cycles for row in r.by_line) == approx(r.warp_cycles)
    for reason in STALLS:
        assert sum(row.stalls.get(reason, 0.0) for row in r.by_line) == approx(r.stalls[reason])
    for row in r.by_line:
        assert row.issued + sum(row.stalls.values()) == approx(row.warp_cycles)
    idle = r.stalls["idle"]
    assert sum(row.warp_cycles for row in r.by_pc) + idle == approx(r.warp_cycles)
    assert sum(row.issued for row in r.by_pc) == approx(r.issued)
    for reason in ("barrier", "memory", "scoreboard", "issue"):
        assert sum(row.stalls[reason] for row in r.by_pc) == approx(r.stalls[reason])
    # roofline: no launch beats the machine's peaks (in cycles at the modelled clock)
    if r.flops:
        assert r.cycles >= r.flops / (r.peak_tflops * 1e12) * r.clock_hz * (1 - 1e-12)
        assert r.tflops <= r.peak_tflops * (1 + 1e-12)
    assert r.cycles >= r.hbm_bytes / (r.peak_hbm_gbps * 1e9) * r.clock_hz * (1 - 1e-12)
    assert r.hbm_gbps <= r.peak_hbm_gbps * (1 + 1e-12)


def pointers(arr: np.ndarray, index: int = 0):
    """Device addresses of ``arr``'s elements when it is pointer parameter ``index`` of a
    launch (the interpreter's region layout, :class:`..memory.Region`)."""
    from mutile.backends.pinghu.machine.memory import Region
    base = Region(index, "p", arr).pointer
    return base + np.arange(arr.size, dtype=np.int64) * arr.itemsize


@mutile.jit
def chase(NEXT, OUT, STEPS, CHAINS: ml.constexpr, BLOCK: ml.constexpr):
    """Each thread follows CHAINS pointer chains of STEPS dependent loads, one after the
    other (``i = NEXT[i]``): a latency-bound loop."""
    lane = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    for c in ml.static_range(CHAINS):
        i = lane * CHAINS + c
        for s in range(STEPS):
            i = ml.load(NEXT + i)
        ml.store(OUT + lane * CHAINS + c, i)
