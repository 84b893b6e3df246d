"""Machine parameters of the Pinghu GPU, and the hook object the interpreter drives.

The public facts (warp of 32, WarpSquad of 4 warps, 192 KiB shared memory per block,
255 registers per thread, 64 AsyncBarrier ids) come from Moore Threads' public code.
Everything marked ASSUMED is not public: it is a modelling assumption made here, in this
one file, and nowhere else (clock, MP count, latencies, grid limits).

:class:`Machine` is the seam a cycle model attaches to: the interpreter's event loop calls
``on_launch`` once per launch, ``on_wave`` per wave of resident blocks, ``on_issue`` for
every instruction it executes (with the warps that execute it), ``on_barrier`` when a
block's barrier releases and ``on_finish`` at the end. The base class only counts; a
timing model subclasses it and turns the same events into cycles per unit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mutile.ir.ops_pinghu import BARRIER_IDS, SHARED_BYTES

from ..isa import INSTRS, UNITS


@dataclass(frozen=True)
class MachineParams:
    """Sizes and timings of one Pinghu device (see the module docstring for which are
    public facts and which are assumptions)."""
    warp_size: int = 32
    squad_warps: int = 4                  # a WarpSquad (SQMMA issues per squad)
    shared_bytes: int = SHARED_BYTES      # per block (192 KiB)
    registers: int = 255                  # R0 .. R254 per thread
    register_file: int = 65536            # ASSUMED: 32-bit registers per MP (not public)
    async_barriers: int = BARRIER_IDS     # hardware AsyncBarrier ids per block (one reserved)
    memory_bytes: int = 80 * 2**30        # MTT S5000: 80 GB
    memory_bandwidth: float = 1.6e12      # bytes/s, MTT S5000
    clock_hz: float = 1.5e9               # ASSUMED: not public
    mp_count: int = 128                   # ASSUMED: not public
    # ASSUMED cycle counts of each latency class (issue-to-result); names from isa.py.
    latency: dict = field(default_factory=lambda: {
        "alu": 4, "alu64": 8, "fp64": 8, "imul": 6, "div": 40, "sfu": 16, "cvt": 6,
        "ld_global": 400, "st_global": 20, "ld_shared": 30, "st_shared": 20,
        "ld_local": 400, "st_local": 20, "shfl": 20, "bar": 20, "wmma": 32, "control": 2,
        "s2r": 20,
        "atom_global": 400,               # ASSUMED: a round trip to L2, like a load
        # ASSUMED: issue-to-completion of the asynchronous engines (a TME tile copy, an
        # AsyncBarrier operation, an SQMMA, a fence)
        "tme": 500, "async_bar": 20, "sqmma": 64, "fence": 10})
    # Blocks per launch along x, y, z. ASSUMED (not found in Moore Threads' public code):
    # CUDA's limits, x <= 2**31 - 1, y and z <= 65535, as MUSA's runtime API mirrors CUDA's.
    max_grid: tuple = (2**31 - 1, 65535, 65535)
    # Interpreter limit, not hardware: blocks resident at once (threads across them).
    max_resident_threads: int = 65536


PINGHU = MachineParams()


@dataclass
class Stats:
    """What a launch executed. ``steps``: vector dispatches (one instruction for every
    warp at one pc); ``warp_instructions``: instructions summed over warps;
    ``by_unit``: warp-instructions per functional unit; ``by_pc``: warp-instructions per
    pc (a profile); ``blocks``, ``waves``: blocks run, and in how many resident waves."""
    steps: int = 0
    warp_instructions: int = 0
    by_unit: dict = field(default_factory=dict)
    by_pc: list = field(default_factory=list)
    blocks: int = 0
    waves: int = 0


class Machine:
    """The hooks of the interpreter's event loop; this base counts instructions.

    A cycle model subclasses it: ``on_issue`` receives the row (its ``unit`` and
    ``latency`` class name the timing in :attr:`params`), the pc and the ids of the warps
    that execute it (numbered across the resident wave).
    """

    def __init__(self, params: MachineParams = PINGHU):
        self.params = params
        self.stats = Stats()
        self._by_pc: list[int] = []
        self._program = None

    def on_launch(self, program, grid: tuple) -> None:
        """A launch of ``program`` over ``grid`` blocks begins."""
        self._program = program
        self._by_pc = [0] * (len(program.instructions) + 1)
        self.stats = Stats()

    def on_wave(self, blocks: np.ndarray, warps: int) -> None:
        """A wave of resident blocks (their linear ids) with ``warps`` warps in all starts."""
        self.stats.waves += 1
        self.stats.blocks += len(blocks)

    def on_issue(self, pc: int, row, warps: np.ndarray) -> None:
        """Instruction ``row`` at ``pc`` executes for ``warps`` (an int array)."""
        self.stats.steps += 1
        self._by_pc[pc] += len(warps)

    def on_barrier(self, blocks: np.ndarray, bars: np.ndarray, pcs: np.ndarray) -> None:
        """Barriers ``bars`` of (wave-local) ``blocks`` release their warps, waiting at
        ``pcs`` (arrays, one entry per block)."""

    def retired(self) -> int:
        """Warp-instructions executed so far in this launch."""
        return sum(self._by_pc)

    def on_finish(self) -> Stats:
        """The launch ended; returns the statistics."""
        s = self.stats
        n = len(self._program.instructions)
        s.by_pc = self._by_pc[:n]
        s.warp_instructions = sum(self._by_pc)
        units = dict.fromkeys(UNITS, 0)
        for ins, k in zip(self._program.instructions, s.by_pc):
            units[ins.op.unit] += k
        units["BRA"] += self._by_pc[n]            # running past the end is EXIT
        s.by_unit = {u: k for u, k in units.items() if k}
        return s


EXIT_ROW = next(r for r in INSTRS if r.mnemonic == "EXIT")
