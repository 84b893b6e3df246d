"""The profiler: the users' side of Pinghu's cycle model (issue 12).

    with mutile.profile() as prof:          # machine=path, sample=None|False|"wave"|blocks
        kernel[grid](..., backend="pinghu")
    prof.summary()                          # the tables, as nsys / ncu print them
    prof.save_trace("t.json")               # Chrome trace-event JSON (Perfetto)
    prof.plot("t.png")                      # unit utilization over time (mutile[plot])

Each launch in ``prof.launches`` is a
:class:`~mutile.backends.pinghu.machine.timing.record.LaunchRecord`: ``.kernel``, ``.grid``,
``.sampled``, ``.cycles`` (first block start to last block end), ``.time_ms``, ``.tflops``,
``.hbm_gbps``, ``.peak_tflops``, ``.peak_hbm_gbps``, ``.utilization`` (unit -> [0, 1]),
``.occupancy``, ``.warp_cycles``, ``.stalls`` (reason -> warp-cycles), ``.by_line`` and
``.by_pc`` (rows per Python source line and per ISA pc), and ``.start``/``.end`` on the
session's device timeline. :mod:`.session` is the session, :mod:`.summary` the tables,
:mod:`.trace` the trace file and :mod:`.plot` the figure. ``mutile profile script.py`` runs
a script under a session. Importing this package does not import the Pinghu backend."""
from .plot import PlotExtraMissing
from .session import Profile, check_sample, profile

__all__ = ["Profile", "PlotExtraMissing", "check_sample", "profile"]
