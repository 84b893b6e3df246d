"""Replaying a captured graph on the pinghu backend: the launches back to back on the
interpreter, each marked as a node of the graph, so that under ``mutile.profile()`` the
cycle model charges the launch overhead once per graph (``graph_launch_overhead_us``,
then ``graph_node_overhead_us`` between its kernels: :mod:`.machine.timing.session`).
A fault in launch ``r`` is raised as the launch raises it, with ``graph_index = r``."""
from __future__ import annotations

from .machine.timing import session


class GraphPlan:
    """The captured launches of one graph (kernels, argument lists, grids)."""

    def __init__(self, kernels, args, grids, num_threads=None, overlap=False, stored=None):
        self.kernels = list(kernels)
        self.args = [list(a) for a in args]
        self.grids = [tuple(g) for g in grids]

    def set_arg(self, i: int, position: int, value) -> None:
        self.args[i][position] = value

    def replay(self) -> None:
        try:
            for r, (k, a, g) in enumerate(zip(self.kernels, self.args, self.grids)):
                session.graph_node(r)
                try:
                    k.run(a, g)
                except Exception as e:
                    e.graph_index = r
                    raise
        finally:
            session.graph_node(None)
