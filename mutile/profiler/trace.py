"""``prof.save_trace(path)``: the session as Chrome trace-event JSON (Perfetto and
chrome://tracing open it).

Process 0, "device", holds the launches (one slice each, on thread "launches") and one
counter per unit (its busy fraction over the device, from ``record.timeline``); process
``mp + 1`` is MP ``mp``, with one thread for the MP's own track, one per warp (``block B
warp W``) and one per unit (``TME``, ``SQMMA``, ...). Every ``record.slices`` entry is an
"X" event; times are microseconds of device time (cycles / clock * 1e6, from the
session's start: ``record.start`` places each launch)."""
from __future__ import annotations

import json
import os

import numpy as np

DEVICE_PID = 0
LAUNCH_TID = 0
# Thread order inside an MP process: the MP track, the units, then the warps.
_KIND_ORDER = {"MP": 0, "unit": 1, "warp": 2}


def _us(cycles: float, clock_hz: float) -> float:
    return float(cycles) / clock_hz * 1e6


def _json_value(x):
    """``json.dump``'s fallback: numpy scalars and arrays, tuples, sets and anything else
    with a ``str``."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    return str(x)


class _Tracks:
    """Process and thread ids, handed out once per track, with their metadata events."""

    def __init__(self):
        self.ids: dict = {}
        self.meta: list = []
        self._next_tid: dict = {}
        self._process(DEVICE_PID, "device", -1)
        self._thread(DEVICE_PID, LAUNCH_TID, "launches", 0)

    def _process(self, pid, name, order):
        self.meta += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": name}},
                      {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": order}}]
        self._next_tid[pid] = 1

    def _thread(self, pid, tid, name, order):
        self.meta += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": name}},
                      {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": order}}]

    def of(self, track) -> tuple:
        """(pid, tid) of a record's track: ("MP", mp), ("warp", mp, block, warp) or
        ("unit", mp, name)."""
        track = tuple(track)
        got = self.ids.get(track)
        if got is not None:
            return got
        kind = track[0] if track else None
        shapes = {"MP": 2, "warp": 4, "unit": 3}
        if kind not in shapes or len(track) != shapes[kind]:
            raise ValueError(f"trace: a slice's track {track!r} is none of ('MP', mp), "
                             f"('warp', mp, block, warp), ('unit', mp, name)")
        mp = int(track[1])
        pid = mp + 1
        if pid not in self._next_tid:
            self._process(pid, f"MP {mp}", mp)
        tid = self._next_tid[pid]
        self._next_tid[pid] += 1
        name = {"MP": lambda: "MP", "unit": lambda: str(track[2]),
                "warp": lambda: f"block {_block(track[2])} warp {track[3]}"}[kind]()
        self._thread(pid, tid, name, _KIND_ORDER[kind] * 1_000_000 + tid)
        self.ids[track] = (pid, tid)
        return pid, tid


def _block(b) -> str:
    return ",".join(str(int(x)) for x in b) if isinstance(b, (tuple, list)) else str(b)


def events(prof) -> list:
    """The trace events of ``prof``'s launches (metadata first, then launches, slices and
    counters)."""
    tracks = _Tracks()
    out = []
    for i, r in enumerate(prof.launches):
        clock = r.clock_hz
        t0 = _us(r.start, clock)
        out.append({"ph": "X", "name": r.kernel, "cat": "launch", "pid": DEVICE_PID,
                    "tid": LAUNCH_TID, "ts": t0, "dur": _us(r.cycles, clock),
                    "args": {"launch": i, "grid": list(r.grid), "cycles": r.cycles,
                             "sampled": r.sampled, "blocks": r.blocks,
                             "blocks_simulated": r.blocks_simulated, "bound": r.bound,
                             "tflops": r.tflops, "hbm_gbps": r.hbm_gbps,
                             "launch_overhead_cycles": r.launch_overhead_cycles,
                             "graph_node": r.graph_node}})
        for s in r.slices:
            pid, tid = tracks.of(s.track)
            out.append({"ph": "X", "name": s.name, "cat": s.track[0], "pid": pid, "tid": tid,
                        "ts": t0 + _us(s.start, clock), "dur": _us(s.dur, clock),
                        "args": dict(s.args, launch=i)})
        out += _counters(r, t0)
    return tracks.meta + out


def _counters(r, t0: float) -> list:
    """One "C" event per unit and bucket of ``record.timeline``, and a 0 at the launch's
    end (so the counter does not run on through the gap to the next launch)."""
    if not r.timeline:
        return []
    if r.bucket_cycles <= 0:
        raise ValueError(f"trace: launch of {r.kernel} has a timeline but bucket_cycles = "
                         f"{r.bucket_cycles}")
    out = []
    for unit, busy in r.timeline.items():
        name = f"{unit} busy"
        for k, v in enumerate(np.asarray(busy, np.float64)):
            out.append({"ph": "C", "name": name, "pid": DEVICE_PID, "tid": 0,
                        "ts": t0 + _us(k * r.bucket_cycles, r.clock_hz),
                        "args": {"busy": float(v)}})
        out.append({"ph": "C", "name": name, "pid": DEVICE_PID, "tid": 0,
                    "ts": t0 + _us(r.cycles, r.clock_hz), "args": {"busy": 0.0}})
    return out


def save(prof, path) -> str:
    """Write ``{"traceEvents": [...], ...}`` to ``path``; returns ``path`` as a string."""
    m = prof.machine
    doc = {"traceEvents": events(prof), "displayTimeUnit": "ns",
           "otherData": {"producer": "mutile.profile", "machine": m.path,
                         "machine_hash": m.hash, "launches": len(prof.launches)}}
    path = os.fspath(path)
    with open(path, "w") as f:
        json.dump(doc, f, default=_json_value, allow_nan=False)
    return path
