"""``triton.runtime`` under :func:`mutile.as_triton`: the names published host code takes
from it (``driver``, ``Config``, ``JITFunction``, ``KernelInterface``, ``Heuristics``,
``Autotuner``, ``autotune``, ``heuristics``, ``OutOfResources``)."""
from __future__ import annotations

from ..errors import MutileError
from ..runtime import jit  # noqa: F401  (triton.runtime.jit)
from ..runtime.jit import Config, JITFunction, KernelInterface
from . import autotuner
from .autotuner import Autotuner, Heuristics, autotune, heuristics
from .driver import driver

__path__: list = []     # a package to the import system: triton.x imports reach the finder


class OutOfResources(MutileError):
    """Triton's error for a config that needs more shared memory or registers than the
    device has. mutile reports those as ``CompilationError``; this class exists so that
    ``except OutOfResources`` clauses of published code import."""


__all__ = ["Autotuner", "Config", "Heuristics", "JITFunction", "KernelInterface",
           "OutOfResources", "autotune", "autotuner", "driver", "heuristics", "jit"]
