"""The tuner's disk cache, in the mutile cache directory (``MUTILE_CACHE_DIR``), written
and read through :mod:`mutile.runtime.cache` (atomic writes, checksums: a corrupt or
truncated entry is a miss, and two processes writing the same entry are safe).

A **measurement** entry is keyed per (kernel source, tuning key, backend, machine-file
hash on Pinghu, how it was timed, config identity): adding a config to the list measures
only that one. A **decision** entry is keyed per (the same, with the identities of every
config considered and the search) and names the winner. Both record the compiled kernel's
dependencies (its ``@jit`` callees' sources, the globals it read) and are used only while
they still hold, so editing the kernel or a callee re-tunes."""
from __future__ import annotations

from ..runtime import cache
from .measure import Result

VERSION = 1


def scope(tuner, key: tuple, backend: str) -> tuple:
    """What every entry of one tuning shares: the kernel's source hash, the key, the
    backend, the machine file's hash (Pinghu) and how it is timed."""
    machine = None
    if backend == "pinghu":
        from .. import machines
        machine = machines.current().hash
    timer = (None if tuner.do_bench is None else
             f"{tuner.do_bench.__module__}.{getattr(tuner.do_bench, '__qualname__', '?')}")
    if backend != "pinghu" or timer is not None:
        timer = (timer, tuner.num_warmups, tuner.num_reps)
    return (VERSION, tuner.source_key(), repr(key), backend, machine, timer)


def _measure_key(scope_: tuple, ident: str) -> str:
    return cache.make_key("autotune-measure", scope_, ident)


def _decision_key(scope_: tuple, idents: list, search: str) -> str:
    return cache.make_key("autotune-decision", scope_, tuple(idents), search)


def load_measure(scope_: tuple, ident: str) -> Result | None:
    entry = cache.load(_measure_key(scope_, ident))
    if not isinstance(entry, dict) or entry.get("ident") != ident:
        return None
    if not cache.deps_hold(entry.get("deps", ())):
        return None
    timing, reason = entry.get("timing"), entry.get("reason")
    if not (isinstance(timing, list) and len(timing) == 3):
        return None
    return Result(list(timing), reason, tuple(entry["deps"]), cached=True)


def store_measure(scope_: tuple, ident: str, r: Result) -> None:
    cache.store(_measure_key(scope_, ident), {"ident": ident, "timing": list(r.timing),
                                               "reason": r.reason, "deps": tuple(r.deps)})


def load_decision(scope_: tuple, idents: list, search: str) -> dict | None:
    entry = cache.load(_decision_key(scope_, idents, search))
    if not isinstance(entry, dict) or entry.get("winner") not in idents:
        return None
    if not cache.deps_hold(entry.get("deps", ())):
        return None
    return entry


def store_decision(scope_: tuple, idents: list, search: str, winner: str, deps: tuple,
                   measured: list) -> None:
    cache.store(_decision_key(scope_, idents, search),
                {"winner": winner, "deps": tuple(deps), "measured": list(measured)})


__all__ = ["load_decision", "load_measure", "scope", "store_decision", "store_measure"]
