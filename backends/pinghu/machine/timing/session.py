"""The profiling sessions in force: the backend's launcher asks :func:`active` whether
to run a launch under the cycle model, and hands the :class:`~.record.LaunchRecord` to
the session (:mod:`mutile.profiler` opens them; nothing here imports it).

A replayed graph (``mutile.Graph``) marks each of its launches with :func:`graph_node`;
:func:`launch_overhead_cycles` then charges the machine file's
``graph_launch_overhead_us`` before the graph's first launch and
``graph_node_overhead_us`` before each later one, instead of ``launch_overhead_us``
before every launch."""
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


def graph_node(position):
    """Mark the launches that follow as node ``position`` of a replayed graph (None: not
    in a graph)."""
    _local.graph_node = position


def current_graph_node():
    """The graph position of the launch being modelled, or None."""
    return getattr(_local, "graph_node", None)


def launch_overhead_cycles(t) -> float:
    """The launch overhead, in cycles of ``t`` (a :class:`~.params.Timing`), charged before
    the launch being modelled (see the module docstring)."""
    node = current_graph_node()
    if node is None:
        return t.launch_overhead
    name = "graph_launch_overhead_us" if node == 0 else "graph_node_overhead_us"
    return float(t.file.value("device", name)) * 1e-6 * t.clock_hz
