"""Occupancy and waves: how many blocks of a kernel one MP holds at once (registers,
shared memory, warps, AsyncBarriers, the block limit), how blocks map to MPs (block ``b``
of wave ``b // (mp_count * occ)`` runs on MP ``b % mp_count``), and which blocks a
sampled launch simulates."""
from __future__ import annotations

from dataclasses import dataclass

from ...isa.operands import IntImm


@dataclass(frozen=True)
class Plan:
    """Blocks per MP (``occ``) and what limits it, blocks per wave, waves, and the
    number of blocks simulated (the first ``simulated`` blocks, in launch order)."""
    occ: int
    limit: str
    warps_per_block: int
    per_wave: int
    waves: int
    blocks: int
    simulated: int

    @property
    def sampled(self) -> bool:
        return self.simulated < self.blocks


def barriers_used(program) -> int:
    """AsyncBarrier ids a block of ``program`` uses: the distinct immediate ids its
    ASYNC.BAR.INITs name (all usable ids if one is not an immediate)."""
    ids = set()
    for ins in program.instructions:
        if ins.op.mnemonic == "ASYNC.BAR.INIT":
            b = ins.operands[0]
            if not isinstance(b, IntImm):
                return 63
            ids.add(b.value)
    return len(ids)


def blocks_per_mp(program, t) -> tuple[int, str]:
    """(blocks of ``program`` one MP holds, the resource that limits it)."""
    o = t.occupancy
    warps = max(1, program.threads // t.warp_size)
    regs = max(1, program.regs) * program.threads
    limits = {"blocks": o["max_blocks_per_mp"], "warps": o["max_warps_per_mp"] // warps,
              "registers": o["register_file"] // regs}
    if program.shared:
        limits["shared memory"] = o["shared_per_mp"] // program.shared
    nb = barriers_used(program)
    if nb:
        limits["AsyncBarriers"] = o["barriers_per_mp"] // nb
    limit = min(limits, key=lambda k: (limits[k], k != "blocks"))
    return max(1, limits[limit]), limit


def plan(program, grid: tuple, t, sample) -> Plan:
    """The plan of a launch of ``program`` over ``grid`` with sampling ``sample`` (None:
    automatic: grids of more than ``auto_sample_waves`` waves are sampled as "wave";
    False: every block; "wave": the first ``sample_waves`` waves; an int: that many
    blocks)."""
    occ, limit = blocks_per_mp(program, t)
    nblocks = grid[0] * grid[1] * grid[2]
    per_wave = t.mp_count * occ
    waves = max(1, -(-nblocks // per_wave))
    if sample is None:
        n = t.sample_waves * per_wave if waves > t.auto_sample_waves else nblocks
    elif sample is False:
        n = nblocks
    elif sample == "wave":
        n = t.sample_waves * per_wave
    else:
        n = int(sample)
    return Plan(occ, limit, max(1, program.threads // t.warp_size), per_wave, waves,
                nblocks, max(1, min(n, nblocks)) if nblocks else 0)
