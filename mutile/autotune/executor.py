"""Measuring configs in other processes: any ``concurrent.futures.Executor`` (a process
pool of at most two workers by default, or one the user passes, such as a Dask
``client.get_executor()``).

A task carries no kernel object: it names the tuner by module and qualified name, and the
worker imports that module (by name, else from its file) and finds the same tuner and
the config by identity, so the kernel is rebuilt there from its source. The launch's
arguments and the grid (evaluated for the config here) travel by pickle, and so does the
:class:`~mutile.autotune.measure.Result` coming back. The mutile switches of this process
(cache directory, machine file, backend...) are set in the worker for each task."""
from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import os
import sys
import types

import numpy as np

from ..placement import allocation_offset
from ..runtime import cache
from .measure import failure

_POOLS: dict = {}
_PASSED_ENV_PREFIX = "MUTILE_"


def default_workers() -> int:
    """``MUTILE_TUNE_WORKERS`` if set, else min(2, the number of cores)."""
    env = os.environ.get("MUTILE_TUNE_WORKERS", "").strip()
    if env.isdigit():
        return max(1, int(env))
    return max(1, min(2, os.cpu_count() or 1))


def pool(workers: int):
    """A process pool of ``workers`` spawned processes, made once and reused."""
    p = _POOLS.get(workers)
    if p is None:
        import concurrent.futures
        import multiprocessing
        p = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        _POOLS[workers] = p
    return p


@contextlib.contextmanager
def own_pool_submits(executor):
    """While submitting to one of our spawned pools, a fresh worker must not import the
    user's ``__main__`` script again (spawn's rule, which would rerun an unguarded script):
    it sees an empty ``__main__`` instead. Other executors are left alone."""
    if executor not in _POOLS.values():
        yield
        return
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@atexit.register
def _shutdown():
    for p in _POOLS.values():
        p.shutdown(wait=False, cancel_futures=True)
    _POOLS.clear()


def where(tuner) -> str | None:
    """The module-level name through which a worker finds this tuner (the tuner itself, or
    a @heuristics around it), or None: not in an importable module (``__main__``: a
    script's top level would run again), or in no module-level name."""
    module = tuner.__module__
    mod = sys.modules.get(module) if module not in (None, "__main__") else None
    if mod is None:
        return None
    names = [tuner.__qualname__] + [n for n in vars(mod) if n != tuner.__qualname__]
    for name in names:
        if "<locals>" not in name and any(o is tuner for o in _chain(getattr(mod, name, None))):
            return name
    return None


def rebuildable(tuner) -> bool:
    return where(tuner) is not None


def _chain(obj):
    """``obj`` and the kernels it wraps (``.fn`` of @heuristics and @autotune)."""
    seen = 0
    while obj is not None and seen < 16:
        yield obj
        obj, seen = getattr(obj, "fn", None), seen + 1


def task(tuner, args, kwargs, ident, grid, backend, want_outputs, compile_only) -> dict:
    """The picklable description of one measurement."""
    mod = sys.modules.get(tuner.__module__)
    return {"module": tuner.__module__, "file": getattr(mod, "__file__", None),
            "qualname": where(tuner), "args": tuple(args),
            "align": [_offset(a) for a in args], "kwargs": dict(kwargs),
            "ident": ident, "grid": grid, "backend": backend, "want_outputs": want_outputs,
            "compile_only": compile_only, "sys_path": list(sys.path),
            "env": {k: v for k, v in os.environ.items() if k.startswith(_PASSED_ENV_PREFIX)}}


def _offset(a):
    """Where ``a``'s memory starts in the allocation it views, modulo 4096 (the Pinghu
    model's memory places an array by that offset, so an access's alignment, and so its
    modelled time, depends on it), or None."""
    if not isinstance(a, np.ndarray) or a.size == 0 or not a.flags.c_contiguous:
        return None
    return allocation_offset(a) & 0xFFF


def _placed(a, offset):
    """A copy of ``a`` that starts ``offset`` bytes into a fresh allocation, as it did in
    the tuning process, so a worker's modelled times are those the tuning process would
    measure."""
    if offset is None or not isinstance(a, np.ndarray) or _offset(a) == offset:
        return a
    raw = np.empty(offset + a.nbytes, np.uint8)
    out = raw[offset:].view(a.dtype).reshape(a.shape)
    out[...] = a
    out.flags.writeable = a.flags.writeable
    return out


def _import(module: str, file: str | None):
    if module in sys.modules:
        return sys.modules[module]
    try:
        return importlib.import_module(module)
    except ImportError:
        if not file:
            raise
    spec = importlib.util.spec_from_file_location(module, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(module, None)
        raise
    return mod


def _set_env(env: dict) -> None:
    for k in [k for k in os.environ if k.startswith(_PASSED_ENV_PREFIX) and k not in env]:
        del os.environ[k]
    os.environ.update(env)


def run_task(t: dict):
    """In the worker: find the tuner and the config, measure, return the Result."""
    from .measure import run_config
    _set_env(t["env"])
    for p in reversed(t["sys_path"]):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        mod = _import(t["module"], t["file"])
    except Exception as e:
        return failure(f"the worker could not import {t['module']}: {type(e).__name__}: {e}")
    tuner = next((o for o in _chain(cache.resolve_function(t["module"], t["qualname"]))
                  if hasattr(o, "all_configs")), None)
    configs = {}
    for c in getattr(tuner, "all_configs", lambda: [])():
        configs.setdefault(tuner.identity(c), c)
    config = configs.get(t["ident"])
    if config is None:
        return failure(f"the worker found no config {t['ident']} in "
                       f"{mod.__name__}.{t['qualname']}")
    args = tuple(_placed(a, off) for a, off in zip(t["args"], t["align"]))
    return run_config(tuner, args, t["kwargs"], config, t["grid"], t["backend"],
                      t["want_outputs"], t["compile_only"])


__all__ = ["default_workers", "own_pool_submits", "pool", "rebuildable", "run_task", "task"]
