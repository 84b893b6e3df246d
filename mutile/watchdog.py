"""The watchdog's limit, shared by both backends: ``MUTILE_WATCHDOG`` seconds.

A launch running longer than this is stopped and reported (where each program or warp
was); ``0`` turns the limit off. The pinghu interpreter also stops, at once, a launch whose
machine state no longer changes; native code cannot show that, so on llvm the limit is
the launch's wall time. A bottom-layer module: it imports only :mod:`mutile.errors` and :mod:`mutile.environ`.
"""
from __future__ import annotations

import os

from . import environ
from .errors import LaunchError

WATCHDOG_ENV = "MUTILE_WATCHDOG"
WATCHDOG_DEFAULT = 600.0


def watchdog_seconds() -> float:
    """Seconds a launch may run (``MUTILE_WATCHDOG``, default 600; 0: no limit)."""
    raw = os.environ.get(WATCHDOG_ENV, "").strip()
    try:
        value = float(raw) if raw else WATCHDOG_DEFAULT
    except ValueError:
        value = None
    if value is None or value != value or value < 0:
        raise LaunchError(f"{WATCHDOG_ENV}={raw!r}: expected a number of seconds "
                          "(0 turns the watchdog off)")
    return value


_KEY = environ.key(WATCHDOG_ENV)
_PARSED: dict = {}              # the variable's raw value -> its seconds


def watchdog_seconds_now() -> float:
    """:func:`watchdog_seconds` at launch speed: parsed once per value of the variable."""
    raw = environ.get(_KEY)
    limit = _PARSED.get(raw)
    if limit is None:
        limit = watchdog_seconds()
        if len(_PARSED) < 64:
            _PARSED[raw] = limit
    return limit
