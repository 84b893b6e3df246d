"""What the cycle model reports about one launch (:class:`LaunchRecord`), the rows of its
per-line and per-pc tables and the slices of its trace. Plain data: the profiler
(:mod:`mutile.profiler`) prints, saves and plots it.

Times are in cycles of the modelled clock, relative to the launch's first block start,
unless a name says otherwise; ``start``/``end`` place the launch on the device timeline
of a profiling session (launch overhead before ``start``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# Why a resident warp did not issue, warp-cycle by warp-cycle (docs/cycle-model.md).
STALLS = ("barrier", "memory", "scoreboard", "issue", "idle")
# The units utilization is reported for (values in [0, 1]).
UTILIZATION_UNITS = ("SQMMA", "WMMA", "ALU", "SFU", "LSU", "SHARED", "TME", "HBM")


@dataclass
class LineRow:
    """Warp-cycles of one Python source line (``file`` None: cycles no line owns, such as
    warps idle after they exited): ``issued`` + sum(``stalls``) == ``warp_cycles``."""
    file: str | None
    line: int | None
    source: str
    warp_cycles: float
    issued: float
    stalls: dict


@dataclass
class PcRow:
    """The same for one ISA instruction (``pc``; ``text`` its listing line); ``count`` is
    how many warp-instructions executed it."""
    pc: int
    text: str
    file: str | None
    line: int | None
    count: int
    warp_cycles: float
    issued: float
    stalls: dict


@dataclass(slots=True)
class Slice:
    """One slice of the trace: on ``track`` (("MP", mp), ("warp", mp, block, warp) or
    ("unit", mp, name)), ``name`` from ``start`` for ``dur`` cycles, with ``args``."""
    track: tuple
    name: str
    start: float
    dur: float
    args: dict = field(default_factory=dict)


class SliceTable(Sequence):
    """The slices of one launch, kept as arrays until someone reads them (a trace is
    written far less often than a launch is profiled): each group is one slice kind's
    ``name``, whether it sits on its MP's unit track (``unit``), and per slice its grid
    block, warp, MP, start and duration. Reads as a sequence of :class:`Slice`;
    ``append`` adds a :class:`Slice`."""

    def __init__(self):
        self._groups: list = []
        self._n = 0
        self._items: list | None = []

    def add(self, name: str, unit: bool, blocks, warps, mps, starts, durs) -> None:
        if self._items:
            self._groups.append(self._items)
        self._groups.append((name, unit, blocks, warps, mps, starts, durs))
        self._n += len(blocks)
        self._items = None

    def append(self, s: Slice) -> None:
        self._all().append(s)
        self._n += 1

    def _all(self) -> list:
        if self._items is None:
            out = []
            for g in self._groups:
                if isinstance(g, list):
                    out += g
                    continue
                name, unit, *cols = g
                kind = name.split()[0]
                for b, w, q, a, d in zip(*(c.tolist() for c in cols)):
                    track = ("unit", q, kind) if unit else ("warp", q, b, w)
                    out.append(Slice(track, name, a, d, {"block": b, "warp": w}))
            self._items, self._groups = out, []
        return self._items

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())

    def __repr__(self) -> str:
        return f"SliceTable({self._n} slices)"


@dataclass
class LaunchRecord:
    """One Pinghu launch as the cycle model saw it (see :mod:`mutile.profiler` for what
    each field means to users)."""
    kernel: str
    grid: tuple
    sampled: bool
    blocks: int                     # blocks in the grid
    blocks_simulated: int
    cycles: float                   # first block start to last block end
    clock_hz: float
    flops: float                    # useful MMA flops (SQMMA + WMMA), whole grid
    dtype: str | None               # the MMA operand type the peak is for (None: no MMA)
    hbm_bytes: float                # bytes moved between L2 and HBM, whole grid
    peak_tflops: float
    peak_hbm_gbps: float
    utilization: dict               # UTILIZATION_UNITS -> [0, 1]
    warp_cycles: float              # summed over warps while resident
    stalls: dict                    # STALLS -> warp-cycles
    issued: float                   # warp-cycles spent issuing (one per warp-instruction)
    by_line: list                   # LineRow
    by_pc: list                     # PcRow
    occupancy: dict                 # blocks_per_mp, warps_per_mp, limit, fraction
    waves: int
    launch_overhead_cycles: float
    machine_hash: str
    bound: str                      # what limited the slowest MP: "latency" or a unit
    slices: Sequence = field(default_factory=list)   # Slice (a SliceTable or a list)
    timeline: dict = field(default_factory=dict)    # unit -> busy fraction per bucket
    bucket_cycles: float = 0.0
    start: float = 0.0              # on the session's device timeline (cycles)
    instructions: int = 0           # warp-instructions simulated
    wave_cycles: list = field(default_factory=list)  # each wave's time (estimated: sampled)
    graph_node: int | None = None   # its position in a replayed mutile.Graph (None: not)

    @property
    def end(self) -> float:
        return self.start + self.cycles

    @property
    def time_ms(self) -> float:
        """``cycles`` at the modelled clock, in milliseconds."""
        return self.cycles / self.clock_hz * 1e3

    @property
    def tflops(self) -> float:
        t = self.cycles / self.clock_hz
        return self.flops / t / 1e12 if t > 0 else 0.0

    @property
    def hbm_gbps(self) -> float:
        t = self.cycles / self.clock_hz
        return self.hbm_bytes / t / 1e9 if t > 0 else 0.0
