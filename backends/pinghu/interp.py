"""The Pinghu interpreter: runs a :class:`~.program.Program` on numpy arrays.

``execute(program, args, grid)`` decodes the program once into one closure per
instruction (:mod:`.interp_ops`; cached on the program), binds the arguments (pointer
parameters become global-memory regions over the arrays' own bytes, scalars are written
into constant bank 0) and runs the grid in waves of resident blocks.

Speed by construction: the registers of every thread of every resident block are one
uint32 array ``(registers, threads)`` (register-major: a run over all threads is one
contiguous block; typed views give f32/i32, 64-bit pairs are joined on access), the
predicates one bool array. The scheduler picks the smallest pc among runnable warps and
executes that instruction once, as numpy operations over all threads of all warps at
that pc; a register run ``R[8:40]`` is a row slice. While every live warp is at the
same pc with all lanes active (compiled tile code, between block-divergent branches) a
fast loop runs instructions on a plain slice of the register file with no per-warp work
at all; otherwise warps at one pc that fill at least a quarter of the span they lie in
run on that span's slice with the other warps masked off, and sparser sets gather their
threads. Control flow follows docs/isa.md: per-warp active masks and reconvergence stacks
(SSY/BRA/SYNC/EXIT), BAR.SYNC makes a warp wait until every non-exited warp of its block
is waiting at the same barrier (BAR.SYNC.CNT: until its count of warps waits). The
asynchronous engines (:mod:`.interp_async`: AsyncBarriers, TME copies, SQMMA) run as
control-like steps; a warp at ASYNC.BAR.WAIT yields until its phase completes. When
nothing can run, pending asynchronous work completes (TME loads land, SQMMAs finish);
when nothing is pending either, a deadlock is reported. A launch whose state recurs
without a global write, or that outlives ``MUTILE_WATCHDOG`` seconds, is stopped
(:mod:`.interp_progress`); every fault carries a core dump (:mod:`.interp_coredump`).

Where the time goes, and what keeps it down: an instruction over all threads is a few
numpy passes over megabytes of registers, so the interpreter counts passes. Results are
computed straight into their destination rows when every element writes (no copy);
loads and stores check all their addresses from the base registers' extremes and move
data with one ``np.take`` (:mod:`.interp_lsu`); WMMA lays fragments out with the warps
innermost (:mod:`.interp_warp`); FFMA's exact f32 fma reuses scratch. Facts about
register values (e.g. that every block computes the same shared addresses) are kept
with the rows' write stamps (:meth:`State.stamp`) until the rows change. Measured with
``mutile bench --backend pinghu`` on a shared, noisy 2-core container (numpy 2.4; the
spread is the machine's): the fp16 512^3 matmul (64 blocks x 128 threads) runs in
0.26-0.43 s, 4-head seq-512 attention in 0.27-0.46 s (fp16) and 0.8-1.3 s (f32), about
2-2.4x faster than the first version of this interpreter on the same programs;
``tests/backends/pinghu/bench_interp.py`` executes ~2,300 instructions/s on 32-element
runs over 8192 threads; a single-register instruction costs ~6-12 us.
"""
from __future__ import annotations

import struct
import time

import ml_dtypes
import numpy as np

from mutile.errors import DeviceFault, LaunchError

from . import interp_lsu  # noqa: F401  (its rows register; the other modules' below)
from .disasm import format_instruction, label_names
from .interp_async import AsyncUnit, release_counted, report_deadlock
from .interp_coredump import coredump
from .interp_debug import Printer
from .interp_mem import GlobalMemory, LocalMemory, Region, SharedMemory, SharedSanitizer
from .interp_ops import Control, build, pred_reader
from .interp_progress import Progress
from .interp_warp import LANES
from .machine import EXIT_ROW, PINGHU, Machine, Stats
from .operands import PT, RZ, Comment, Pred, PredRun, Reg, Run
from .program import LOC_COMMENT, Program, registers_used

RUN, BAR, DONE = 0, 1, 2      # and ABAR (interp_async): waiting at ASYNC.BAR.WAIT
FULL = np.uint32(0xFFFFFFFF)
_INT_PARAMS = {"s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64,
               "u64": 64}
_FLOAT_PARAMS = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
                 "f64": np.float64}


# ---------------------------------------------------------------- decoding
class Step:
    """One decoded instruction: ``run(st, sel)`` (data rows) or ``control`` (a
    :class:`~.interp_ops.Control`), the guard reader (None: unguarded), ``never`` for
    ``@!PT``, the ISA ``text`` and the ``source`` comment that located it."""
    __slots__ = ("pc", "ins", "row", "run", "control", "guard", "never", "text", "source",
                 "writes")

    def __init__(self, pc, ins, text, source):
        self.pc, self.ins, self.row, self.text, self.source = pc, ins, ins.op, text, source
        made = build(ins)
        self.control = made if isinstance(made, Control) else None
        self.run = None if self.control else made
        g = ins.guard
        self.never = isinstance(g, Pred) and g.n == PT and g.neg
        self.guard = None if g is None or (isinstance(g, Pred) and g.n == PT) \
            else pred_reader(g)
        self.writes = _written_rows(ins)


def _written_rows(ins) -> slice | None:
    """The register rows ``ins`` writes (None: none), for :meth:`State.stamp`."""
    specs = ins.op.operands
    if not specs or not specs[0].dst or not ins.operands:
        return None
    v = ins.operands[0]
    if isinstance(v, Reg) and v.n != RZ:
        return slice(v.n, v.n + specs[0].width)
    return slice(v.start, v.end) if isinstance(v, Run) else None


class Decoded:
    """A program decoded for the interpreter: its steps, register columns and predicates."""

    def __init__(self, program: Program):
        names = label_names(program)[0]
        self.steps: list[Step] = []
        source = None
        for pc, ins in enumerate(program.instructions):
            for item in ins.prelude:
                if isinstance(item, Comment) and LOC_COMMENT.match(item.text):
                    source = item.text
            self.steps.append(Step(pc, ins, format_instruction(ins, names, comment=False),
                                   source))
        regs = self.regs = max(program.regs, registers_used(program.instructions), 1)
        self.columns = -(-regs // 4) * 4
        self.preds = 1 + max([_top_pred(v) for ins in program.instructions
                              for v in (*ins.operands, ins.guard)], default=0)


def _top_pred(v) -> int:
    if isinstance(v, Pred) and v.n != PT:
        return v.n
    return v.end - 1 if isinstance(v, PredRun) else 0


def decode(program: Program) -> Decoded:
    """The decoded form of ``program``, cached on it (re-decoded if its instructions
    were replaced)."""
    key = (program.regs, tuple(map(id, program.instructions)))
    hit = program.__dict__.get("_interp_decoded")
    if hit is None or hit[0] != key:
        hit = program.__dict__["_interp_decoded"] = (key, Decoded(program))
    return hit[1]


# ---------------------------------------------------------------- selections
class Sel:
    """The threads one instruction executes for: ``threads`` (columns of the register
    file: a slice or an index array; whole warps), ``n`` of them, and ``mask`` (None, or
    bool (1, n) / (count, n): which elements write)."""
    __slots__ = ("threads", "n", "mask", "is_slice")

    def __init__(self, threads, n, mask=None):
        self.threads, self.n, self.mask = threads, n, mask
        self.is_slice = isinstance(threads, slice)

    def with_mask(self, mask) -> "Sel":
        """The same threads with ``mask`` (None keeps this one's)."""
        if mask is None:
            return self
        if self.mask is not None:
            mask = mask & self.mask
        return Sel(self.threads, self.n, mask)

    def thread(self, i):
        """Wave-wide index of selected thread ``i`` (int or array)."""
        return self.threads.start + i if self.is_slice else self.threads[i]

    def thread_array(self) -> np.ndarray:
        """The selected threads as an index array."""
        return np.arange(self.threads.start, self.threads.stop) if self.is_slice \
            else self.threads


def _bits(b: np.ndarray) -> np.ndarray:
    """Bool (warps, 32) -> uint32 lane masks."""
    return np.packbits(b, axis=1, bitorder="little").view(np.uint32).ravel()


def _lanes(m: np.ndarray) -> np.ndarray:
    """uint32 lane masks -> bool (warps, 32)."""
    m = np.ascontiguousarray(m, np.uint32)
    return np.unpackbits(m.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little") \
        .astype(bool)


# ---------------------------------------------------------------- machine state
class State:
    """Registers, memories and warps of one wave of resident blocks."""

    def __init__(self, program, dec, name, grid, block_ids, cbank, glob, sanitize, printer):
        self.program, self.dec, self.name, self.grid = program, dec, name, grid
        self.block_ids, self.glob, self.printer, self.pc = block_ids, glob, printer, 0
        t = self.threads = program.threads
        nb = len(block_ids)
        self.warps_per_block = t // 32
        T = self.nthreads = nb * t
        R = self.R = np.zeros((dec.columns, T), np.uint32)
        self.reg = {"u32": R, "i32": R.view(np.int32), "f32": R.view(np.float32)}
        self.P = np.zeros((dec.preds, T), bool)
        self.version, self.tick = np.zeros(dec.columns, np.int64), 1   # see stamp()
        self.plans: dict = {}
        self.cb = {v: cbank.view(dt).reshape(-1, 1, 1) for v, dt in
                   [("u32", np.uint32), ("i32", np.int32), ("f32", np.float32),
                    ("u64", np.uint64), ("i64", np.int64), ("f64", np.float64)]}
        self.thread_index = np.arange(T)
        self.thread_block = self.thread_index // t
        self.shared_mem = SharedMemory(program.shared, nb)
        self.local_mem = LocalMemory(program.local, T)
        self.sanitizer = SharedSanitizer(len(self.shared_mem.buf), self.warps_per_block, nb) \
            if sanitize else None
        self.sr = self._special_registers()
        W = self.nwarps = T // 32
        self.pcs = np.zeros(W, np.int64)
        self.status = np.zeros(W, np.int8)
        self.active = np.full(W, FULL, np.uint32)
        self.exited = np.zeros(W, np.uint32)
        self.bar = np.full(W, -1, np.int64)
        self.bar_cnt = np.zeros(W, np.int64)            # BAR.SYNC.CNT's warp count
        self.depth = np.zeros(W, np.int64)
        self.stack_pc = np.zeros((W, 4), np.int64)
        self.stack_mask = np.zeros((W, 4), np.uint32)
        self.asyn = AsyncUnit(self)
        self.culprit = None       # (warp, lanes or None, pc) a fault names: core dump

    def _special_registers(self) -> dict:
        t, gx, gy, gz = self.threads, *self.grid
        tid = self.thread_index % t
        b = self.block_ids[self.thread_block]
        col = {"SR_TID.X": tid, "SR_LANEID": tid % 32, "SR_WARPID": tid // 32,
               "SR_SQUADID": tid // 128, "SR_CTAID.X": b % gx, "SR_CTAID.Y": (b // gx) % gy,
               "SR_CTAID.Z": b // (gx * gy)}
        out = {k: v.astype(np.uint32)[None, :] for k, v in col.items()}
        for k, v in {"SR_NCTAID.X": gx, "SR_NCTAID.Y": gy, "SR_NCTAID.Z": gz,
                     "SR_NTID.X": t}.items():
            out[k] = np.broadcast_to(np.uint32(v), (1, self.nthreads))
        return out

    def stamp(self, rows: slice) -> None:
        """Register ``rows`` were (maybe) written: caches of facts about register values
        (``plans``, keyed with the rows' latest stamp) see them change."""
        self.version[rows] = self.tick
        self.tick += 1

    def select(self, warps: np.ndarray, exact: bool = False) -> Sel:
        """The selection of ``warps`` (sorted), masked by their active lanes. Unless
        ``exact``, warps that fill at least a quarter of the span they lie in are
        selected as that whole span (views, no gathers) with the other warps masked off."""
        nw = len(warps)
        w0, w1 = int(warps[0]), int(warps[-1])
        span = w1 - w0 + 1
        act = self.active[warps]
        if span == nw or (not exact and 4 * nw >= span):
            if span != nw:
                full = np.zeros(span, np.uint32)
                full[warps - w0] = act
                act = full
            mask = None if (act == FULL).all() else _lanes(act).reshape(1, -1)
            return Sel(slice(w0 * 32, (w1 + 1) * 32), span * 32, mask)
        mask = None if (act == FULL).all() else _lanes(act).reshape(1, -1)
        return Sel((warps[:, None] * 32 + LANES).ravel(), nw * 32, mask)

    def block_coords(self, blk: int) -> tuple[int, int, int]:
        """(x, y, z) of wave-local block ``blk``."""
        b, (gx, gy, _) = int(self.block_ids[blk]), self.grid
        return b % gx, (b // gx) % gy, b // (gx * gy)

    def _where(self, pc: int) -> str:
        if pc >= len(self.dec.steps):
            return f"pc {pc}: (past the last instruction)"
        s = self.dec.steps[pc]
        return f"pc {pc}: {s.text}" + (f"    // {s.source}" if s.source else "")

    def fault(self, sel: Sel, i: int, element, headline: str, info: dict | None = None):
        """Raise a core-dump :class:`DeviceFault` for selected thread ``i`` (``element``
        of the instruction's runs, or None) at the current pc. The error also carries
        ``program`` (block x, y, z), ``warp``, ``lane``, ``element``, ``pc`` and the
        ``info`` items (``param``, ``index``, ``length``, ``address`` for global memory)."""
        blk, tib = divmod(int(sel.thread(i)), self.threads)
        x, y, z = self.block_coords(blk)
        el = f", element {element} of the run" if element is not None else ""
        msg = (f"kernel '{self.name}': {headline}\n"
               f"  block ({x}, {y}, {z}), warp {tib // 32}, lane {tib % 32} (thread {tib} "
               f"of the block){el}\n  {self._where(self.pc)}")
        err = DeviceFault(msg, self.dec.steps[self.pc].ins.loc)
        self.culprit = (blk * self.warps_per_block + tib // 32, [tib % 32], self.pc)
        attrs = {"param": None, "index": None, "length": None, "address": None}
        attrs.update(info or {})
        attrs.update(program=(x, y, z), warp=tib // 32, lane=tib % 32, element=element,
                     pc=self.pc)
        for k, v in attrs.items():
            setattr(err, k, v)
        raise err

    # ------------------------------------------------------------ reconvergence stacks
    def push(self, ws: np.ndarray, pc, masks) -> None:
        """Push (pc, lane mask) on the stacks of warps ``ws``."""
        d = self.depth[ws]
        if d.size and d.max() >= self.stack_pc.shape[1]:
            grow = self.stack_pc.shape[1]
            self.stack_pc = np.pad(self.stack_pc, ((0, 0), (0, grow)))
            self.stack_mask = np.pad(self.stack_mask, ((0, 0), (0, grow)))
        self.stack_pc[ws, d] = pc
        self.stack_mask[ws, d] = masks
        self.depth[ws] = d + 1

    def pop(self, ws: np.ndarray) -> None:
        """Warps ``ws`` have no active lane: resume the top stack entry with lanes left
        (minus exited lanes); a warp with an empty stack is done."""
        done = []
        while ws.size:
            d = self.depth[ws]
            empty = d == 0
            done.append(ws[empty])
            ws, d = ws[~empty], d[~empty] - 1
            m = self.stack_mask[ws, d] & ~self.exited[ws]
            self.depth[ws] = d
            ok = m != 0
            self.active[ws[ok]] = m[ok]
            self.pcs[ws[ok]] = self.stack_pc[ws[ok], d[ok]]
            ws = ws[~ok]
        done = np.concatenate(done) if done else ws
        if done.size:
            self.status[done] = DONE
            self.active[done] = 0

    # ------------------------------------------------------------ barriers
    def release(self, warps: np.ndarray, machine: Machine) -> None:
        """Release the barrier of every block of ``warps`` whose non-exited warps all wait
        at the same BAR.SYNC id, and the BAR.SYNC.CNT waits whose count is reached."""
        wpb = self.warps_per_block
        blks = np.unique(warps // wpb)
        if (self.bar_cnt[warps] > 0).any():
            release_counted(self, blks, machine)
        st2, bar2 = self.status.reshape(-1, wpb)[blks], self.bar.reshape(-1, wpb)[blks]
        waiting = (st2 == BAR) & (self.bar_cnt.reshape(-1, wpb)[blks] == 0)
        hi = np.where(waiting, bar2, -1).max(axis=1)
        lo = np.where(waiting, bar2, 1 << 20).min(axis=1)
        ready = (waiting | (st2 == DONE)).all(axis=1) & waiting.any(axis=1) & (hi == lo)
        if not ready.any():
            return
        rb, ids = blks[ready], hi[ready]
        ws = (rb[:, None] * wpb + np.arange(wpb)).ravel()[waiting[ready].ravel()]
        pcs = self.pcs[ws]
        if self.sanitizer is not None:
            for blk in rb.tolist():
                mine = ws // wpb == blk
                self._check_same_pc(blk, ws[mine], pcs[mine])
            self.sanitizer.barrier(rb)
        self.status[ws] = RUN
        self.bar[ws] = -1
        self.pcs[ws] = pcs + 1
        first = np.searchsorted(ws // wpb, rb)
        machine.on_barrier(rb, ids, pcs[first])

    def _check_same_pc(self, blk, ws, pcs):
        if (pcs == pcs[0]).all():
            return
        where = ", ".join(f"warp {w % self.warps_per_block} at pc {p}" for w, p in
                          zip(ws.tolist(), pcs.tolist()))
        self.pc = int(pcs[0])
        odd = int(np.argmax(pcs != pcs[0]))
        self.culprit = (int(ws[odd]), None, int(pcs[odd]))
        raise DeviceFault(f"kernel '{self.name}': warps of block {self.block_coords(blk)} "
                          f"met at one barrier from different BAR.SYNC instructions "
                          f"({where})\n  {self._where(int(pcs[0]))}\n  "
                          f"{self._where(int(pcs[-1]))}", self.dec.steps[int(pcs[0])].ins.loc)

    def deadlock(self):
        """Raise the DeviceFault describing warps that wait forever."""
        report_deadlock(self)


# ---------------------------------------------------------------- the event loop
def _run(st: State, machine: Machine, started: float) -> None:
    """Run wave ``st`` to its end, one scheduling step after another; the no-progress
    detector and the watchdog (:mod:`.interp_progress`) look in at the marks they set."""
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
        _control(st, s, warps, sel, machine)
    else:
        if not s.never:
            if s.guard is not None:
                sel = sel.with_mask(s.guard(st, sel.threads))
            if sel.mask is None or sel.mask.any():
                s.run(st, sel)
                if s.writes is not None:
                    st.stamp(s.writes)
        st.pcs[warps] = p + 1
    issue(p, s.row, warps)
    return False


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
    ex = act if s.guard is None else _bits(s.guard(st, sel.threads).reshape(-1, 32)) & act
    if c.kind == "ASYNC":
        c.fn(st, s, warps, ex, machine)
        return
    if c.kind == "BRA":
        taken, none = ex == act, ex == 0
        st.pcs[warps] = np.where(taken, c.target, p + 1)
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
    lane = int(np.argmax(_lanes(ex[j:j + 1])[0]))
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
        if p.type == "ptr":
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


def _grid(grid, name: str) -> tuple[int, int, int]:
    """``grid`` as (x, y, z), checked against Pinghu's limits
    (:attr:`~.machine.MachineParams.max_grid`)."""
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
    :class:`~.machine.Machine`). ``debug``: the kernel's print formats and assertion
    messages (see :mod:`.interp_debug`); print records are printed after the launch (or
    before a fault is raised). Returns the machine's :class:`~.machine.Stats`. Raises
    :class:`~mutile.errors.LaunchError` for a grid past Pinghu's limits and
    :class:`~mutile.errors.DeviceFault` on a bad memory access, a failed assertion, a
    deadlock, a launch that makes no progress or outlives the watchdog
    (:mod:`.interp_progress`); the fault's ``coredump`` holds the machine's state then
    (:mod:`.interp_coredump`).
    """
    dec = decode(program)
    name = kernel_name or program.name
    g = _grid(grid, name)
    cbank, glob = _bind(program, args)
    machine = machine or Machine()
    params = machine.params
    machine.on_launch(program, g)
    nblocks = g[0] * g[1] * g[2]
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
                machine.on_wave(ids, st.nwarps)
                try:
                    _run(st, machine, started)
                except DeviceFault as e:
                    e.coredump = coredump(st, e, machine)
                    raise
    finally:
        printer.flush(g)
    return machine.on_finish()
