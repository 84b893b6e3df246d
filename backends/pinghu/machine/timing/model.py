"""The cycle model's per-warp timelines: :class:`TimingMachine`, the interpreter's hooks.

Each warp has a clock (the cycle it can issue its next instruction, counted from its
block's start) and a scoreboard (the cycle each register and predicate is ready). An
instruction issues at the latest of: the warp's clock, its sources being ready (a source
a load produced is a *memory* stall, any other a *scoreboard* stall) and its pipe being
free (the per-warp initiation interval of its pipe: an *issue* stall); its destinations
are ready its latency later (from the machine file's latency classes; a global load's
latency is that of L2 or HBM for the sectors it touched, a shared load's grows with its
bank-conflict wavefronts). Barriers: a BAR.SYNC releases its warps at the last arrival
plus the barrier latency; an AsyncBarrier phase completes at its latest arrival or TME
copy completion, and a warp at ASYNC.BAR.WAIT leaves at the later of its clock and that
time (a *barrier* stall). A TME copy starts when its block's TME engine is free and takes
its latency, the memory latency and its bytes at the engine's rate; an SQMMA starts when
its WarpSquad's issue completes and its engine is free, and lasts its flops at the MP's
rate; SQMMA.WAIT and TME.ST.WAIT wait for them (*scoreboard*, *memory*).

Every instruction also adds its demand on the MP's shared resources (issue slots, ALU,
SFU, LSU, shared-memory wavefronts, TME bytes, SQMMA and WMMA cycles) and on the
device's (L2 and HBM bytes): :mod:`.compose` turns chains and demands into the launch's
time. A warp's timeline depends only on its own instructions and on the barrier events
it takes part in, never on the order in which the interpreter runs warps.
"""
from __future__ import annotations

import numpy as np

from ...isa.operands import PT, RZ, Mem, Pred, PredRun, Reg, Run
from ..device import Machine, MachineParams
from ..units.lsu import _address
from . import compose, memory
from .occupancy import plan as make_plan
from .params import D, DEMAND, SQMMA_DTYPE, UNIT_OF_CLASS, Timing, pipe_key

SLICE_CAP = 200_000                 # trace slices kept per launch


class PcInfo:
    """What the model needs of one instruction, computed once per launch."""
    __slots__ = ("srcs", "dsts", "psrcs", "pdsts", "lat", "pipe", "ii", "unit", "cost",
                 "kind", "load", "space", "nbytes", "addr", "memload", "dvec", "bar",
                 "mma_dtype", "srcs_c", "dsts_c", "psrcs_c", "pdsts_c", "src_run", "dst_run")


def _run(rows: np.ndarray):
    """``rows`` (sorted, distinct) as one slice if they are contiguous, else the rows."""
    if rows.size and rows[-1] - rows[0] + 1 == rows.size:
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def _rows(v, spec) -> list[int]:
    if isinstance(v, Reg):
        if v.n == RZ:
            return []
        return list(range(v.n, v.n + max(spec.group or 0, spec.width)))
    if isinstance(v, Run):
        return list(range(v.start, v.end))
    if isinstance(v, Mem):
        b = v.base
        if isinstance(b, Reg):
            return [] if b.n == RZ else list(range(b.n, b.n + spec.base_width))
        return list(range(b.start, b.end))
    return []


def _preds(v) -> list[int]:
    if isinstance(v, Pred):
        return [] if v.n == PT else [v.n]
    if isinstance(v, PredRun):
        return list(range(v.start, v.end))
    return []


_LSU_BYTES = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "B8": 1, "B16": 2, "B32": 4, "B64": 8,
              "B128": 16}


def pc_info(ins, t: Timing, pipes: dict) -> PcInfo:
    row = ins.op
    p = PcInfo()
    src, dst, ps, pd = [], [], [], []
    for spec, v in zip(row.operands, ins.operands):
        (dst if spec.dst else src).extend(_rows(v, spec))
        (pd if spec.dst else ps).extend(_preds(v))
    ps += _preds(ins.guard) if ins.guard is not None else []
    p.srcs, p.dsts = np.array(sorted(set(src)), np.int64), np.array(sorted(set(dst)), np.int64)
    p.psrcs, p.pdsts = np.array(sorted(set(ps)), np.int64), np.array(sorted(set(pd)), np.int64)
    p.srcs_c, p.dsts_c = p.srcs[:, None], p.dsts[:, None]     # for a gather of warps
    p.src_run, p.dst_run = _run(p.srcs), _run(p.dsts)         # for a span of warps
    p.psrcs_c, p.pdsts_c = p.psrcs[:, None], p.pdsts[:, None]
    cls = row.latency
    p.lat = t.class_latency(cls)
    key = pipe_key(cls)
    p.pipe = pipes.setdefault(key, len(pipes))
    p.ii = t.pipe_ii(cls)
    p.unit = D[UNIT_OF_CLASS[cls]] if cls in UNIT_OF_CLASS else -1
    p.cost = p.ii / t.subcores
    p.kind = row.mnemonic if row.mnemonic in ("SQMMA.WAIT", "TME.ST.WAIT") else None
    p.load = p.space = None
    p.bar = row.unit == "BAR"
    dvec = np.zeros(len(DEMAND))
    dvec[D["ISSUE"]] = 1.0 / t.issue_per_cycle
    if p.unit >= 0:
        dvec[p.unit] += p.cost
    if row.unit == "LSU":
        p.space = row.attrs["space"]
        p.load = row.mnemonic.startswith("LSU.LD")
        p.nbytes = _LSU_BYTES[row.attrs["type"]]
        m = next(v for v in ins.operands if isinstance(v, Mem))
        p.addr = _address(ins, m)
        if p.space == "LOCAL":
            p.lat = t.latency["ld_local" if p.load else "st_local"]
        elif p.space == "SHARED":
            p.lat = t.latency["ld_shared" if p.load else "st_shared"]
    if row.unit == "WMMA":
        a = row.attrs
        p.kind = "WMMA"
        p.cost = 2.0 * a["m"] * a["n"] * a["k"] / t.wmma_rate
        p.ii = max(p.ii, p.cost * t.subcores)
        p.lat = t.latency["wmma"] + p.cost * t.subcores
        dvec[D["WMMA"]] += p.cost
    if p.space == "LOCAL":
        dvec[D["LSU"]] += 1.0 / t.subcores
    p.memload = bool(p.load and p.space == "GLOBAL")
    p.dvec = dvec
    p.mma_dtype = SQMMA_DTYPE.get(row.attrs.get("ab", ""), "bf16") if row.unit == "WMMA" \
        else None
    return p


def program_info(program, t: Timing):
    """The :class:`PcInfo` of every instruction and the pipe numbering, cached on the
    program per machine file."""
    key = (t.file.hash, tuple(map(id, program.instructions)))
    hit = program.__dict__.get("_timing_info")
    if hit is None or hit[0] != key:
        pipes: dict = {}
        info = [pc_info(ins, t, pipes) for ins in program.instructions]
        hit = program.__dict__["_timing_info"] = (key, info, pipes)
    return hit[1], hit[2]


class TimingMachine(Machine):
    """The interpreter's hooks, timing every warp (see the module docstring); after the
    launch, ``record`` is its :class:`~.record.LaunchRecord`."""
    timed = True

    def __init__(self, machine_file=None, sample=None):
        t = Timing(machine_file)
        super().__init__(MachineParams.of(t.file))
        self.t = t
        self.sample = sample
        self.record = None

    # ------------------------------------------------------------ launch
    def on_launch(self, program, grid: tuple) -> None:
        super().on_launch(program, grid)
        self.plan = make_plan(program, grid, self.t, self.sample)
        self.info, self.pipes = program_info(program, self.t)
        self.loads = any(p.memload for p in self.info)
        n = len(program.instructions) + 1
        self.issued_pc = np.zeros(n)
        self.sums = np.zeros((n, 4))        # per pc: sums of clock, t0, t1, issue time
        self.stall_pc = {"barrier": np.zeros(n)}
        self.pc_dem = np.zeros((n, len(DEMAND)))
        self.l2 = memory.L2(self.t, self.plan.per_wave)
        self.blocks_out: list = []          # per wave: compose.BlockStats
        self.slices: list = []              # (block, warp, name, start, end) arrays
        self.nslices = 0
        self.busy: list = []                # demand log: (unit, warps, times, cost)
        self.steps_log: list = []           # (pc, warps, (clock, t0, t1, issue) per warp)
        self.dvecs = np.array([p.dvec for p in self.info]).reshape(len(self.info),
                                                                   len(DEMAND))
        self._pend = ()                     # an LSU instruction's demands, until it issues
        self.win = None                     # window of the composition (cycles)
        self.flop_dtype: dict = {}
        self._lat = None
        self._scratch = np.empty((4, 64))
        self.shared_memo: dict = {}         # shared address patterns -> wavefronts

    def blocks_to_run(self, nblocks: int) -> int:
        return self.plan.simulated

    def on_state(self, st) -> None:
        """The interpreter made the state of a wave: size the timelines."""
        self.st = st
        self._kernel_name, self._grid, self._steps = st.name, tuple(st.grid), st.dec.steps
        W, C, P = st.nwarps, st.dec.columns, st.dec.preds
        self.wpb = st.warps_per_block
        self.clock = np.zeros(W)
        self.tiss = np.zeros(W)
        self.ready = np.zeros((2, C, W))         # ready cycle; ready if a load made it
        self.pready = np.zeros((max(P, 1), W))
        self.pipe = np.zeros((W, max(len(self.pipes), 1)))
        self.flops = np.zeros(W)
        self.bar_arrive = np.zeros(W)
        self.sq_done = np.zeros(W)
        self.tst_done = np.zeros(W)
        nb = len(st.block_ids)
        self.sq_free = np.zeros(nb * max(1, self.wpb // 4 + 1))
        self.tme_free = np.zeros(nb)
        self.phase_t = np.zeros(nb * 64)
        self.done_t = np.zeros(nb * 64)
        st.timing = self

    def on_wave_end(self, st) -> None:
        self._fold_steps()
        self.blocks_out.append(compose.block_stats(self, st))

    def _fold_steps(self) -> None:
        """Add the wave's logged steps (clock, after memory, after sources, issue time per
        warp) to the per-pc sums."""
        log = self.steps_log
        if not log:
            return
        n = np.fromiter((e[2].shape[1] for e in log), np.int64, len(log))
        pcs = np.repeat(np.fromiter((e[0] for e in log), np.int64, len(log)), n)
        B = np.concatenate([e[2] for e in log], axis=1)
        for j in range(4):
            self.sums[:, j] += np.bincount(pcs, B[j], len(self.sums))

    # ------------------------------------------------------------ instructions
    def memory(self, st, step, warps, sel) -> None:
        """Before LSU instruction ``step`` runs for ``warps`` (selection ``sel``): its
        per-warp latency and demands, from the addresses it is about to use."""
        p = self.info[step.pc]
        if p.space == "LOCAL":
            self._lat = None
            return
        t, nw = self.t, len(warps)
        if sel.n != 32 * nw:                    # a span with other warps masked off
            sel = st.select(warps, exact=True)
        mask = sel.mask
        if step.guard is not None:
            g = step.guard(st, sel.threads)
            mask = g if mask is None else mask & g
        addr = p.addr(st, sel)
        if p.space == "SHARED":
            fronts = memory.shared_wavefronts(t, addr, mask, p.nbytes, nw, st.threads,
                                             self.shared_memo)
            self._lat = p.lat + fronts - 1
            self.pc_dem[step.pc, D["SHARED"]] += fronts.sum()
            self.pc_dem[step.pc, D["LSU"]] += nw / t.subcores
            self._pend = ((D["SHARED"], fronts), (D["LSU"], 1.0 / t.subcores))
            return
        lat, moved, hbm, l2 = memory.global_access(t, self.l2, addr, mask, p.nbytes, nw,
                                                  not p.load, st.block_ids[warps // self.wpb])
        lsu = np.maximum(moved / t.l1_per_cycle, 1.0 / t.subcores)
        self._lat = lat + moved / t.l1_per_cycle
        for u, v in (("LSU", lsu), ("HBM", hbm), ("L2", l2)):
            self.pc_dem[step.pc, D[u]] += v.sum()
        self._pend = ((D["LSU"], lsu), (D["HBM"], hbm), (D["L2"], l2))

    def on_issue(self, pc: int, row, warps: np.ndarray) -> None:
        self.stats.steps += 1
        nw = len(warps)
        self._by_pc[pc] += nw
        if pc >= len(self.info):                # running past the end: EXIT
            self.issued_pc[pc] += nw
            self.clock[warps] += 1
            return
        p = self.info[pc]
        w0 = int(warps[0])
        if int(warps[-1]) - w0 + 1 == nw:       # register rows x warp columns
            w1 = slice(w0, w0 + nw)
            srcs, dsts, psrcs, pdsts = p.src_run, p.dst_run, p.psrcs, p.pdsts
        else:
            w1 = warps
            srcs, dsts, psrcs, pdsts = p.srcs_c, p.dsts_c, p.psrcs_c, p.pdsts_c
        c = self.clock[w1]
        if p.srcs.size:
            dep = self.ready[:, srcs, w1].max(axis=1)
            dep, dm = dep[0], dep[1]
        else:
            dep = dm = c
        if p.psrcs.size:
            dep = np.maximum(dep, self.pready[psrcs, w1].max(axis=0))
        if p.kind == "SQMMA.WAIT":
            dep = np.maximum(dep, self.sq_done[w1])
        elif p.kind == "TME.ST.WAIT":
            dm = np.maximum(dm, self.tst_done[w1])
        B = self._buf(nw)                       # clock, after memory, sources, pipe
        B[0] = c
        t0 = np.maximum(c, dm, out=B[1])
        t1 = np.maximum(t0, dep, out=B[2])
        if p.ii > 1.0:                          # (a pipe of interval 1 is never busy
            ti = np.maximum(t1, self.pipe[w1, p.pipe], out=B[3])   # past the clock)
            self.pipe[w1, p.pipe] = ti + p.ii
        else:
            ti = B[3]
            ti[...] = t1
        self.issued_pc[pc] += nw
        self.tiss[w1] = ti
        self.clock[w1] = ti + 1.0
        lat = p.lat
        if p.space is not None and self._lat is not None:
            lat, self._lat = self._lat, None
        if p.dsts.size:
            done = ti + lat
            self.ready[0, dsts, w1] = done
            if self.loads:                      # (no global load: the flags stay 0)
                self.ready[1, dsts, w1] = done if p.memload else 0.0
        if p.pdsts.size:
            self.pready[pdsts, w1] = ti + lat
        B = B.copy()                            # (scratch) the logs keep it: the stall
        ti = B[3]                               # sums and the fixed demands (dvecs[pc])
        self.steps_log.append((pc, warps, B))
        if self._pend:
            for u, v in self._pend:
                self.busy.append((u, warps, ti, v))
            self._pend = ()
        if p.kind == "WMMA":
            self.flops[w1] += p.cost * self.t.wmma_rate
            self.flop_dtype[p.mma_dtype] = self.flop_dtype.get(p.mma_dtype, 0) + \
                nw * p.cost * self.t.wmma_rate
        if p.bar:
            self.bar_arrive[w1] = ti      # issue-to-release: the bar latency

    def _buf(self, n: int) -> np.ndarray:
        b = self._scratch
        if b.shape[1] < n:
            b = self._scratch = np.empty((4, max(n, 2 * b.shape[1])))
        return b[:, :n]

    # ------------------------------------------------------------ barriers
    def on_barrier(self, blocks, bars, pcs, warps=None) -> None:
        """A BAR.SYNC (or .CNT) released ``warps``: they leave at the last arrival (its
        issue cycle) plus the barrier latency."""
        if warps is None or not len(warps):
            return
        blk = warps // self.wpb
        last = np.zeros(int(blk.max()) + 1)
        np.maximum.at(last, blk, self.bar_arrive[warps])
        go = last[blk] + self.t.latency["bar"]
        wait = np.maximum(go - self.clock[warps], 0.0)
        np.add.at(self.stall_pc["barrier"], pcs_of(pcs, blocks, blk), wait)
        self._slice(warps, "barrier wait", self.clock[warps], go, wait > 0)
        self.clock[warps] = np.maximum(self.clock[warps], go)

    def arrive(self, keys: np.ndarray, warps: np.ndarray) -> None:
        """AsyncBarrier arrivals (flat wave-local keys) by ``warps``."""
        np.maximum.at(self.phase_t, keys, self.tiss[warps] + self.t.latency["async_bar"])

    def phase_done(self, keys: np.ndarray) -> None:
        self.done_t[keys] = self.phase_t[keys]
        self.phase_t[keys] = 0.0

    def waited(self, warps: np.ndarray, keys: np.ndarray, pc: int) -> None:
        """``warps`` leave ASYNC.BAR.WAIT at ``pc`` on barriers ``keys`` (whose awaited
        phase completed)."""
        go = self.done_t[keys]
        wait = np.maximum(go - self.clock[warps], 0.0)
        self.stall_pc["barrier"][pc] += float(wait.sum())
        self._slice(warps, "AsyncBarrier wait", self.clock[warps], go, wait > 0)
        self.clock[warps] = np.maximum(self.clock[warps], go)

    # ------------------------------------------------------------ engines
    def tme(self, st, c, load: bool) -> None:
        """TME copies ``c`` (:class:`..units.tme.Copies`) were issued."""
        from ..units.tme import SIZES
        t = self.t
        warps = c.threads // 32
        size = SIZES[c.code].astype(np.float64)
        nbytes = size * c.elements
        blk = warps // self.wpb
        hbm, slow = memory.tme_sectors(self.l2, c.global_addresses(), c.inside(), not load,
                                       st.block_ids[blk])
        start = np.empty(len(warps))
        for i in range(len(warps)):             # copies of a block queue on its engine
            b = blk[i]
            s = max(self.tiss[warps[i]], self.tme_free[b])
            self.tme_free[b] = s + nbytes[i] / t.tme_per_cycle
            start[i] = s
        mem_lat = np.where(slow, t.hbm_latency, t.l2_latency)
        done = start + t.tme_latency + mem_lat + nbytes / t.tme_per_cycle
        for u, v in (("TME", nbytes / t.tme_per_cycle), ("HBM", hbm), ("L2", nbytes)):
            self.pc_dem[c.pc, D[u]] += float(v.sum())
        for u, v in (("TME", nbytes / t.tme_per_cycle), ("HBM", hbm), ("L2", nbytes)):
            self.busy.append((D[u], warps, start, v))
        if load:
            np.maximum.at(self.phase_t, c.keys, done)
        else:
            np.maximum.at(self.tst_done, warps, done)
        self._slice(warps, "TME load" if load else "TME store", start, done,
                    np.ones(len(warps), bool))

    def sqmma(self, st, op, pc: int, warps: np.ndarray) -> None:
        """WarpSquad MMA ``op`` (:class:`..units.sqmma.Sqmma`) issued by ``warps``."""
        t = self.t
        dt = SQMMA_DTYPE[op.ta]
        rate = t.sqmma_rate[dt]
        flops = 2.0 * op.m * op.n * op.k
        dur = flops / rate
        squad = (warps // self.wpb) * (self.wpb // 4 + 1) + (warps % self.wpb) // 4
        order = np.argsort(squad, kind="stable")
        sq, first = np.unique(squad[order], return_index=True)
        issue = np.maximum.reduceat(self.tiss[warps[order]], first)
        start = np.maximum(issue, self.sq_free[sq])
        self.sq_free[sq] = start + dur
        done = start + t.latency["sqmma"] + dur
        mine = done[np.searchsorted(sq, squad)]
        self.sq_done[warps] = np.maximum(self.sq_done[warps], mine)
        d = op.rows
        self.ready[0][d.start:d.stop, warps] = mine
        self.pc_dem[pc, D["SQMMA"]] += dur * len(sq)
        np.add.at(self.flops, warps, flops / 4)
        self.flop_dtype[dt] = self.flop_dtype.get(dt, 0) + flops / 4 * len(warps)
        lead = warps[order][first]
        self.busy.append((D["SQMMA"], lead, start, dur))
        self._slice(lead, f"SQMMA {op.m}x{op.n}x{op.k}", start, done, np.ones(len(lead), bool))

    # ------------------------------------------------------------ trace
    def _slice(self, warps, name, start, end, keep) -> None:
        if self.nslices >= SLICE_CAP or not keep.any():
            return
        w = warps[keep]
        self.nslices += len(w)
        self.slices.append((self.st.block_ids[w // self.wpb], w % self.wpb, name,
                            np.broadcast_to(start, keep.shape)[keep],
                            np.broadcast_to(end, keep.shape)[keep]))

    def on_finish(self):
        stats = super().on_finish()
        n = len(self.info)                      # the instructions' fixed demands
        if n:
            self.pc_dem[:n] += self.issued_pc[:n, None] * self.dvecs
        self.record = compose.launch_record(self)
        return stats


def pcs_of(pcs, blocks, blk):
    """The barrier pc of each released warp (``pcs`` one per released block)."""
    where = np.searchsorted(blocks, blk)
    return np.asarray(pcs)[where]

