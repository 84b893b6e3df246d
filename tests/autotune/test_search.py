"""ConfigSpace (expansion, constraint, errors) and the searches: exhaustive, random with a
budget, and Optuna's TPE (``search="model"``, the ``[tune]`` extra) — each picks the best
of what it measured, within its budget, on the modelled Pinghu times."""
from __future__ import annotations

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.autotune import config as C
from mutile.autotune import search

from ..conftest import poison
from .conftest import block_grid


def test_a_space_expands_to_configs():
    space = mutile.ConfigSpace(BLOCK=[16, 32, 64], num_warps=[2, 4], warp_specialize=[False],
                               constraint=lambda c: c["BLOCK"] * c["num_warps"] <= 128)
    configs = space.configs()
    assert space.size() == 6 and len(space) == 5
    assert [(c.kwargs["BLOCK"], c.num_warps) for c in configs] == [
        (16, 2), (16, 4), (32, 2), (32, 4), (64, 2)]
    assert all(c.kwargs.keys() == {"BLOCK"} and c.warp_specialize is False for c in configs)
    assert len({C.identity(c) for c in configs}) == 5
    back = C.from_dict(C.to_dict(configs[3]), configs)
    assert back is configs[3]
    fresh = C.from_dict(C.to_dict(configs[3]))
    assert C.identity(fresh) == C.identity(configs[3])


@pytest.mark.parametrize("axes, match", [
    ({}, "at least one axis"),
    ({"BLOCK": 16}, "must be a list"),
    ({"BLOCK": []}, "has no values"),
    ({"BLOCK": [16], "constraint": 3}, "constraint must be a function"),
])
def test_space_errors(axes, match):
    with pytest.raises(mutile.LaunchError, match=match):
        mutile.ConfigSpace(**axes)


def test_a_constraint_rejecting_everything_and_one_raising():
    with pytest.raises(mutile.LaunchError, match="rejects every one of the 2"):
        mutile.ConfigSpace(BLOCK=[1, 2], constraint=lambda c: False).configs()
    with pytest.raises(mutile.LaunchError, match="the constraint raised KeyError"):
        mutile.ConfigSpace(BLOCK=[1, 2], constraint=lambda c: c["X"]).configs()


def test_budgets():
    assert search.budget_count(0.2, 40) == 8 and search.budget_count(0.01, 40) == 1
    assert search.budget_count(5, 40) == 5 and search.budget_count(99, 40) == 40
    for bad in (0, -1, "3", True):
        with pytest.raises(mutile.LaunchError, match="budget"):
            search.budget_count(bad, 10)


@mutile.jit
def scale_kernel(X, Y, n, BLOCK: ml.constexpr):
    offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
    ml.store(Y + offs, ml.load(X + offs, mask=offs < n) * 2.0, mask=offs < n)


SPACE = mutile.ConfigSpace(BLOCK=[16, 32, 64, 128], num_warps=[1, 2, 4])


def _run(rng, **kw):
    k = mutile.autotune(configs=SPACE, key=["n"], **kw)(scale_kernel)
    x = rng.standard_normal(500).astype(np.float32)
    y = poison(x.shape, x.dtype)
    k[block_grid(500)](x, y, 500, backend="pinghu")
    np.testing.assert_allclose(y, x.astype(np.float64) * 2.0)
    return k.tuning_log[-1]


def test_exhaustive_then_random_within_budget(rng):
    full = _run(rng)
    assert len(full.timings) == 12
    best = min(t[0] for t in full.timings.values())
    assert full.timings[C.identity(full.winner)][0] == best
    picks = []
    for seed in (0, 1):
        d = _run(rng, search="random", budget=0.25, seed=seed)
        assert len(d.timings) == 3 and d.cached and not d.measured   # exhaustive filled it
        assert d.timings[C.identity(d.winner)][0] == min(t[0] for t in d.timings.values())
        picks.append(sorted(d.timings))
    assert picks[0] != picks[1]                       # seeds draw different configs


def test_model_search_uses_optuna(rng):
    pytest.importorskip("optuna")
    d = _run(rng, search="model", budget=6, seed=0)
    assert len(d.timings) == 6 and len(d.measured) == 6
    assert d.timings[C.identity(d.winner)][0] == min(t[0] for t in d.timings.values())
    again = _run(rng, search="model", budget=6, seed=0)          # same seed, warm cache
    assert sorted(again.timings) == sorted(d.timings) and again.measured == []


def test_model_search_without_optuna_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "optuna", None)
    with pytest.raises(mutile.LaunchError, match=r"mutile\[tune\]"):
        search.make("model", SPACE.configs(), 3)
