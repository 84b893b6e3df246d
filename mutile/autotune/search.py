"""Which configs to measure: ``search="exhaustive"`` (all of them), ``"random"`` (``budget``
of them, drawn with ``seed``) or ``"model"`` (``budget`` of them chosen by Optuna's TPE
sampler, from the ``[tune]`` extra, which learns from the times measured so far).

A search hands out batches (as many configs as there are workers) and is told each batch's
times before it picks the next. ``budget`` is a number of configs or, as a float in
(0, 1], a fraction of the space."""
from __future__ import annotations

import math

import numpy as np

from ..errors import LaunchError
from .config import OPTION_FIELDS

SEARCHES = ("exhaustive", "random", "model")
PENALTY = 1e30          # what a config that failed (or the space excludes) tells the model


def budget_count(budget, n: int) -> int:
    """The number of configs a ``budget`` allows out of ``n``."""
    if budget is None:
        return n
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0:
        raise LaunchError(f"autotune budget must be a positive number of configs or a "
                          f"fraction in (0, 1], got {budget!r}")
    if isinstance(budget, float) and budget <= 1.0:
        return max(1, min(n, math.ceil(budget * n)))
    return max(1, min(n, int(budget)))


def make(search: str, configs: list, budget=None, seed: int = 0, ident=None):
    """The search object for ``configs`` (``ident``: config -> identity text)."""
    if search not in SEARCHES:
        raise LaunchError(f"autotune search={search!r}: use one of {', '.join(SEARCHES)}")
    n = budget_count(budget, len(configs)) if search != "exhaustive" else len(configs)
    if search == "exhaustive" or n >= len(configs):
        return Fixed(list(configs))
    if search == "random":
        pick = np.random.default_rng(seed).choice(len(configs), size=n, replace=False)
        return Fixed([configs[i] for i in sorted(pick)])
    return Model(configs, n, seed, ident or repr)


class Fixed:
    """A list decided up front, handed out in batches."""

    def __init__(self, configs: list):
        self.todo = list(configs)

    def next_batch(self, size: int) -> list:
        batch, self.todo = self.todo[:size], self.todo[size:]
        return batch

    def tell(self, results: dict) -> None:
        pass


def _point(config) -> dict:
    out = {f"kw:{k}": v for k, v in config.kwargs.items()}
    out.update({f: getattr(config, f, None) for f in OPTION_FIELDS})
    return out


class Model:
    """Optuna TPE over the axes of the configs (every meta-parameter and option, each a
    categorical of the values the configs take); a combination no config has tells the
    sampler a penalty and costs no budget."""

    def __init__(self, configs: list, budget: int, seed: int, ident):
        try:
            import optuna
        except ImportError:
            raise LaunchError("autotune search='model' needs Optuna: pip install "
                              "'mutile[tune]' (or pip install optuna)") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna, self.ident, self.budget = optuna, ident, budget
        self.configs = list(configs)
        points = [_point(c) for c in self.configs]
        names = sorted({k for p in points for k in p})
        self.axes = {k: list(dict.fromkeys(repr(p.get(k)) for p in points)) for k in names}
        self.by_point = {}
        for c, p in zip(self.configs, points):
            self.by_point.setdefault(tuple(repr(p.get(k)) for k in names), c)
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(2, budget // 3))
        self.study = optuna.create_study(sampler=sampler, direction="minimize")
        self.rng = np.random.default_rng(seed)
        self.known: dict = {}           # identity -> ms
        self.pending: list = []         # (trial, identity)
        self.handed = 0

    def _ask(self):
        trial = self.study.ask()
        values = tuple(self.axes[k][trial.suggest_int(k, 0, len(self.axes[k]) - 1)]
                       for k in self.axes)
        return trial, self.by_point.get(values)

    def next_batch(self, size: int) -> list:
        size = min(size, self.budget - self.handed)
        batch, chosen = [], set()
        tries = 0
        while len(batch) < size and tries < 50 * self.budget:
            tries += 1
            trial, config = self._ask()
            if config is None:
                self.study.tell(trial, PENALTY)
                continue
            ident = self.ident(config)
            if ident in self.known:
                self.study.tell(trial, self.known[ident])
                continue
            if ident in chosen:
                self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
                continue
            chosen.add(ident)
            batch.append(config)
            self.pending.append((trial, ident))
        rest = [c for c in self.configs if self.ident(c) not in self.known
                and self.ident(c) not in chosen]
        while len(batch) < size and rest:     # the sampler kept repeating itself
            batch.append(rest.pop(int(self.rng.integers(len(rest)))))
        self.handed += len(batch)
        return batch

    def tell(self, results: dict) -> None:
        for ident, r in results.items():
            self.known[ident] = r.ms if math.isfinite(r.ms) else PENALTY
        for trial, ident in self.pending:
            self.study.tell(trial, self.known.get(ident, PENALTY))
        self.pending = []


__all__ = ["SEARCHES", "budget_count", "make"]
