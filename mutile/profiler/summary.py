"""``prof.summary()``: the session's tables, as nsys and ncu print them (aligned columns,
percentages): the kernels, the launches, per-unit utilization, stall reasons, the
roofline position, and per kernel the hottest Python source lines and ISA pcs."""
from __future__ import annotations

import math
import os
from collections import defaultdict

MAX_LAUNCH_ROWS = 50          # launches listed one by one; the kernel table sums them all
SOURCE_WIDTH = 60             # characters of a source line or ISA text shown


def render(prof, top: int = 10) -> str:
    """The whole summary of ``prof`` (a :class:`~.session.Profile`) as text."""
    out = [_header(prof)]
    if not prof.launches:
        out.append("no Pinghu launch was profiled: only kernels launched with "
                   "backend='pinghu' (or MUTILE_BACKEND=pinghu) inside the session are\n")
        return "\n".join(out)
    sections = [_kernels, _launches, _utilization, _stalls, _roofline]
    out += [s(prof.launches) for s in sections]
    out += [_hot_spots(key, group, top) for key, group in _programs(prof.launches)]
    return "\n".join(out)


# ---------------------------------------------------------------- formatting
def table(headers, rows, right=None) -> str:
    """``rows`` (lists of cells) under ``headers``, columns padded to their widest cell:
    the first column left-aligned, the others right-aligned, except the column indexes in
    ``right`` when it is given (then only those are right-aligned)."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[j]) for r in cells) for j in range(len(headers))]
    right = set(range(1, len(headers))) if right is None else set(right)

    def line(r):
        return "  " + "  ".join(c.rjust(w) if j in right else c.ljust(w)
                                for j, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join(line(r) for r in cells) + "\n"


def pct(part, whole) -> str:
    """``part / whole`` as a percentage with one decimal ("-" when ``whole`` is 0)."""
    return f"{100 * part / whole:.1f}%" if whole else "-"


def num(x) -> str:
    """A count with thousands separators (integers), or 3 significant digits."""
    if x is None:
        return "-"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _us(cycles, clock_hz) -> str:
    return f"{cycles / clock_hz * 1e6:.3f}"


def _grid(grid) -> str:
    return "x".join(str(g) for g in grid)


def _clip(text: str, width: int = SOURCE_WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _where(file, line) -> str:
    """``file:line`` with the file relative to the current folder when it is inside it."""
    if file is None:
        return "(no line)"
    rel = os.path.relpath(file) if os.path.isabs(file) else file
    name = file if rel.startswith("..") else rel
    return f"{name}:{line}" if line is not None else name


# ---------------------------------------------------------------- the sections
def _header(prof) -> str:
    m = prof.machine
    clock = m.value("device", "clock_hz")
    mps = m.value("device", "mp_count")
    changed = (f"; changed entries: {', '.join(f'[{s}] {n}' for s, n in m.overrides)}"
               if m.overrides else "")
    n = len(prof.launches)
    overhead = sum(r.launch_overhead_cycles for r in prof.launches)
    kernels = sum(r.cycles for r in prof.launches)
    lines = [f"mutile profile: {n} Pinghu launch{'es' if n != 1 else ''}; machine "
             f"{m.path} ({m.hash}{changed}), {mps} MPs at {clock / 1e9:.3g} GHz"]
    if n:
        lines.append(f"device time {_us(prof.end, clock)} us: kernels {_us(kernels, clock)} us, "
                     f"launch overhead {_us(overhead, clock)} us")
    return "\n".join(lines) + "\n"


def _kernels(launches) -> str:
    """Per kernel name, as nsys's kernel summary: share of kernel time, count, avg/min/max."""
    by = defaultdict(list)
    for r in launches:
        by[r.kernel].append(r)
    total = sum(r.time_ms for r in launches)
    rows = []
    for name, rs in sorted(by.items(), key=lambda kv: -sum(r.time_ms for r in kv[1])):
        t = [r.time_ms * 1e3 for r in rs]
        rows.append([pct(sum(t), total * 1e3), f"{sum(t):.3f}", len(rs), f"{sum(t) / len(t):.3f}",
                     f"{min(t):.3f}", f"{max(t):.3f}", name])
    return "Kernels\n" + table(["time %", "total (us)", "launches", "avg (us)", "min (us)",
                                "max (us)", "kernel"], rows, right=range(6))


def _occupancy(r) -> str:
    o = r.occupancy or {}
    if "fraction" not in o:
        return "-"
    warps = f", {o['warps_per_mp']} warps/MP" if "warps_per_mp" in o else ""
    limit = f", by {o['limit']}" if o.get("limit") else ""
    return f"{100 * o['fraction']:.0f}%{warps}{limit}"


def _launches(launches) -> str:
    rows = []
    for i, r in enumerate(launches[:MAX_LAUNCH_ROWS]):
        sampled = f"{r.blocks_simulated}/{r.blocks}" if r.sampled else "no"
        rows.append([i, r.kernel, _grid(r.grid), sampled, r.waves, num(r.cycles),
                     _us(r.cycles, r.clock_hz), f"{r.tflops:.2f}", pct(r.tflops, r.peak_tflops),
                     f"{r.hbm_gbps:.1f}", pct(r.hbm_gbps, r.peak_hbm_gbps), _occupancy(r),
                     r.bound])
    more = len(launches) - MAX_LAUNCH_ROWS
    note = f"  ... {more} more launches (the kernel table above counts them)\n" if more > 0 else ""
    if any(r.sampled for r in launches):
        note += ("  sampled: simulated blocks / blocks; the rest were estimated, and their "
                 "outputs NOT computed (sample=False, `--sample off`, computes every block)\n")
    return ("Launches (time at the modelled clock; start on the device timeline in the trace)\n"
            + table(["#", "kernel", "grid", "sampled", "waves", "cycles", "time (us)", "TFLOP/s",
                     "of peak", "GB/s", "of peak", "occupancy", "bound"], rows,
                    right=[0, 4, 5, 6, 7, 8, 9, 10]) + note)


def _units(launches, attr: str, order) -> list:
    """``order`` first, then any other key the records' ``attr`` dicts have, sorted."""
    extra = sorted({k for r in launches for k in getattr(r, attr)} - set(order))
    return [k for k in order if any(k in getattr(r, attr) for r in launches)] + extra


def _utilization(launches) -> str:
    from ..backends.pinghu.machine.timing.record import UTILIZATION_UNITS
    units = _units(launches, "utilization", UTILIZATION_UNITS)
    rows = [[i, r.kernel] + [pct(r.utilization.get(u, 0.0), 1.0) for u in units]
            for i, r in enumerate(launches[:MAX_LAUNCH_ROWS])]
    return ("Utilization (busy fraction of each unit over the launch, all MPs)\n"
            + table(["#", "kernel"] + units, rows, right=[0] + list(range(2, 2 + len(units)))))


def _stalls(launches) -> str:
    from ..backends.pinghu.machine.timing.record import STALLS
    reasons = _units(launches, "stalls", STALLS)
    rows = [[i, r.kernel, num(r.warp_cycles), pct(r.issued, r.warp_cycles)]
            + [pct(r.stalls.get(s, 0.0), r.warp_cycles) for s in reasons]
            for i, r in enumerate(launches[:MAX_LAUNCH_ROWS])]
    return ("Warp states (share of warp-cycles: issuing, or stalled on a reason)\n"
            + table(["#", "kernel", "warp-cycles", "issued"] + reasons, rows,
                    right=[0] + list(range(2, 4 + len(reasons)))))


def roofline(r) -> dict:
    """The roofline position of one launch: arithmetic intensity (flops per HBM byte), the
    machine's ridge point (peak flops / peak HBM bandwidth, for this kernel's dtype), which
    side of it the kernel is on, the attainable TFLOP/s (min(peak, intensity x bandwidth))
    and the achieved fraction of that."""
    ridge = (r.peak_tflops * 1e12) / (r.peak_hbm_gbps * 1e9) if r.peak_hbm_gbps else math.inf
    if r.flops <= 0:
        return {"intensity": 0.0, "ridge": ridge, "side": "no MMA", "attainable": 0.0,
                "achieved": None}
    ai = r.flops / r.hbm_bytes if r.hbm_bytes > 0 else math.inf
    attainable = min(r.peak_tflops, ai * r.peak_hbm_gbps / 1e3)
    return {"intensity": ai, "ridge": ridge, "side": "memory" if ai < ridge else "compute",
            "attainable": attainable, "achieved": r.tflops / attainable if attainable else None}


def _roofline(launches) -> str:
    rows = []
    for i, r in enumerate(launches[:MAX_LAUNCH_ROWS]):
        p = roofline(r)
        ai = "inf" if math.isinf(p["intensity"]) else f"{p['intensity']:.1f}"
        rows.append([i, r.kernel, r.dtype or "-", num(r.flops), num(r.hbm_bytes), ai,
                     f"{p['ridge']:.1f}", p["side"], f"{p['attainable']:.1f}",
                     "-" if p["achieved"] is None else pct(p["achieved"], 1.0)])
    return ("Roofline (intensity = MMA flops per HBM byte; below the ridge point a kernel is "
            "memory-bound)\n"
            + table(["#", "kernel", "dtype", "flops", "HBM bytes", "flop/byte", "ridge",
                     "side", "roof TFLOP/s", "of roof"], rows, right=[0, 3, 4, 5, 6, 8, 9]))


# ---------------------------------------------------------------- per line and per pc
def _programs(launches):
    """Launches grouped by kernel name and program (the pcs' listing): [(label, records)]."""
    groups = {}
    for i, r in enumerate(launches):
        key = (r.kernel, tuple(sorted((p.pc, p.text) for p in r.by_pc)))
        groups.setdefault(key, []).append((i, r))
    out = []
    for (name, _), items in groups.items():
        ids = [i for i, _ in items]
        shown = ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "")
        label = f"{name} (launch{'es' if len(ids) > 1 else ''} {shown})"
        out.append((label, [r for _, r in items]))
    return out


def _merge(rows, key) -> list:
    """Rows of several launches summed per ``key`` (warp-cycles, issued, stalls, count)."""
    merged = {}
    for row in rows:
        k = key(row)
        m = merged.get(k)
        if m is None:
            merged[k] = m = {"row": row, "warp_cycles": 0.0, "issued": 0.0,
                             "stalls": defaultdict(float), "count": 0}
        m["warp_cycles"] += row.warp_cycles
        m["issued"] += row.issued
        m["count"] += getattr(row, "count", 0)
        for s, v in row.stalls.items():
            m["stalls"][s] += v
    return sorted(merged.values(), key=lambda m: -m["warp_cycles"])


def main_stalls(stalls: dict, warp_cycles: float, n: int = 2) -> str:
    """The ``n`` largest stall reasons of a row with their share of its warp-cycles."""
    top = sorted(((v, s) for s, v in stalls.items() if v > 0), reverse=True)[:n]
    return ", ".join(f"{s} {pct(v, warp_cycles)}" for v, s in top) or "-"


def _hot_spots(label: str, records: list, top: int) -> str:
    total = sum(r.warp_cycles for r in records)
    lines = _merge([row for r in records for row in r.by_line], lambda x: (x.file, x.line))
    rows = [[_where(m["row"].file, m["row"].line), num(m["warp_cycles"]),
             pct(m["warp_cycles"], total), pct(m["issued"], m["warp_cycles"]),
             main_stalls(m["stalls"], m["warp_cycles"]), _clip(m["row"].source)]
            for m in lines[:top]]
    out = [f"Kernel {label}: top {min(top, len(lines))} of {len(lines)} source lines by "
           f"warp-cycles (of {num(total)})",
           table(["file:line", "warp-cycles", "%", "issued", "main stalls", "source"], rows,
                 right=[1, 2, 3])]
    pcs = _merge([row for r in records for row in r.by_pc], lambda x: x.pc)
    rows = [[m["row"].pc, num(m["count"]), num(m["warp_cycles"]), pct(m["warp_cycles"], total),
             main_stalls(m["stalls"], m["warp_cycles"]), _where(m["row"].file, m["row"].line),
             _clip(m["row"].text)]
            for m in pcs[:top]]
    out += [f"  top {min(top, len(pcs))} of {len(pcs)} ISA pcs",
            table(["pc", "executed", "warp-cycles", "%", "main stalls", "file:line", "instruction"],
                  rows, right=[0, 1, 2, 3])]
    return "\n".join(out)
