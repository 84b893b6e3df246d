"""``prof.plot(path)``: each unit's utilization over the session's device timeline (one
line per unit, from the records' ``timeline`` buckets), the launches shaded and named.
matplotlib is an optional extra (``pip install 'mutile[plot]'``), imported only here, and
only its object API is used (no pyplot: the caller's backend and figures are untouched)."""
from __future__ import annotations

import os

import numpy as np

EXTRA = "pip install 'mutile[plot]'"


class PlotExtraMissing(ImportError):
    """``prof.plot`` was called without matplotlib installed."""


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise PlotExtraMissing(f"prof.plot needs matplotlib, which is not installed ({e}); "
                               f"install the plot extra: {EXTRA}") from None
    return Figure


def series(prof) -> dict:
    """unit -> (times in us, busy fractions): each launch's buckets placed at its start,
    with a 0 before and after each launch (so a gap between launches reads as idle)."""
    out: dict = {}
    for r in prof.launches:
        if not r.timeline:
            continue
        t0 = r.start / r.clock_hz * 1e6
        t1 = r.end / r.clock_hz * 1e6
        for unit, busy in r.timeline.items():
            busy = np.asarray(busy, np.float64)
            starts = t0 + np.arange(len(busy)) * r.bucket_cycles / r.clock_hz * 1e6
            ends = np.minimum(starts + r.bucket_cycles / r.clock_hz * 1e6, t1)
            # a step per bucket: its value from the bucket's start to its end
            ts = np.concatenate([[t0], np.column_stack([starts, ends]).ravel(), [t1]])
            vs = np.concatenate([[0.0], np.repeat(busy, 2), [0.0]])
            xs, ys = out.setdefault(unit, ([], []))
            xs.append(ts)
            ys.append(vs)
    return {u: (np.concatenate(xs), np.concatenate(ys)) for u, (xs, ys) in out.items()}


def plot(prof, path) -> str:
    """Write the utilization timeline of ``prof`` to ``path``; returns the path."""
    from ..backends.pinghu.machine.timing.record import UTILIZATION_UNITS
    Figure = _figure_class()
    data = series(prof)
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for i, r in enumerate(prof.launches):
        t0, t1 = r.start / r.clock_hz * 1e6, r.end / r.clock_hz * 1e6
        ax.axvspan(t0, t1, color=f"C{i % 2 + 7}", alpha=0.12, lw=0)
        ax.text((t0 + t1) / 2, 1.03, f"{i}: {r.kernel}", ha="center", va="bottom", fontsize=7,
                clip_on=True)
    order = [u for u in UTILIZATION_UNITS if u in data] + sorted(set(data) - set(UTILIZATION_UNITS))
    for unit in order:
        xs, ys = data[unit]
        ax.plot(xs, ys, label=unit, lw=1)
    ax.set_ylim(0, 1.12)
    ax.set_xlim(0, max(prof.end / prof.launches[-1].clock_hz * 1e6, 1e-3)
                if prof.launches else 1.0)
    ax.set_xlabel("device time (us)")
    ax.set_ylabel("busy fraction")
    ax.set_title(f"{len(prof.launches)} Pinghu launches: unit utilization "
                 f"({os.path.basename(prof.machine.path)})", fontsize=9)
    if order:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    else:
        ax.text(0.5, 0.5, "no utilization timeline recorded", ha="center",
                transform=ax.transAxes)
    path = os.fspath(path)
    fig.savefig(path, dpi=120)
    return path
