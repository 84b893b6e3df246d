"""``@mutile.autotune``'s Triton semantics on both backends: the tuning key, pruning
(perf_model + top_k, early_config_prune), hooks, reset_to_zero / restore_value for kernels
that accumulate, stacking with @heuristics, failing configs, check=, the log and
MUTILE_PRINT_AUTOTUNING. Every launch's output is poisoned first and compared with a
float64 numpy reference."""
from __future__ import annotations

import math

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import Config
from mutile.autotune import config as C
from mutile.testing import do_bench

from ..conftest import poison
from .conftest import block_grid

BLOCKS = (16, 32, 64)


def _configs(blocks=BLOCKS, **kw):
    return [Config({"BLOCK": b}, **kw) for b in blocks]


@mutile.autotune(configs=_configs(), key=["n"], warmup=1, rep=3)
@mutile.jit
def scale_kernel(X, Y, n, alpha, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    ml.store(Y + offs, ml.load(X + offs, mask=m) * alpha, mask=m)


def _scale(kernel, x, alpha, backend, **kw):
    y = poison(x.shape, x.dtype)
    kernel[block_grid(x.size)](x, y, x.size, alpha, backend=backend, **kw)
    return y


def test_tunes_once_per_key_and_picks_the_least_time(backend, rng):
    x = rng.standard_normal(300).astype(np.float32)
    y = _scale(scale_kernel, x, 1.5, backend)
    np.testing.assert_allclose(y, x.astype(np.float64) * 1.5, rtol=1e-6)
    d = scale_kernel.tuning_log[-1]
    assert d.key == (300, "float32", "float32") and d.backend == backend
    assert len(d.measured) == 3 and d.cached == []
    timings = scale_kernel.configs_timings
    assert set(map(C.identity, timings)) == set(map(C.identity, scale_kernel.configs))
    best = min(timings, key=timings.get)
    assert scale_kernel.best_config is best is d.winner
    assert scale_kernel.cache[d.key] is best
    if backend == "pinghu":           # modelled: deterministic, so each time re-measures equal
        for c, t in timings.items():
            again = do_bench(lambda: scale_kernel.fn[block_grid(300)](
                x, np.empty_like(x), 300, 1.5, backend="pinghu", **c.all_kwargs()))
            assert t[0] == pytest.approx(again, rel=1e-12)
    n_log = len(scale_kernel.tuning_log)
    y = _scale(scale_kernel, x, 2.0, backend)                   # same key: no tuning
    np.testing.assert_allclose(y, x.astype(np.float64) * 2.0, rtol=1e-6)
    assert len(scale_kernel.tuning_log) == n_log
    x2 = rng.standard_normal(100).astype(np.float32)            # another n: tuned again
    np.testing.assert_allclose(_scale(scale_kernel, x2, 3.0, backend), x2 * 3.0, rtol=1e-6)
    x3 = x2.astype(np.float64)                                  # another dtype: tuned again
    np.testing.assert_allclose(_scale(scale_kernel, x3, 3.0, backend), x3 * 3.0)
    keys = [d.key for d in scale_kernel.tuning_log[n_log:]]
    assert keys == [(100, "float32", "float32"), (100, "float64", "float64")]


def test_print_autotuning(backend, rng, monkeypatch, capsys):
    monkeypatch.setenv("MUTILE_PRINT_AUTOTUNING", "1")
    x = rng.standard_normal(77).astype(np.float32)
    _scale(scale_kernel, x, 1.0, backend)
    out = capsys.readouterr().out
    assert f"Autotuning kernel {scale_kernel.__qualname__} with config" in out
    assert "key (77, 'float32', 'float32')" in out and f"backend {backend}" in out


def test_prune_by_perf_model_top_k_and_early_prune(backend, rng):
    seen = []

    def perf_model(**kw):
        seen.append(kw["BLOCK"])
        return -kw["BLOCK"]                                   # claims bigger is faster

    def early(configs, nargs, **kwargs):
        assert set(nargs) == {"X", "Y", "n", "alpha"} and kwargs["backend"] == backend
        return [c for c in configs if c.kwargs["BLOCK"] != 128]

    @mutile.autotune(configs=_configs((16, 32, 64, 128)), key=["n"], warmup=1, rep=3,
                     prune_configs_by={"perf_model": perf_model, "top_k": 2,
                                       "early_config_prune": early})
    @mutile.jit
    def k(X, Y, n, alpha, BLOCK: ml.constexpr):
        offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
        ml.store(Y + offs, ml.load(X + offs, mask=offs < n) * alpha, mask=offs < n)

    x = rng.standard_normal(200).astype(np.float32)
    np.testing.assert_allclose(_scale(k, x, 0.5, backend), x * 0.5)
    assert sorted(seen) == [16, 32, 64]                     # early prune ran first
    assert sorted(c.kwargs["BLOCK"] for c in k.configs_timings) == [32, 64]

    with pytest.raises(mutile.LaunchError, match="unknown entries"):
        mutile.autotune(configs=_configs(), key=[], prune_configs_by={"top": 1})(k.fn)


@mutile.jit
def accumulate_kernel(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    ml.atomic_add(Y + offs, ml.load(X + offs, mask=m), mask=m)


@mutile.jit
def increment_kernel(X, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    m = offs < n
    ml.store(X + offs, ml.load(X + offs, mask=m) + 1.0, mask=m)


def test_reset_to_zero_keeps_an_accumulating_kernel_correct(backend, rng):
    k = mutile.autotune(configs=_configs(), key=["n"], reset_to_zero=["Y"], warmup=1,
                        rep=3)(accumulate_kernel)
    x = rng.standard_normal(130).astype(np.float32)
    y = poison(x.shape, x.dtype)                     # zeroed before every trial run
    k[block_grid(130)](x, y, 130, backend=backend)
    np.testing.assert_array_equal(y, x)              # one real run's sum, not the trials'
    # without it the trial runs pile up (and nothing comes from the disk cache)
    plain = mutile.autotune(configs=_configs(), key=["n"], warmup=1, rep=3,
                            cache_results=False)(accumulate_kernel)
    y = np.zeros_like(x)
    plain[block_grid(130)](x, y, 130, backend=backend)
    assert not np.allclose(y, x)


def test_restore_value_keeps_an_in_place_kernel_correct(backend, rng):
    k = mutile.autotune(configs=_configs(), key=["n"], restore_value=["X"], warmup=1,
                        rep=3)(increment_kernel)
    x0 = rng.standard_normal(90).astype(np.float32)
    x = x0.copy()
    k[block_grid(90)](x, 90, backend=backend)
    np.testing.assert_array_equal(x, (x0.astype(np.float64) + 1).astype(np.float32))


def test_hooks_see_the_arguments_and_the_config(backend, rng):
    calls = []

    def pre(nargs, reset_only=False):
        calls.append(("pre", nargs["BLOCK"], reset_only))

    def post(nargs, exception=None):
        calls.append(("post", nargs["BLOCK"], exception))

    def config_hook(nargs):
        calls.append(("config", nargs["BLOCK"], nargs["n"]))

    configs = [Config({"BLOCK": 16}), Config({"BLOCK": 32}, pre_hook=config_hook)]
    k = mutile.autotune(configs=configs, key=["n"], pre_hook=pre, post_hook=post, warmup=1,
                        rep=2)(scale_kernel.fn)
    x = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(_scale(k, x, 2.0, backend), x * 2.0)
    kinds = {c[0] for c in calls}
    assert kinds == {"pre", "post", "config"}
    assert ("config", 32, 64) in calls and ("pre", 16, False) in calls
    assert all(c[2] is None for c in calls if c[0] == "post")
    # after tuning: the reset-only pre-hook, then the winner's own hook if it has one
    assert ("pre", k.best_config.kwargs["BLOCK"], True) in calls


def test_stacked_with_heuristics_both_ways(backend, rng):
    @mutile.autotune(configs=_configs(), key=["n"], warmup=1, rep=2)
    @mutile.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
    @mutile.jit
    def inner(X, Y, n, alpha, BLOCK: ml.constexpr, EVEN: ml.constexpr):
        offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
        if EVEN:
            ml.store(Y + offs, ml.load(X + offs) * alpha)
        else:
            ml.store(Y + offs, ml.load(X + offs, mask=offs < n) * alpha, mask=offs < n)

    outer = mutile.heuristics({"alpha": lambda a: 2.0 * a["n"]})(
        mutile.autotune(configs=_configs(), key=["n"], warmup=1, rep=2)(scale_kernel.fn))
    for n in (64, 100):
        x = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_allclose(_scale(inner, x, 3.0, backend), x * 3.0)
        y = poison(x.shape, x.dtype)
        outer[block_grid(n)](x, y, n, backend=backend)
        np.testing.assert_allclose(y, x.astype(np.float64) * 2.0 * n, rtol=1e-6)
    assert len(inner.tuning_log) == 2 and inner.best_config.kwargs["BLOCK"] in BLOCKS


@mutile.jit
def limited_kernel(X, Y, n, BLOCK: ml.constexpr):
    ml.static_assert(BLOCK <= 32, "BLOCK is too big for this kernel")
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs, mask=offs < n) - 1.0, mask=offs < n)


def test_a_failing_config_scores_infinity_with_its_reason(backend, rng):
    k = mutile.autotune(configs=_configs((16, 32, 64)), key=["n"], warmup=1, rep=2)(
        limited_kernel)
    x = rng.standard_normal(50).astype(np.float32)
    y = poison(x.shape, x.dtype)
    k[block_grid(50)](x, y, 50, backend=backend)
    np.testing.assert_array_equal(y, (x.astype(np.float64) - 1).astype(np.float32))
    d = k.tuning_log[-1]
    bad = C.identity(k.configs[2])
    assert math.isinf(d.timings[bad][0]) and "BLOCK is too big" in d.reasons[bad]
    assert d.winner.kwargs["BLOCK"] in (16, 32)

    k = mutile.autotune(configs=_configs((64, 128)), key=["n"], warmup=1, rep=2)(
        limited_kernel)
    with pytest.raises(mutile.LaunchError) as e:
        k[block_grid(50)](x, y, 50, backend=backend)
    msg = str(e.value)
    assert "every config failed" in msg
    rows = [ln for ln in msg.splitlines() if ln.startswith("  BLOCK=")]
    assert [r.split()[0] for r in rows] == ["BLOCK=64", "BLOCK=128"]
    assert all("BLOCK is too big" in r for r in rows)


@mutile.jit
def wrong_for_64_kernel(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    x = ml.load(X + offs, mask=offs < n)
    if BLOCK == 64:
        x = x + 1.0                                     # a config that tunes in a bug
    ml.store(Y + offs, x, mask=offs < n)


def test_check_rejects_a_config_with_another_answer(backend, rng):
    k = mutile.autotune(configs=_configs(), key=["n"], check=1e-6, warmup=1, rep=2)(
        wrong_for_64_kernel)
    x = rng.standard_normal(200).astype(np.float32)
    y = poison(x.shape, x.dtype)
    k[block_grid(200)](x, y, 200, backend=backend)
    np.testing.assert_array_equal(y, x)
    d = k.tuning_log[-1]
    bad = C.identity(k.configs[2])
    assert math.isinf(d.timings[bad][0]) and "check failed" in d.reasons[bad]


def test_single_config_no_tuning_and_conflicts(backend, rng):
    k = mutile.autotune(configs=_configs((32,)), key=["n"])(scale_kernel.fn)
    x = rng.standard_normal(40).astype(np.float32)
    np.testing.assert_allclose(_scale(k, x, 2.0, backend), x * 2.0)
    assert k.tuning_log == [] and k.best_config.kwargs == {"BLOCK": 32}
    with pytest.raises(mutile.LaunchError, match="conflicting meta-parameters: BLOCK"):
        scale_kernel[block_grid(40)](x, np.empty_like(x), 40, 1.0, BLOCK=16, backend=backend)


def test_triton_signature_and_bad_use():
    import inspect
    names = list(inspect.signature(mutile.autotune).parameters)
    assert names[:11] == ["configs", "key", "prune_configs_by", "reset_to_zero",
                          "restore_value", "pre_hook", "post_hook", "warmup", "rep",
                          "use_cuda_graph", "do_bench"]
    assert "cache_results" in names
    with pytest.raises(mutile.LaunchError, match="put @autotune above @jit"):
        mutile.autotune(configs=_configs(), key=["n"])(lambda x: x)
    with pytest.raises(mutile.LaunchError, match="'m' is not a parameter"):
        mutile.autotune(configs=_configs(), key=["m"])(scale_kernel.fn)
    with pytest.raises(mutile.LaunchError, match="search='grid'"):
        mutile.autotune(configs=_configs(), key=["n"], search="grid")(scale_kernel.fn)
    t = mutile.Autotuner(None, [], [], [], None, None)           # FlagGems' LibTuner does
    assert t.configs[0].kwargs == {} and t.configs[0].num_warps == 4


def test_custom_do_bench_and_warmup(backend, rng):
    seen = []

    def bench(fn, quantiles):
        fn()
        seen.append(quantiles)
        return [float(len(seen))] * 3                  # the first config measured wins

    k = mutile.autotune(configs=_configs(), key=["n"], do_bench=bench)(scale_kernel.fn)
    x = rng.standard_normal(30).astype(np.float32)
    np.testing.assert_allclose(_scale(k, x, 4.0, backend), x * 4.0)
    assert len(seen) == 3 and k.best_config is k.configs[0]
    compiled = k.warmup(x, x, 30, 1.0, grid=(1,), backend=backend)
    assert len(compiled) == 3
