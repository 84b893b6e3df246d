"""The decoded program and the machine state of one wave of resident blocks.

:func:`decode` turns a :class:`~..isa.program.Program` into one :class:`Step` per
instruction (its closure from :mod:`.rows`, its guard, its text; cached on the program).
:class:`State` holds every resident thread's registers ``(registers, threads)`` uint32,
predicates, per-warp pcs, active masks, reconvergence stacks and barrier waits, the
memories and the asynchronous unit; :class:`Sel` is a selection of threads an instruction
runs on. The scheduler (:mod:`.scheduler`) drives both."""
from __future__ import annotations

import numpy as np

from mutile.errors import DeviceFault

from ..isa.disasm import format_instruction, label_names
from ..isa.operands import PT, RZ, Comment, Pred, PredRun, Reg, Run
from ..isa.program import LOC_COMMENT, Program, registers_used
from .device import Machine
from .memory import LocalMemory, SharedMemory, SharedSanitizer
from .rows import Control, build, pred_reader
from .units.barriers import AsyncUnit, release_counted, report_deadlock
from .units.engine import BAR, DONE, LANES, RUN, lane_bits

FULL = np.uint32(0xFFFFFFFF)


# ---------------------------------------------------------------- decoding
class Step:
    """One decoded instruction: ``run(st, sel)`` (data rows) or ``control`` (a
    :class:`~.rows.Control`), the guard reader (None: unguarded), ``never`` for
    ``@!PT``, the ISA ``text`` and the ``source`` comment that located it."""
    __slots__ = ("pc", "ins", "row", "run", "control", "guard", "never", "text", "source",
                 "writes", "lsu")

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
        self.lsu = ins.op.unit == "LSU"


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


def mask_words(b: np.ndarray) -> np.ndarray:
    """Bool (warps, 32) -> uint32 lane masks."""
    return np.packbits(b, axis=1, bitorder="little").view(np.uint32).ravel()


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
        self.spun = np.zeros(W, bool)       # ran ATOM.CAS/EXCH since its last backward branch
        self.backoff = np.zeros(W, bool)    # took a backward branch after spinning: yields
        self.yielding = False               # some warp has backoff set
        self.asyn = AsyncUnit(self)
        self.culprit = None       # (warp, lanes or None, pc) a fault names: core dump
        self.timing = None        # the cycle model's hooks (TimingMachine.on_state sets it)

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
            mask = None if (act == FULL).all() else lane_bits(act).reshape(1, -1)
            return Sel(slice(w0 * 32, (w1 + 1) * 32), span * 32, mask)
        mask = None if (act == FULL).all() else lane_bits(act).reshape(1, -1)
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
        machine.on_barrier(rb, ids, pcs[first], ws)

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
