"""The steady-state launch path (:mod:`mutile.runtime.launch_plan`): a call signature seen
before reuses its binding plan, and every check that can change between calls still
runs: dtype and integer-width specialization, read-only outputs, the grid, bounds, the
kernel cache being changed, environment switches. Random data, poisoned outputs, both
backends."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml
import mutile.runtime.jit as mjit

from ..conftest import poison


@mutile.jit
def scale_add(X, Y, Out, a, n, BLOCK: ml.constexpr = 256):
    o = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = o < n
    ml.store(Out + o, a * ml.load(X + o, mask=m) + ml.load(Y + o, mask=m), mask=m)


@mutile.jit
def store_past(X, n, BLOCK: ml.constexpr):
    o = ml.arange(0, BLOCK)
    ml.store(X + o + n, o.to(ml.float32))


@pytest.fixture
def plan_calls(monkeypatch):
    """How many launches took the plan path."""
    calls = []
    real = mjit.JITFunction._run_plan

    def counting(self, *a, **kw):
        calls.append(self.__name__)
        return real(self, *a, **kw)

    monkeypatch.setattr(mjit.JITFunction, "_run_plan", counting)
    return calls


def _ref(x, y, a):
    return a * x.astype(np.float64) + y.astype(np.float64)


def test_repeated_launches_use_the_plan_with_fresh_data(backend, rng, plan_calls):
    n = 1000
    for i in range(4):
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        out = poison(n, np.float32)
        a = float(rng.uniform(-2, 2))
        scale_add[(4,)](x, y, out, a, n, backend=backend)
        np.testing.assert_allclose(out, _ref(x, y, a), rtol=1e-6, atol=1e-6)
    assert len(plan_calls) == 3                # the first call made the plan
    out = poison(n, np.float32)                # keywords, a callable grid: a plan of its own
    for _ in range(2):
        scale_add[lambda meta: (mutile.cdiv(meta["n"], meta["BLOCK"]),)](
            x, y, Out=out, a=2.0, n=n, BLOCK=128, backend=backend)
    np.testing.assert_allclose(out, _ref(x, y, 2.0), rtol=1e-6, atol=1e-6)
    assert len(plan_calls) == 4


def test_what_changes_between_calls_is_still_checked(backend, rng, plan_calls):
    n = 300
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    for _ in range(2):
        scale_add[(2,)](x, y, poison(n, np.float32), 1.5, n, backend=backend)
    # another dtype: another specialization, not the float32 plan
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    out64 = poison(n, np.float64)
    scale_add[(2,)](x64, y64, out64, 1.5, n, backend=backend)
    np.testing.assert_allclose(out64, _ref(x, y, 1.5), rtol=1e-12)
    # an array for a constexpr: refused as on the full path
    with pytest.raises(mutile.LaunchError):
        scale_add[(2,)](x, y, poison(n, np.float32), 1.5, n, BLOCK=np.zeros(2),
                        backend=backend)
    # a read-only output: the same error as the full path, each time
    ro = poison(n, np.float32)
    ro.flags.writeable = False
    for _ in range(2):
        with pytest.raises(mutile.LaunchError, match="'Out' is read-only but the kernel "
                                                     "stores to it"):
            scale_add[(2,)](x, y, ro, 1.5, n, backend=backend)
    # a bad grid
    with pytest.raises(mutile.LaunchError, match=r"grid\[0\] must be positive"):
        scale_add[(0,)](x, y, poison(n, np.float32), 1.5, n, backend=backend)
    assert plan_calls                          # the checks above ran on the plan path


def test_an_int_beyond_i32_takes_its_own_specialization(backend, plan_calls):
    n = 64
    x, y = np.ones(n, np.float32), np.arange(n, dtype=np.float32)
    out = poison(n, np.float32)
    scale_add[(1,)](x, y, out, 1.0, n, backend=backend)
    big = poison(n, np.float32)
    k = scale_add[(1,)](x, y, big, 1.0, n + 2 ** 40 - 2 ** 40, backend=backend)
    assert k.spec["n"] == mutile.language.int32
    k = scale_add.warmup(x, y, big, 1.0, 2 ** 40, grid=(1,), backend=backend)
    assert str(k.spec["n"]) == "i64"
    np.testing.assert_array_equal(big, y + 1)


def test_bounds_are_checked_on_every_planned_launch(backend):
    x = np.zeros(16, np.float32)
    store_past[(1,)](x, 0, BLOCK=16, backend=backend)       # in bounds: makes the plan
    np.testing.assert_array_equal(x, np.arange(16))
    for _ in range(2):
        with pytest.raises(mutile.DeviceFault, match="out(-| )of(-| )bounds"):
            store_past[(1,)](x, 3, BLOCK=16, backend=backend)


def test_a_changed_cache_or_environment_is_not_served_by_an_old_plan(rng, plan_calls,
                                                                     monkeypatch, compiles):
    n = 100
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    for _ in range(2):
        scale_add[(1,)](x, y, poison(n, np.float32), 1.0, n)
    assert len(plan_calls) == 1
    scale_add.cache.clear()                      # as if the process had restarted
    out = poison(n, np.float32)
    scale_add[(1,)](x, y, out, 1.0, n)
    assert len(plan_calls) == 1                  # the full path, through the disk cache
    np.testing.assert_allclose(out, _ref(x, y, 1.0), rtol=1e-6)
    monkeypatch.setenv("MUTILE_BACKEND", "pinghu")
    out = poison(n, np.float32)
    k = scale_add[(1,)](x, y, out, 1.0, n)
    assert k.options["backend"] == "pinghu" and len(plan_calls) == 1
    np.testing.assert_allclose(out, _ref(x, y, 1.0), rtol=1e-6)


def test_arguments_the_fast_packer_does_not_take_still_launch_right(backend, rng,
                                                                    plan_calls):
    """A read-only input (numpy's view of bytes): the planned launch hands it to the
    general packer, and the result is still the float64 reference."""
    n = 200
    base = rng.standard_normal(2 * n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    for x in (base[:n].copy(), np.frombuffer(base[:n].tobytes(), np.float32)):
        for _ in range(2):                     # the second launch takes the plan
            out = poison(n, np.float32)
            scale_add[(1,)](x, y, out, -0.5, n, backend=backend)
            np.testing.assert_allclose(out, _ref(x, y, -0.5), rtol=1e-6, atol=1e-6)
    assert len(plan_calls) >= 2


def test_a_planned_fault_names_the_array(backend):
    x = np.zeros(16, np.float32)
    store_past[(1,)](x, 0, BLOCK=16, backend=backend)
    with pytest.raises(mutile.DeviceFault) as info:
        store_past[(1,)](x, 5, BLOCK=16, backend=backend)
    assert "'X'" in str(info.value), str(info.value)
