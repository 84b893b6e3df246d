"""Machine parameters of the Pinghu GPU, and the hook object the interpreter drives.

Every number comes from the machine file (:mod:`mutile.machines`, ``pinghu.toml``), which
says for each one whether it is public (and where from) or assumed (and why).

:class:`Machine` is the seam a cycle model attaches to: the interpreter's event loop calls
``on_launch`` once per launch, ``on_wave`` per wave of resident blocks, ``on_issue`` for
every instruction it executes (with the warps that execute it), ``on_barrier`` when a
block's barrier releases and ``on_finish`` at the end. The base class only counts; a
timing model subclasses it and turns the same events into cycles per unit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import mutile.machines as machines

from ..isa import INSTRS, UNITS


def _fact(section: str, name: str):
    return machines.default().value(section, name)


@dataclass(frozen=True)
class MachineParams:
    """Sizes of one Pinghu device the interpreter checks against, read from the machine
    file (:mod:`mutile.machines`, ``pinghu.toml``: every entry's source is there);
    ``file`` is that file, whose timing entries the cycle model reads."""
    warp_size: int = _fact("isa", "warp_size")
    squad_warps: int = _fact("isa", "squad_warps")          # a WarpSquad
    shared_bytes: int = _fact("isa", "shared_bytes")        # per block (192 KiB)
    registers: int = _fact("isa", "registers")              # R0 .. R254 per thread
    register_file: int = _fact("device", "register_file")   # 32-bit registers per MP
    async_barriers: int = _fact("isa", "barrier_ids")       # per block (one reserved)
    memory_bytes: int = _fact("device", "memory_bytes")
    memory_bandwidth: float = _fact("memory", "hbm_bytes_per_s")
    clock_hz: float = _fact("device", "clock_hz")
    mp_count: int = _fact("device", "mp_count")
    max_grid: tuple = tuple(_fact("device", "max_grid"))
    # Interpreter limit, not hardware: blocks resident at once (threads across them).
    max_resident_threads: int = _fact("model", "max_resident_threads")
    file: machines.MachineFile = field(default_factory=machines.default, compare=False)

    @classmethod
    def of(cls, machine_file: machines.MachineFile) -> "MachineParams":
        """The parameters of ``machine_file`` (a :class:`~mutile.machines.MachineFile`)."""
        v = machine_file.value
        return cls(register_file=v("device", "register_file"),
                   memory_bytes=v("device", "memory_bytes"),
                   memory_bandwidth=v("memory", "hbm_bytes_per_s"),
                   clock_hz=v("device", "clock_hz"), mp_count=v("device", "mp_count"),
                   max_grid=tuple(v("device", "max_grid")),
                   max_resident_threads=v("model", "max_resident_threads"),
                   file=machine_file)


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

    timed = False           # a cycle model: the units call its hooks (``st.timing``)

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

    def blocks_to_run(self, nblocks: int) -> int:
        """How many of a launch's ``nblocks`` blocks to execute (a sampling cycle model
        runs the first ones only)."""
        return nblocks

    def on_state(self, st) -> None:
        """The interpreter made the state of a wave (before :meth:`on_wave`)."""

    def on_wave_end(self, st) -> None:
        """The wave of state ``st`` ran to its end."""

    def on_wave(self, blocks: np.ndarray, warps: int) -> None:
        """A wave of resident blocks (their linear ids) with ``warps`` warps in all starts."""
        self.stats.waves += 1
        self.stats.blocks += len(blocks)

    def on_issue(self, pc: int, row, warps: np.ndarray) -> None:
        """Instruction ``row`` at ``pc`` executes for ``warps`` (an int array)."""
        self.stats.steps += 1
        self._by_pc[pc] += len(warps)

    def on_barrier(self, blocks: np.ndarray, bars: np.ndarray, pcs: np.ndarray,
                   warps: np.ndarray | None = None) -> None:
        """Barriers ``bars`` of (wave-local) ``blocks`` release their ``warps``, waiting
        at ``pcs`` (arrays, one entry per block)."""

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
