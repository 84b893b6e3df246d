"""Which :class:`mutile.Graph` is capturing on this thread (a leaf module: the launch path
asks it on every launch, and :mod:`.graph` sets it)."""
from __future__ import annotations

import threading

_local = threading.local()


def capturing():
    """The :class:`Graph` capturing on this thread, or None."""
    return getattr(_local, "graph", None)


def set_capturing(graph) -> None:
    """Make ``graph`` (or None) this thread's capturing graph."""
    _local.graph = graph
