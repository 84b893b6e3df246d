"""``mutile.testing.do_bench`` on the pinghu backend: the modelled device time (the
launches' ``time_ms`` summed), from one call under a private profiling session; the
wall-clock path when ``fn`` launches no Pinghu kernel."""
from __future__ import annotations

import pytest

import mutile
from mutile import machines
from mutile.backends.pinghu.machine.timing import session
from mutile.testing import do_bench, do_bench_cudagraph

from .record_kit import make_record


class Launcher:
    """``fn`` for do_bench: each call hands fresh records to the active session, as the
    Pinghu launcher does (``session.active().add(record)``), and remembers the session."""

    def __init__(self, rng, n=2):
        self.rng, self.n, self.calls, self.sessions, self.records = rng, n, 0, [], []

    def __call__(self):
        self.calls += 1
        prof = session.active()
        self.sessions.append(prof)
        for _ in range(self.n):
            r = make_record(self.rng, cycles=float(self.rng.integers(10_000, 50_000)))
            self.records.append(r)
            prof.add(r)


@pytest.mark.parametrize("bench", [do_bench, do_bench_cudagraph])
def test_returns_the_modelled_time_from_one_call(bench, rng):
    fn = Launcher(rng)
    got = bench(fn)
    assert fn.calls == 1 and len(fn.records) == 2
    want = sum(r.cycles for r in fn.records) / fn.records[0].clock_hz * 1e3
    assert got == pytest.approx(want) and got == sum(r.time_ms for r in fn.records)
    assert fn.sessions[0] is not None and fn.sessions[0].sample is None
    assert session.active() is None


@pytest.mark.parametrize("kw, shape", [({"quantiles": [0.5, 0.2, 0.8]}, 3),
                                       ({"quantiles": [0.5]}, None),
                                       ({"return_mode": "all"}, 1),
                                       ({"return_mode": "min"}, None),
                                       ({"return_mode": "median"}, None)])
def test_quantiles_and_modes_give_the_same_number(rng, kw, shape):
    fn = Launcher(rng, n=3)
    got = do_bench(fn, **kw)
    want = sum(r.time_ms for r in fn.records)
    if shape is None:
        assert got == pytest.approx(want)
    else:
        assert got == pytest.approx([want] * shape)


def test_without_pinghu_launches_it_times_the_wall_clock():
    calls = []
    got = do_bench(lambda: calls.append(1), warmup=1, rep=2, quantiles=[0.5, 0.2, 0.8])
    assert len(calls) > 5 and len(got) == 3 and got[1] <= got[0] <= got[2]


def test_inside_a_profile_the_launches_join_it(rng, tmp_path):
    fast = tmp_path / "fast.toml"
    fast.write_text('[device]\nlaunch_overhead_us = { value = 1.5, source = "what if" }\n')
    with mutile.profile(machine=fast, sample="wave") as outer:
        outer.add(make_record(rng, kernel="before"))
        fn = Launcher(rng)
        got = do_bench(fn)
    private = fn.sessions[0]
    assert private is not outer and private.machine is outer.machine
    assert private.machine is not machines.default() and private.sample is None
    assert [r.kernel for r in outer.launches] == ["before", "attn_fwd", "attn_fwd"]
    assert got == pytest.approx(sum(r.time_ms for r in outer.launches[1:]))
    # copies, placed on the outer session's timeline after its own launch
    assert outer.launches[1] is not fn.records[0]
    assert outer.launches[1].start == pytest.approx(outer.launches[0].end +
                                                    outer.launches[1].launch_overhead_cycles)
    assert fn.records[0].start == pytest.approx(fn.records[0].launch_overhead_cycles)


def test_the_modelled_call_is_the_first_call_as_in_triton(rng):
    """Triton's do_bench makes its first call before clearing ``grad_to_none``; here that
    call is the modelled one, and there is no other."""
    class T:
        grad = "stale"
    t = T()
    seen = []

    def fn():
        seen.append(t.grad)
        session.active().add(make_record(rng))
    do_bench(fn, grad_to_none=[t], warmup=1000, rep=1000)
    assert seen == ["stale"]


def test_an_error_in_fn_propagates_and_pops_the_session(rng):
    def fn():
        session.active().add(make_record(rng))
        raise KeyError("in fn")
    with pytest.raises(KeyError, match="in fn"):
        do_bench(fn)
    assert session.active() is None
    with pytest.raises(Exception, match="return_mode"):
        do_bench(Launcher(rng), return_mode="avg")
