"""The ``triton`` module that :func:`mutile.as_triton` installs: mutile's objects under
the names of Triton's top-level API. ``__version__`` is the Triton API level mutile
implements (published code branches on it)."""
from __future__ import annotations

from .. import language, testing
from ..errors import CompilationError, MutileError
from ..runtime.host import cdiv, heuristics, next_power_of_2
from ..runtime.jit import Config, JITFunction, KernelInterface, jit
from . import runtime, tools
from .autotuner import autotune
from .runtime import OutOfResources

__version__ = "3.4.0"

__path__: list = []     # a package to the import system: triton.x imports reach the finder
TritonError = MutileError

__all__ = ["CompilationError", "Config", "JITFunction", "KernelInterface", "OutOfResources",
           "TritonError", "autotune", "cdiv", "heuristics", "jit", "language",
           "next_power_of_2", "runtime", "testing", "tools"]
