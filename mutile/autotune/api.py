"""``@mutile.autotune``: Triton's decorator and its ``Autotuner``, tuned on the cycle
model's modelled time on Pinghu and on wall time on llvm, with a per-config disk cache.

    @mutile.autotune(configs=[mutile.Config({"BLOCK": 64}, num_warps=4), ...], key=["n"])
    @mutile.jit
    def kernel(X, Y, n, BLOCK: ml.constexpr): ...
    kernel[lambda meta: (mutile.cdiv(n, meta["BLOCK"]),)](x, y, n)   # tunes once per key

The first launch for a new tuning key (the ``key`` arguments' values and every argument's
dtype) measures the configs (after ``prune_configs_by``) and launches the fastest; later
launches with that key reuse it (``kernel.cache``). ``kernel.best_config``,
``kernel.configs_timings`` and ``kernel.bench_time`` describe the last tuning and
``kernel.tuning_log`` every decision. Beyond Triton: ``configs`` may be a
:class:`~mutile.autotune.config.ConfigSpace` searched with ``search``/``budget``/``seed``;
``check`` compares each config's outputs with the first's; ``executor``/``workers``
measure in other processes; ``configs_file`` loads decisions exported by ``mutile tune``.
"""
from __future__ import annotations

import os
import time

from ..errors import LaunchError, MutileError
from ..runtime.jit import Config, KernelInterface, default_backend
from . import config as C
from . import executor as X
from . import report, rounds, search, store
from .measure import (QUANTILES, ResetRestore, check_outputs, conflicts, run_config,
                      trial_call)
from .progress import Progress
from .search import SEARCHES

PARALLEL_MIN = 4        # the default pool is used from this many configs to measure on
CONFIRM = 5             # wall times: at most this many of the fastest configs are timed
CONFIRM_SPAN = 1.3      # again (those within this factor of the best), side by side in
CONFIRM_REPS = 4        # interleaved rounds for this many times ``rep`` ms each


def _no_hook(*args, **kwargs):
    return None


def _base_jit(fn):
    while fn is not None and not getattr(fn, "__mutile_jit__", False):
        fn = getattr(fn, "fn", None)
    return fn


class Autotuner(KernelInterface):
    """A kernel that picks, per tuning key, the fastest of its configs (Triton's
    ``Autotuner``, same constructor); see the module's text for the attributes."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero=None, restore_value=None,
                 pre_hook=None, post_hook=None, prune_configs_by=None, warmup=None, rep=None,
                 use_cuda_graph=False, do_bench=None, cache_results=None, *,
                 search="exhaustive", budget=None, seed=0, check=None, executor=None,
                 workers=None, configs_file=None):
        self.fn, self.arg_names = fn, list(arg_names or getattr(fn, "arg_names", []))
        self.space = configs if isinstance(configs, C.ConfigSpace) else None
        configs = list(configs.configs() if self.space is not None else configs or [])
        if not configs:
            configs = [Config({}, num_warps=4, num_stages=3, num_ctas=1)]
        bad = [c for c in configs if not isinstance(c, Config)]
        if bad:
            raise LaunchError(f"autotune configs must be mutile.Config objects (or one "
                              f"mutile.ConfigSpace), got {bad[0]!r}")
        self.configs = configs
        self.keys = list(key or [])
        missing = [k for k in self.keys if self.arg_names and k not in self.arg_names]
        if missing:
            raise LaunchError(f"autotune key: {', '.join(map(repr, missing))} is not a "
                              f"parameter of {getattr(fn, '__name__', fn)} "
                              f"({', '.join(self.arg_names)})")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self._reset = ResetRestore(self.reset_to_zero, self.restore_value)
        default = bool(self.reset_to_zero or self.restore_value)
        self.pre_hook = pre_hook or (self._reset.pre if default else _no_hook)
        self.post_hook = post_hook or (self._reset.post if default else _no_hook)
        prune = dict(prune_configs_by or {})
        unknown = set(prune) - {"perf_model", "top_k", "early_config_prune"}
        if unknown:
            raise LaunchError(f"prune_configs_by: unknown entries {sorted(unknown)} (use "
                              "perf_model, top_k, early_config_prune)")
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 1.0)
        self.early_config_prune = prune.get("early_config_prune")
        self.num_warmups = 25 if warmup is None else warmup
        self.num_reps = 100 if rep is None else rep
        self.use_cuda_graph, self.do_bench = use_cuda_graph, do_bench
        self.cache_results = cache_results
        if search not in SEARCHES:
            raise LaunchError(f"autotune search={search!r}: use {', '.join(SEARCHES)}")
        self.search, self.budget, self.seed, self.check = search, budget, seed, check
        self.executor, self.workers = executor, workers
        self.configs_file = configs_file
        self._file_decisions = report.load(configs_file) if configs_file else {}
        self.cache: dict = {}               # Triton's: tuning key -> Config
        self._chosen: dict = {}             # (tuning key, backend) -> Config
        self.best_config, self.configs_timings, self.bench_time = None, {}, 0.0
        self.tuning_log: list = []
        self.nargs = None
        base = _base_jit(fn)
        self.base_fn = base
        src = getattr(base, "fn", None)
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(src, "__module__", None)
        self.__qualname__ = getattr(src, "__qualname__", self.__name__)

    def __repr__(self):
        return f"Autotuner({len(self.configs)} configs of {self.fn!r})"

    # ------------------------------------------------------------ identities
    identity = staticmethod(C.identity)

    def all_configs(self) -> list:
        return list(self.configs)

    def source_key(self) -> str:
        """The kernel's source hash (its file's content; callees are checked per entry)."""
        return self.base_fn.cache_key if self.base_fn is not None else repr(self.fn)

    def tuning_key(self, nargs: dict, kwargs: dict) -> tuple:
        """Triton's key: the ``key`` arguments' values, then every argument's dtype."""
        all_args = {**nargs, **kwargs}
        args = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [args[k] for k in self.keys if k in args]
        key += [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]
        return tuple(key)

    # ------------------------------------------------------------ pruning
    def prune_configs(self, kwargs: dict, nargs: dict | None = None) -> list:
        nargs = self.nargs if nargs is None else nargs
        pruned = self.configs
        if self.early_config_prune:
            pruned = list(self.early_config_prune(self.configs, nargs, **kwargs))
        if self.perf_model:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = int(len(self.configs) * top_k)
            elif not isinstance(top_k, int):
                raise LaunchError(f"prune_configs_by top_k must be an int or a float <= 1, "
                                  f"got {top_k!r}")
            if len(pruned) > top_k:
                est = {i: self.perf_model(**nargs, **kwargs, **c.all_kwargs())
                       for i, c in enumerate(pruned)}
                pruned = [pruned[i] for i in sorted(est, key=est.get)[:max(top_k, 1)]]
        if not pruned:
            raise LaunchError(f"{self.__name__}: prune_configs_by left no config to try")
        return pruned

    # ------------------------------------------------------------ launch
    def run(self, *args, grid=None, warmup=False, **kwargs):
        if warmup:
            self.nargs = dict(zip(self.arg_names, args))
            out = [self.fn.run(*args, grid=grid, warmup=True, **kwargs, **c.all_kwargs())
                   for c in self.prune_configs(kwargs)]
            self.nargs = None
            return out
        self.nargs = nargs = dict(zip(self.arg_names, args))
        backend = kwargs.get("backend") or default_backend()
        if len(self.configs) > 1:
            key = self.tuning_key(nargs, kwargs)
            config = self._chosen.get((key, backend))
            if config is None:
                config = self._decide(args, kwargs, grid, key, backend)
                self._chosen[key, backend] = self.cache[key] = config
        else:
            config = self.configs[0]
        self.best_config = config
        full = {**nargs, **kwargs, **config.all_kwargs()}
        if config.pre_hook is not None:
            config.pre_hook(full)
        try:
            return self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    def _decide(self, args, kwargs, grid, key, backend) -> Config:
        got = self._file_decisions.get((self.__qualname__, C.key_text(key), backend))
        if got is not None:
            config = C.from_dict(got, self.configs)
            self._log(report.Decision(self.__qualname__, key, backend, config,
                                      source="configs_file",
                                      configs={C.identity(config): config}))
            return config
        decision = self.tune(args, kwargs, grid, key, backend)
        nargs = dict(zip(self.arg_names, args))
        self.pre_hook({**nargs, **kwargs, **decision.winner.all_kwargs()}, reset_only=True)
        return decision.winner

    def _log(self, d: report.Decision) -> None:
        self.tuning_log.append(d)
        report.record(d)
        if os.environ.get("MUTILE_PRINT_AUTOTUNING", "").strip() == "1":
            print(d.line(), flush=True)

    def _use_cache(self, backend: str) -> bool:
        if self.cache_results is not None:
            return bool(self.cache_results)
        return backend == "pinghu" and self.do_bench is None

    # ------------------------------------------------------------ tuning
    def tune(self, args, kwargs, grid, key, backend) -> report.Decision:
        """Measure the configs for one key (from the disk cache where it has them) and
        return the :class:`~mutile.autotune.report.Decision`."""
        start = time.perf_counter()
        nargs = dict(zip(self.arg_names, args))
        pruned = self.prune_configs(kwargs, nargs)
        for c in pruned:
            conflicts(kwargs, c)
        by_id = {C.identity(c): c for c in pruned}
        d = report.Decision(self.__qualname__, key, backend, None, configs=dict(by_id))
        use_cache = self._use_cache(backend) and self.check is None
        scope = store.scope(self, key, backend) if use_cache else None
        results = self._from_decision(scope, list(by_id)) if use_cache else None
        if results is not None:
            d.source = "disk cache"
        else:
            results = self._search(args, kwargs, grid, backend, pruned, scope, d)
        for ident, r in results.items():
            d.timings[ident] = list(r.timing)
            if r.reason:
                d.reasons[ident] = r.reason
            (d.cached if r.cached else d.measured).append(ident)
        ok = [i for i, r in results.items() if not r.failed]
        if not ok:
            lines = "\n".join(f"  {C.short(by_id[i])}: {results[i].reason or 'no time'}"
                              for i in results)
            raise LaunchError(f"autotune {self.__name__}: every config failed (key {key}, "
                              f"backend {backend}):\n{lines}")
        winner = min(ok, key=lambda i: results[i].timing)
        d.winner, d.seconds = by_id[winner], time.perf_counter() - start
        if scope is not None and d.source != "disk cache":
            store.store_decision(scope, list(by_id), self._search_name(), winner,
                                 results[winner].deps, list(results))
        self.configs_timings = {by_id[i]: list(r.timing) for i, r in results.items()}
        self.bench_time = d.seconds
        self._log(d)
        return d

    def _search_name(self) -> str:
        return f"{self.search}:{self.budget}:{self.seed}"

    def _from_decision(self, scope, idents):
        hit = store.load_decision(scope, idents, self._search_name())
        if hit is None:
            return None
        results = {}
        for ident in hit["measured"]:
            r = store.load_measure(scope, ident)
            if r is None or ident not in idents:
                return None
            results[ident] = r
        return results

    def _search(self, args, kwargs, grid, backend, pruned, scope, d) -> dict:
        plan = search.make(self.search, pruned, self.budget, self.seed, C.identity)
        parallel = self._parallel(pruned, d)
        size = (self.workers or X.default_workers()) if parallel else 1
        results: dict = {}
        total = search.budget_count(self.budget, len(pruned)) \
            if self.search != "exhaustive" else len(pruned)
        with Progress(self.__name__, total) as bar:
            while True:
                batch = plan.next_batch(len(pruned) if self.search != "model" else size)
                if not batch:
                    break
                todo = []
                for c in batch:
                    ident = C.identity(c)
                    r = store.load_measure(scope, ident) if scope is not None else None
                    if r is not None:
                        results[ident] = r
                        bar.update(r.ms, cached=True)
                    else:
                        todo.append(c)
                new = self._measure(args, kwargs, grid, backend, todo, parallel, bar)
                if self.check is not None:
                    check_outputs({**results, **new}, [C.identity(c) for c in pruned],
                                  self.check)
                for ident, r in new.items():
                    r.outputs = None
                    if scope is not None:
                        store.store_measure(scope, ident, r)
                results.update(new)
                plan.tell({i: results[i] for i in map(C.identity, batch)})
        if backend != "pinghu" and self.do_bench is None:
            self._confirm(args, kwargs, grid, backend, pruned, results, scope, d)
        return results

    def _confirm(self, args, kwargs, grid, backend, pruned, results, scope, d) -> None:
        """Wall times are noisy: the fastest configs measured now (at most CONFIRM, those
        within CONFIRM_SPAN of the best) are timed again side by side in interleaved
        rounds (:mod:`.rounds`), ``CONFIRM_REPS * rep`` ms each, and keep those times."""
        by_id = {C.identity(c): c for c in pruned}
        fresh = [i for i, r in results.items() if not r.cached and not r.failed]
        if not fresh:
            return
        best = min(results[i].ms for i in fresh)
        top = [i for i in sorted(fresh, key=lambda i: results[i].timing)
               if results[i].ms <= CONFIRM_SPAN * best][:CONFIRM]
        if len(top) < 2:
            return
        calls = {i: trial_call(self, args, kwargs, by_id[i], grid)[0] for i in top}
        try:
            samples = rounds.interleaved(calls, CONFIRM_REPS * self.num_reps * len(top))
        except MutileError as e:        # a config that ran once failing now: keep pass one
            d.notes.append(f"re-timing the fastest configs failed ({e}); first-pass times kept")
            return
        d.notes.append(f"re-timed side by side in {len(samples[top[0]])} interleaved rounds: "
                       + ", ".join(C.short(by_id[i]) for i in top))
        for ident in top:
            r = results[ident]
            r.timing = rounds.quantiles(samples[ident], QUANTILES)
            r.extra = {**r.extra, "rounds": len(samples[ident])}
            if scope is not None:
                store.store_measure(scope, ident, r)

    def _parallel(self, pruned, d) -> bool:
        if self.executor is None and self.workers is not None and self.workers <= 1:
            return False
        if self.executor is None and self.workers is None and (
                len(pruned) < PARALLEL_MIN or X.default_workers() <= 1):
            return False
        if not X.rebuildable(self):
            d.notes.append("measured serially: the kernel is not a module-level name of an "
                           "importable module, so a worker process cannot rebuild it")
            return False
        return True

    def _grid_for(self, grid, args, kwargs, config):
        if not callable(grid):
            return grid
        return grid({**dict(zip(self.arg_names, args)), **kwargs, **config.all_kwargs()})

    def _measure(self, args, kwargs, grid, backend, todo, parallel, bar) -> dict:
        want = self.check is not None
        if not parallel or not todo:
            out = {}
            for c in todo:
                out[C.identity(c)] = r = run_config(self, args, kwargs, c, grid, backend, want)
                bar.update(r.ms)
            return out
        pool = self.executor or X.pool(self.workers or X.default_workers())
        compile_only = backend != "pinghu"      # wall times are taken here, one at a time
        tasks = [X.task(self, args, kwargs, C.identity(c), self._grid_for(grid, args, kwargs, c),
                        backend, want, compile_only) for c in todo]
        with X.own_pool_submits(pool):
            futures = [(c, pool.submit(X.run_task, t)) for c, t in zip(todo, tasks)]
        done = [(c, f.result()) for c, f in futures]   # every compile ends before timing
        out = {}
        for c, r in done:
            if compile_only and not r.failed:
                r = run_config(self, args, kwargs, c, grid, backend, want)
            out[C.identity(c)] = r
            bar.update(r.ms)
        return out


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None,
             pre_hook=None, post_hook=None, warmup=None, rep=None, use_cuda_graph=False,
             do_bench=None, cache_results=None, *, search="exhaustive", budget=None, seed=0,
             check=None, executor=None, workers=None, configs_file=None):
    """Decorator (Triton's ``@autotune``) above ``@jit`` or ``@heuristics``.

    ``configs``: a list of :class:`~mutile.Config` or a :class:`~mutile.ConfigSpace`;
    ``key``: argument names whose values (with every argument's dtype) form the tuning key;
    ``prune_configs_by``: ``{"perf_model", "top_k", "early_config_prune"}``;
    ``reset_to_zero``/``restore_value``: argument names zeroed before / restored after each
    trial run; ``pre_hook``/``post_hook(nargs, exception)`` replace those; ``warmup``/``rep``:
    llvm timing in ms; ``do_bench``: your own timer; ``cache_results``: keep measurements and
    decisions on disk (default: on for pinghu, off for llvm wall times); ``search``:
    "exhaustive", "random" or "model" (Optuna TPE) with ``budget`` (a count or a fraction)
    and ``seed``; ``check``: a tolerance (or ``{"rtol", "atol"}``) every config's outputs
    must meet against the first's; ``executor``: a ``concurrent.futures.Executor`` to
    measure in; ``workers``: the size of the default process pool (1: serial);
    ``configs_file``: decisions exported by ``mutile tune --export``."""
    def decorator(fn):
        if not hasattr(fn, "arg_names") or not hasattr(fn, "run"):
            raise LaunchError(f"@autotune must decorate a @jit function (or a @heuristics "
                              f"one), got {fn!r}: put @autotune above @jit")
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value,
                         pre_hook=pre_hook, post_hook=post_hook,
                         prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench,
                         cache_results=cache_results, search=search, budget=budget, seed=seed,
                         check=check, executor=executor, workers=workers,
                         configs_file=configs_file)
    return decorator


__all__ = ["Autotuner", "autotune"]
