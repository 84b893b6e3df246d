"""The GPU core dump of a faulting pinghu launch: ``DeviceFault.coredump``.

When a launch faults (an out-of-bounds or misaligned access, a failed assertion, a
sanitizer report, a deadlock, no progress, the watchdog, a SYNC with an empty stack...),
:func:`coredump` takes the resident wave's state into a dict whose values are JSON
types (str, int, float, bool, None, lists, dicts) or numpy arrays, at any depth. It is
built only on a fault. Keys:

* ``backend`` ("pinghu"), ``kernel``, ``message`` (the fault's text), ``source``
  (``"file:line"`` of the fault, or None), ``grid`` [x, y, z], ``block_dim`` [threads,
  1, 1], ``warps_per_block``, ``wave`` (``first_block``: linear id of the first resident
  block, ``blocks``: how many; the blocks before it have finished), ``retired``
  (warp-instructions executed by the launch), ``program`` (the ISA listing).
* ``warps``: every resident warp, ``{"block": [x, y, z], "warp": i, "pc": n, "state":
  "running" | "barrier" | "async_barrier" | "done", "active": lane mask, "where":
  "pc N: ISA    // file:line  source"}``; a warp at a barrier also has ``"barrier"``.
* ``faulting``: the warp the fault names, ``{"block", "warp", "lanes" (the lanes at
  fault), "pc", "where", "active", "stack" ([{"pc", "mask"}], innermost last),
  "registers" (uint32 [registers, 32]: R0.. by lane), "predicates" (bool [predicates,
  32]), "local" (uint32 [words, 32])}``.
* ``shared``: uint8 array, the faulting block's shared memory (``.shared`` bytes).
* ``barriers``: the faulting block's barriers: ``{"kind": "async", "id", "expected"
  (warp arrivals per phase), "arrived" (this phase), "phase" (phases completed since
  INIT; parity = phase & 1), "pending_tx" (transaction bytes), "waiting" (warps)}`` per
  initialized AsyncBarrier, and ``{"kind": "sync", "id", "count" (BAR.SYNC.CNT's warp
  count, or None), "waiting" (warps)}`` per BAR.SYNC id that warps wait at.
"""
from __future__ import annotations

import numpy as np

from ..isa.disasm import disassemble

STATES = {0: "running", 1: "barrier", 2: "done", 3: "async_barrier"}


def coredump(st, err, machine) -> dict:
    """The core dump of wave ``st`` when it raised ``err`` (see the module docstring)."""
    wpb = st.warps_per_block
    warp, lanes, pc = st.culprit or _default_culprit(st)
    blk, w_in = divmod(warp, wpb)
    where = {}

    def at(pc: int) -> str:
        if pc not in where:
            where[pc] = st._where(pc)
        return where[pc]

    warps = []
    for g in range(st.nwarps):
        b, w = divmod(g, wpb)
        at_pc = int(st.pcs[g])
        entry = {"block": list(st.block_coords(b)), "warp": w, "pc": at_pc,
                 "state": STATES[int(st.status[g])], "active": int(st.active[g]),
                 "where": at(at_pc)}
        if st.status[g] == 1:
            entry["barrier"] = int(st.bar[g])
        elif st.status[g] == 3:
            entry["barrier"] = int(st.asyn.wait_bar[g])
        warps.append(entry)
    cols = slice(warp * 32, warp * 32 + 32)
    active = int(st.active[warp])
    if lanes is None:
        lanes = [i for i in range(32) if active >> i & 1] or list(range(32))
    depth = int(st.depth[warp])
    lm = st.local_mem
    mem = st.shared_mem
    loc = getattr(err, "loc", None)
    return {
        "backend": "pinghu", "kernel": st.name, "message": str(err),
        "source": f"{loc.file}:{loc.line}" if loc is not None and loc.line > 0 else None,
        "grid": list(st.grid), "block_dim": [st.threads, 1, 1], "warps_per_block": wpb,
        "wave": {"first_block": int(st.block_ids[0]), "blocks": len(st.block_ids)},
        "retired": machine.retired(),
        "warps": warps,
        "faulting": {
            "block": list(st.block_coords(blk)), "warp": w_in, "lanes": list(lanes),
            "pc": pc, "where": at(pc), "active": active,
            "stack": [{"pc": int(st.stack_pc[warp, d]), "mask": int(st.stack_mask[warp, d])}
                      for d in range(depth)],
            "registers": st.R[:st.dec.regs, cols].copy(),
            "predicates": st.P[:, cols].copy(),
            "local": lm.table[:, cols].copy() if lm.words else np.zeros((0, 32), np.uint32),
        },
        "shared": mem.buf[blk * mem.pad:blk * mem.pad + mem.size].copy(),
        "barriers": _barriers(st, blk),
        "program": disassemble(st.program),
    }


def _default_culprit(st) -> tuple:
    """(warp, None, pc) of the first running warp (else the first live one, else 0)."""
    for ws in (np.flatnonzero(st.status == 0), np.flatnonzero(st.status != 2), [0]):
        if len(ws):
            return int(ws[0]), None, int(st.pcs[ws[0]])


def _barriers(st, blk: int) -> list:
    wpb, u = st.warps_per_block, st.asyn
    ws = blk * wpb + np.arange(wpb)
    out = []
    for b in np.flatnonzero(u.inited[blk]).tolist():
        waiting = [int(g - blk * wpb) for g in ws if st.status[g] == 3 and u.wait_bar[g] == b]
        count, pending = int(u.count[blk, b]), int(u.pending[blk, b])
        out.append({"kind": "async", "id": b, "expected": count, "arrived": count - pending,
                    "phase": int(u.phase[blk, b]), "pending_tx": int(u.tx[blk, b]),
                    "waiting": waiting})
    at_bar = ws[st.status[ws] == 1]
    for b in sorted(set(st.bar[at_bar].tolist())):
        group = at_bar[st.bar[at_bar] == b]
        cnt = int(st.bar_cnt[group[0]])
        out.append({"kind": "sync", "id": int(b), "count": cnt or None,
                    "waiting": [int(g - blk * wpb) for g in group]})
    return out
