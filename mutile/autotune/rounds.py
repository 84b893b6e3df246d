"""Wall times of several candidates measured side by side, in interleaved rounds.

On a shared machine another process's load comes and goes over seconds, so timing one
config after another (each for ``rep`` ms, as Triton's autotuner does) lets a burst of load
land on one config and not on the next: on 2 shared cores that alone moves a config by
10-30%, more than the gaps the tuner has to tell apart. Here every round runs each
candidate once, in a fresh random order (seeded), for a short batch of calls; over many
rounds every candidate sees the same mix of quiet and busy moments, and their medians
compare like with like."""
from __future__ import annotations

import random
import time

import numpy as np

BATCH_MS = 1.0          # one sample: at least this long a batch of calls
MIN_ROUNDS = 15         # at least this many samples of each candidate
MAX_ROUNDS = 2000


def _estimate(fn) -> float:
    """Milliseconds of one call of ``fn`` (after one untimed call)."""
    fn()
    t0 = time.perf_counter()
    fn()
    return max((time.perf_counter() - t0) * 1e3, 1e-4)


def interleaved(calls: dict, rep_ms: float, seed: int = 0) -> dict:
    """``{name: [ms per call, one per round]}`` for the callables in ``calls``, measured in
    interleaved rounds for about ``rep_ms`` milliseconds in all. An exception of a call
    propagates (the caller decides what a failing candidate scores)."""
    if not calls:
        return {}
    est = {k: _estimate(f) for k, f in calls.items()}
    batch = {k: max(1, int(BATCH_MS / est[k])) for k in calls}
    per_round = sum(est[k] * batch[k] for k in calls)
    rounds = min(MAX_ROUNDS, max(MIN_ROUNDS, int(rep_ms / per_round)))
    order = list(calls)
    rng = random.Random(seed)
    out: dict = {k: [] for k in calls}
    for _ in range(rounds):
        rng.shuffle(order)
        for k in order:
            fn, n = calls[k], batch[k]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out[k].append((time.perf_counter() - t0) * 1e3 / n)
    return out


def quantiles(samples: list, qs=(0.5, 0.2, 0.8)) -> list:
    """The ``qs`` quantiles of ``samples`` (e.g. median, 20th and 80th percentile)."""
    return [float(x) for x in np.quantile(np.asarray(samples, np.float64), qs)]


__all__ = ["interleaved", "quantiles"]
