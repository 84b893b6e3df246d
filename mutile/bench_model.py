"""One profiled run for the templates' bench rows (``bench_templates*.py``)."""
from __future__ import annotations

import time


def profiled(fn, warm: bool = False, sample="wave") -> tuple:
    """(the model table's dict, peak TFLOP/s at the launches' dtype) of one run of ``fn``
    under ``mutile.profile(sample="wave")`` (large grids: two waves simulated, the rest
    estimated, so not every output is computed). Its wall time stands for both the plain
    and the profiled interpreter time. With ``warm``, ``fn`` first runs once under a
    sampled session of its own, so that an autotuner decides then: its trial launches
    are not counted in the measured run. ``sample=False`` simulates every block (for
    grids whose blocks differ in work, which the sampled estimate assumes alike)."""
    from .profiler import profile
    if warm:
        with profile(sample="wave"):
            fn()
    t = time.perf_counter()
    with profile(sample=sample) as prof:
        fn()
    wall = time.perf_counter() - t
    cycles = sum(r.cycles for r in prof.launches)
    flops = sum(r.flops for r in prof.launches)
    busy = sum(r.utilization.get("SQMMA", 0.0) * r.cycles for r in prof.launches)
    secs = prof.time_ms / 1e3
    model = {"launches": len(prof.launches), "cycles": cycles, "time_us": prof.time_ms * 1e3,
             "tflops": flops / secs / 1e12 if secs else 0.0,
             "sqmma": busy / cycles if cycles else 0.0, "profiled_s": wall, "plain_s": wall}
    return model, max(r.peak_tflops for r in prof.launches)
