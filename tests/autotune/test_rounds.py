"""Interleaved rounds (mutile.autotune.rounds) and the tuner's side-by-side re-timing of
its fastest llvm configs. The clock is simulated where the point is a burst of load: on a
fake clock a call costs its work times the machine's load at that moment."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import Config
from mutile.autotune import api, rounds
from mutile.autotune.config import identity

from ..conftest import poison
from .conftest import block_grid


class BurstyClock:
    """A fake ``time.perf_counter``: calls made through :meth:`work` advance it by their
    cost, times 4 while the clock is inside the burst [start, end) (seconds)."""

    def __init__(self, start, end):
        self.t, self.start, self.end = 0.0, start, end

    def perf_counter(self):
        return self.t

    def work(self, ms):
        def call():
            load = 4.0 if self.start <= self.t < self.end else 1.0
            self.t += ms * 1e-3 * load
        return call


def sequential_medians(clock, calls, rep_ms):
    """What timing one candidate after the other gives: each for ``rep_ms``."""
    out = {}
    for k, fn in calls.items():
        times = []
        t_end = clock.t + rep_ms * 1e-3
        while clock.t < t_end:
            t0 = clock.t
            fn()
            times.append((clock.t - t0) * 1e3)
        out[k] = float(np.median(times))
    return out


def test_a_burst_of_load_misleads_one_after_the_other_but_not_interleaved_rounds(monkeypatch):
    """fast costs 1.0 ms, slow 1.1 ms; a burst of 4x load covers the first 40% of the
    time: timed one after the other, fast sits in the burst and loses; in interleaved
    rounds both see the burst equally and fast wins, with about its true time."""
    clock = BurstyClock(0.0, 0.2)
    calls = {"fast": clock.work(1.0), "slow": clock.work(1.1)}
    seq = sequential_medians(clock, calls, 200.0)
    assert seq["fast"] > seq["slow"]                 # the burst misleads

    clock = BurstyClock(0.0, 0.2)
    calls = {"fast": clock.work(1.0), "slow": clock.work(1.1)}
    monkeypatch.setattr(rounds.time, "perf_counter", clock.perf_counter)
    samples = rounds.interleaved(calls, 500.0)
    med = {k: float(np.median(v)) for k, v in samples.items()}
    assert med["fast"] < med["slow"]
    assert med["fast"] == pytest.approx(1.0) and med["slow"] == pytest.approx(1.1)
    assert len(samples["fast"]) == len(samples["slow"]) >= rounds.MIN_ROUNDS


def test_rounds_run_every_candidate_once_each_in_a_shuffled_order(monkeypatch):
    seen = []
    clock = BurstyClock(0.0, 0.0)

    def call(name):
        work = clock.work(0.5)

        def run():
            seen.append(name)
            work()
        return run
    monkeypatch.setattr(rounds.time, "perf_counter", clock.perf_counter)
    samples = rounds.interleaved({n: call(n) for n in "abcd"}, 200.0, seed=3)
    n = len(samples["a"])
    assert all(len(v) == n for v in samples.values()) and n >= rounds.MIN_ROUNDS
    timed = seen[8:]                       # after two estimate calls of each
    batch = 2                              # 1 ms batches of 0.5 ms calls
    orders = {tuple(timed[i:i + 4 * batch:batch]) for i in range(0, len(timed), 4 * batch)}
    assert all(sorted(o) == list("abcd") for o in orders)     # each once per round
    assert len(orders) > 1                                     # in more than one order
    assert rounds.quantiles([3.0, 1.0, 2.0], (0.5, 0.0, 1.0)) == [2.0, 1.0, 3.0]


def test_an_exception_of_a_candidate_propagates():
    def boom():
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        rounds.interleaved({"ok": lambda: None, "bad": boom}, 10.0)
    assert rounds.interleaved({}, 10.0) == {}


@mutile.jit
def copy_kernel(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    ml.store(Y + offs, ml.load(X + offs, mask=m), mask=m)


def test_llvm_tuning_retimes_its_fastest_configs_side_by_side(rng, monkeypatch):
    """On llvm the tuner's fastest configs (here: all, the span being made wide) are
    timed again in interleaved rounds: the log says which and how many rounds, and the
    winner is the least of the recorded times."""
    monkeypatch.setattr(api, "CONFIRM_SPAN", 1e9)
    k = mutile.autotune(configs=[Config({"BLOCK": b}) for b in (32, 64, 128)], key=["n"],
                        warmup=1, rep=5)(copy_kernel)
    x = rng.standard_normal(5000).astype(np.float32)
    y = poison(x.shape, x.dtype)
    k[block_grid(x.size)](x, y, x.size, backend="llvm")
    np.testing.assert_array_equal(y, x)
    d = k.tuning_log[-1]
    (note,) = [n for n in d.notes if "interleaved rounds" in n]
    assert int(note.split(" in ")[1].split()[0]) >= rounds.MIN_ROUNDS
    assert all(f"BLOCK={b}" in note for b in (32, 64, 128))
    assert d.winner is min(d.configs.values(), key=lambda c: d.timings[identity(c)])
