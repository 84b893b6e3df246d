"""Host-side helpers for checking and timing kernels (``mutile.testing``)."""
from __future__ import annotations

import statistics
import time

import numpy as np


def do_bench(fn, warmup: int = 3, rep: int = 20, min_seconds: float = 0.05,
             return_mode: str = "median"):
    """Run ``fn()`` and return its wall time in milliseconds (median by default).

    ``warmup`` untimed calls run first; then at least ``rep`` timed calls and at least
    ``min_seconds`` of timing. ``return_mode``: "median", "min", "max", "mean" or "all".
    """
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < rep or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
        if len(times) >= 10 * rep:
            break
    if return_mode == "all":
        return times
    return {"median": statistics.median, "min": min, "max": max,
            "mean": statistics.fmean}[return_mode](times)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, err_msg=""):
    """numpy's assert_allclose in float64, NaNs must match positions."""
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=rtol, atol=atol, err_msg=err_msg)
