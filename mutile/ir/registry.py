"""A registry of op lowerings, the pattern both backends use: ``@lowers("add", "sub")``
records a function as the lowering of the named tile-IR ops in the backend's table."""
from __future__ import annotations


def registry() -> tuple[dict, object]:
    """A fresh table (op name -> function) and its ``lowers(*names)`` decorator."""
    table: dict = {}

    def lowers(*names):
        """Register the decorated function as the lowering of the named IR ops."""
        def deco(fn):
            for n in names:
                table[n] = fn
            return fn
        return deco

    return table, lowers
