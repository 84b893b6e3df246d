"""The pass registry: ``@register("cse")`` enters a pass in :data:`PASSES`. The pass files
import this module and :mod:`mutile.passes` imports the pass files, so nothing circles."""
from __future__ import annotations

from typing import Callable

from ..ir import Module

Pass = Callable[[Module], Module]

PASSES: dict[str, Pass] = {}


def register(name: str) -> Callable[[Pass], Pass]:
    """Decorator: make ``fn`` the pass called ``name`` (its file and CLI flag name)."""
    def deco(fn: Pass) -> Pass:
        assert name not in PASSES, f"pass {name!r} registered twice"
        PASSES[name] = fn
        return fn
    return deco
