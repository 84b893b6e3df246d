"""The Pinghu interpreter: runs a :class:`~..isa.program.Program` on numpy arrays.

``execute(program, args, grid)`` decodes the program once into one closure per
instruction (:mod:`.rows`; cached on the program), binds the arguments (pointer
parameters become global-memory regions over the arrays' own bytes, scalars are written
into constant bank 0) and runs the grid in waves of resident blocks.

Speed by construction: the registers of every thread of every resident block are one
uint32 array ``(registers, threads)`` (register-major: a run over all threads is one
contiguous block; typed views give f32/i32, 64-bit pairs are joined on access), the
predicates one bool array. The scheduler picks the smallest pc among runnable warps and
executes that instruction once, as numpy operations over all threads of all warps at
that pc (fairness: a warp that ran ATOM.CAS/EXCH and then branches backward, a spin
lock's retry, yields to every other runnable warp until only yielding warps can run, so
a lock holder at a larger pc always progresses); a register run ``R[8:40]`` is a row
slice. While every live warp is at the same pc with all lanes active (compiled tile
code, between block-divergent branches) a fast loop runs instructions on a plain slice
of the register file with no per-warp work at all; otherwise warps at one pc that fill
at least a quarter of the span they lie in run on that span's slice with the other warps
masked off, and sparser sets gather their threads. Control flow follows docs/isa.md:
per-warp active masks and reconvergence stacks
(SSY/BRA/SYNC/EXIT), BAR.SYNC makes a warp wait until every non-exited warp of its block
is waiting at the same barrier (BAR.SYNC.CNT: until its count of warps waits). The
asynchronous engines (:mod:`.units.barriers`: AsyncBarriers, TME copies, SQMMA) run as
control-like steps; a warp at ASYNC.BAR.WAIT yields until its phase completes. When
nothing can run, pending asynchronous work completes (TME loads land, SQMMAs finish);
when nothing is pending either, a deadlock is reported. A launch whose state recurs
without a global write, or that outlives ``MUTILE_WATCHDOG`` seconds, is stopped
(:mod:`.progress`); every fault carries a core dump (:mod:`.coredump`).

Where the time goes, and what keeps it down: an instruction over all threads is a few
numpy passes over megabytes of registers, so the interpreter counts passes. Results are
computed straight into their destination rows when every element writes (no copy);
loads and stores check all their addresses from the base registers' extremes and move
data with one ``np.take`` (:mod:`.units.lsu`); WMMA lays fragments out with the warps
innermost (:mod:`.units.warp`); FFMA's exact f32 fma reuses scratch. Facts about
register values (e.g. that every block computes the same shared addresses) are kept
with the rows' write stamps (:meth:`State.stamp`) until the rows change. Measured with
``mutile bench --backend pinghu`` on a shared, noisy 2-core container (numpy 2.4; the
spread is the machine's): the fp16 512^3 matmul (64 blocks x 128 threads) runs in
0.26-0.43 s, 4-head seq-512 attention in 0.27-0.46 s (fp16) and 0.8-1.3 s (f32), about
2-2.4x faster than the first version of this interpreter on the same programs;
``tests/backends/pinghu/machine/bench_interp.py`` executes ~2,300 instructions/s on 32-element
runs over 8192 threads; a single-register instruction costs ~6-12 us.
"""
from __future__ import annotations

import struct
import time

import ml_dtypes
import numpy as np

from mutile.errors import DeviceFault, LaunchError

from ..isa.program import Program
from . import units  # noqa: F401  (every unit enters its rows' builders)
from .coredump import coredump
from .device import EXIT_ROW, PINGHU, Machine, Stats
from .memory import GlobalMemory, Region
from .progress import Progress
from .state import FULL, Sel, State, Step, decode, mask_words
from .units.debug import Printer
from .units.engine import BAR, DONE, RUN, lane_bits

_INT_PARAMS = {"s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64,
               "u64": 64}
_FLOAT_PARAMS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
                 "f64": np.float64}



# ---------------------------------------------------------------- the event loop
def _run(st: State, machine: Machine, started: float) -> None:
    """Run wave ``st`` to its end, one scheduling step after another; the no-progress
    detector and the watchdog (:mod:`.progress`) look in at the marks they set."""
    issue = machine.on_issue
    watch = Progress(st, machine, lambda rec: _step(st, machine, rec), started)
    steps, mark = 0, watch.first_mark()
    while not _step(st, machine, issue):
        steps += 1
        if steps >= mark:
            mark = watch.tick(steps)


def _step(st: State, machine: Machine, issue) -> bool:
    """One scheduling step: the converged fast path while every live warp is at one pc,
    then one instruction for the runnable warps at the smallest pc (or a completion
    event, or the deadlock report). True when the wave is done."""
    steps = st.dec.steps
    n_ins = len(steps)
    live = np.flatnonzero(st.status != DONE)
    if not live.size:
        st.asyn.finish()
        return True
    pcs = st.pcs[live]
    p = int(pcs.min())
    if p == pcs.max() and (st.status[live] == RUN).all() and (st.active[live] == FULL).all():
        p = _converged(st, live, p, steps, issue)
        st.pcs[live] = p
    runnable = live[st.status[live] == RUN]
    if not runnable.size:
        if st.asyn.settle():                # a completion event: async work lands
            return False
        st.deadlock()
    if st.yielding:
        runnable = _fair(st, runnable)
    pcs = st.pcs[runnable]
    p = int(pcs.min())
    warps = runnable[pcs == p]
    if p >= n_ins:                          # running past the end is EXIT
        st.exited[warps] |= st.active[warps]
        st.active[warps] = 0
        st.pop(warps)
        st.asyn.exited(warps)
        issue(n_ins, EXIT_ROW, warps)
        st.release(warps, machine)
        return False
    s = steps[p]
    st.pc = p
    sel = st.select(warps, exact=s.control is not None)
    if s.control is not None:
        issue(p, s.row, warps)          # before its effects: a cycle model times them
        _control(st, s, warps, sel, machine)
        return False
    if not s.never:
        if s.guard is not None:
            sel = sel.with_mask(s.guard(st, sel.threads))
        if sel.mask is None or sel.mask.any():
            if s.lsu and st.timing is not None:
                st.timing.memory(st, s, warps, sel)
            s.run(st, sel)
            if s.writes is not None:
                st.stamp(s.writes)
    st.pcs[warps] = p + 1
    issue(p, s.row, warps)
    return False


def _fair(st: State, runnable: np.ndarray) -> np.ndarray:
    """The warps the scheduler may pick: those not yielding (see :func:`_control`'s BRA),
    or, when only yielding warps can run, all of them (and nobody yields any more)."""
    fresh = runnable[~st.backoff[runnable]]
    if fresh.size:
        return fresh
    st.backoff[:] = False
    st.yielding = False
    return runnable


def _converged(st: State, warps: np.ndarray, p: int, steps, issue) -> int:
    """Run data instructions for ``warps`` (all at pc ``p``, all lanes active) until a
    control instruction or the end; returns the pc reached (a fault leaves the warps'
    pcs at its instruction, for the core dump)."""
    sel = st.select(warps)
    n_ins = len(steps)
    try:
        while p < n_ins:
            s = steps[p]
            if s.control is not None:
                return p
            st.pc = p
            if s.lsu and st.timing is not None and not s.never:
                st.timing.memory(st, s, warps, sel)
            if s.guard is not None:
                g = s.guard(st, sel.threads)
                if g.any():
                    s.run(st, sel.with_mask(g))
            elif not s.never:
                s.run(st, sel)
            if s.writes is not None:
                st.stamp(s.writes)
            issue(p, s.row, warps)
            p += 1
    except DeviceFault:
        st.pcs[warps] = p
        raise
    return p


def _control(st: State, s: Step, warps: np.ndarray, sel: Sel, machine: Machine) -> None:
    c, p = s.control, s.pc
    act = st.active[warps]
    if s.never:
        st.pcs[warps] = p + 1
        return
    ex = act if s.guard is None else mask_words(s.guard(st, sel.threads).reshape(-1, 32)) & act
    if c.kind == "ASYNC":
        c.fn(st, s, warps, ex, machine)
        return
    if c.kind == "BRA":
        taken, none = ex == act, ex == 0
        st.pcs[warps] = np.where(taken, c.target, p + 1)
        if c.target <= p and st.spun[warps].any():    # a spin loop: let the others run
            back = warps[~none & st.spun[warps]]
            st.backoff[back], st.spun[back] = True, False
            st.yielding = bool(back.size) or st.yielding
        div = ~(taken | none)
        if div.any():
            dw = warps[div]
            st.push(dw, c.target, ex[div])
            st.active[dw] = act[div] & ~ex[div]
        return
    if c.kind == "SSY":
        st.push(warps, c.target, act)
        st.pcs[warps] = p + 1
        return
    if c.kind == "BAR":
        arrive = ex != 0
        st.pcs[warps[~arrive]] = p + 1
        aw = warps[arrive]
        st.status[aw] = BAR
        st.bar[aw] = c.bar
        st.release(aw, machine)
        return
    # SYNC / EXIT: the executing lanes leave the active mask
    if c.kind == "EXIT":
        st.exited[warps] |= ex
    elif np.count_nonzero(st.depth[warps]) < warps.size:        # cheap; rare
        _lost_sync(st, warps, ex, sel)
    rest = act & ~ex
    go = rest != 0
    st.active[warps[go]] = rest[go]
    st.pcs[warps[go]] = p + 1
    st.pop(warps[~go])
    st.asyn.exited(warps)
    st.release(warps, machine)          # warps that finished no longer hold a barrier


def _lost_sync(st: State, warps: np.ndarray, ex: np.ndarray, sel: Sel) -> None:
    """Fault for the first warp whose lanes execute SYNC with an empty reconvergence
    stack (if any: some warps at depth 0 may not execute it): they would wait for a
    reconvergence point that no SSY set."""
    bad = (ex != 0) & (st.depth[warps] == 0)
    if not bad.any():
        return
    j = int(np.argmax(bad))
    lane = int(np.argmax(lane_bits(ex[j:j + 1])[0]))
    i = int(np.flatnonzero(sel.thread_array() == int(warps[j]) * 32 + lane)[0])
    st.fault(sel, i, None, "SYNC with an empty reconvergence stack: no SSY set a point for "
             "these lanes to wait at, so they would never run again")


# ---------------------------------------------------------------- launching
def _bind(program: Program, args) -> tuple[np.ndarray, GlobalMemory]:
    params = program.params
    if len(args) != len(params):
        raise LaunchError(f"kernel '{program.name}' takes {len(params)} arguments "
                          f"({', '.join(p.name for p in params)}), got {len(args)}")
    bank = bytearray(-(-program.param_bytes // 8) * 8 + 8)
    regions = []
    for p, a in zip(params, args):
        if p.type == "ptr" and getattr(a, "__mutile_address_table__", False) is True:
            struct.pack_into("<Q", bank, p.offset, _bind_table(p.name, a, regions))
        elif p.type == "ptr":
            arr = a if isinstance(a, np.ndarray) else \
                np.from_dlpack(a) if hasattr(a, "__dlpack__") else np.asarray(a)
            r = Region(len(regions), p.name, arr)
            regions.append(r)
            struct.pack_into("<Q", bank, p.offset, r.pointer)
        elif p.type in _FLOAT_PARAMS:
            raw = np.array(a, np.float64).astype(_FLOAT_PARAMS[p.type]).tobytes()
            bank[p.offset:p.offset + len(raw)] = raw
        else:
            bits = _INT_PARAMS[p.type]
            v = int(a)
            if not -(1 << (bits - 1)) <= v < (1 << bits):
                raise LaunchError(f"argument {p.name}={v} does not fit {p.type}")
            bank[p.offset:p.offset + bits // 8] = (v % (1 << bits)).to_bytes(bits // 8,
                                                                            "little")
    return np.frombuffer(bank, np.uint8).copy(), GlobalMemory(regions)


def _bind_table(name: str, table, regions: list) -> int:
    """Regions for an AddressTable argument ``name`` (``mutile.AddressTable``): one per
    member array (``name[i]``), then the table itself, a read-only int64 array holding
    the members' virtual addresses (of element 0). Returns the table's virtual address."""
    addrs = []
    for i, arr in enumerate(table.arrays):
        r = Region(len(regions), f"{name}[{i}]", arr, f"array {i} of AddressTable '{name}'")
        regions.append(r)
        addrs.append(r.pointer)
    backing = np.array(addrs, np.int64)
    backing.flags.writeable = False
    r = Region(len(regions), name, backing, f"AddressTable '{name}'")
    regions.append(r)
    return r.pointer


def _grid(grid, name: str) -> tuple[int, int, int]:
    """``grid`` as (x, y, z), checked against Pinghu's limits
    (:attr:`~.device.MachineParams.max_grid`)."""
    g = (grid,) if isinstance(grid, int) else tuple(grid)
    g = tuple(int(x) for x in g) + (1,) * (3 - len(g))
    if len(g) != 3 or min(g) < 0:
        raise LaunchError(f"grid {grid!r}: up to three non-negative sizes")
    for axis, n, top in zip("xyz", g, PINGHU.max_grid):
        if n > top:
            raise LaunchError(f"kernel '{name}': grid {g}: {n} blocks along {axis} exceed "
                              f"Pinghu's limit of {top} (x <= {PINGHU.max_grid[0]}, y and "
                              f"z <= {PINGHU.max_grid[1]})")
    return g


def execute(program: Program, args, grid, sanitize: bool = False,
            kernel_name: str | None = None, machine: Machine | None = None,
            debug: dict | None = None) -> Stats:
    """Run ``program`` over ``grid`` = (gx, gy, gz) blocks with ``args`` (one per
    parameter: a numpy array for ``ptr``, a number otherwise); stores land in the arrays.

    ``sanitize`` reports uninitialized shared-memory reads, shared-memory races between
    warps with no BAR.SYNC between them and warps meeting at a barrier from different
    BAR.SYNC instructions. ``kernel_name`` names the kernel in fault messages (default
    the program's). ``machine`` receives the event hooks (default: a counting
    :class:`~.device.Machine`). ``debug``: the kernel's print formats and assertion
    messages (see :mod:`.units.debug`); print records are printed after the launch (or
    before a fault is raised). Returns the machine's :class:`~.device.Stats`. Raises
    :class:`~mutile.errors.LaunchError` for a grid past Pinghu's limits and
    :class:`~mutile.errors.DeviceFault` on a bad memory access, a failed assertion, a
    deadlock, a launch that makes no progress or outlives the watchdog
    (:mod:`.progress`); the fault's ``coredump`` holds the machine's state then
    (:mod:`.coredump`).
    """
    dec = decode(program)
    name = kernel_name or program.name
    g = _grid(grid, name)
    cbank, glob = _bind(program, args)
    machine = machine or Machine()
    params = machine.params
    machine.on_launch(program, g)
    nblocks = machine.blocks_to_run(g[0] * g[1] * g[2])
    per_thread = dec.columns * 4 + dec.preds + program.local
    per_block = program.threads * per_thread + program.shared * (58 if sanitize else 1)
    wave = max(1, min(params.max_resident_threads // program.threads,
                      (1 << 30) // max(per_block, 1)))
    printer = Printer(debug if debug is not None else getattr(program, "debug", None))
    started = time.monotonic()
    try:
        with np.errstate(all="ignore"):         # IEEE results, C integer semantics
            for first in range(0, nblocks, wave):
                ids = np.arange(first, min(first + wave, nblocks))
                st = State(program, dec, name, g, ids, cbank, glob, sanitize, printer)
                machine.on_state(st)
                machine.on_wave(ids, st.nwarps)
                try:
                    _run(st, machine, started)
                except DeviceFault as e:
                    e.coredump = coredump(st, e, machine)
                    raise
                machine.on_wave_end(st)
    finally:
        printer.flush(g)
    return machine.on_finish()
