"""The profiling sessions in force: the backend's launcher asks :func:`active` whether
to run a launch under the cycle model, and hands the :class:`~.record.LaunchRecord` to
the session (:mod:`mutile.profiler` opens them; nothing here imports it)."""
from __future__ import annotations

import threading

_local = threading.local()


def _stack() -> list:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def push(session) -> None:
    """Make ``session`` (an object with ``machine``, ``sample`` and ``add(record)``) the
    innermost session of this thread."""
    _stack().append(session)


def pop(session) -> None:
    s = _stack()
    if s and s[-1] is session:
        s.pop()
    elif session in s:
        s.remove(session)


def active():
    """The innermost profiling session of this thread, or None."""
    s = _stack()
    return s[-1] if s else None
