"""``triton.runtime.autotuner`` under :func:`mutile.as_triton`: ``Config``, ``Heuristics``,
``heuristics``, ``autotune`` and ``Autotuner`` are mutile's own (``mutile.autotune``), so
published kernels with ``@triton.autotune`` run unchanged and code that subclasses
``Autotuner`` (FlagGems' ``LibTuner``) gets the real one."""
from __future__ import annotations

from ..autotune.api import Autotuner, autotune
from ..runtime.host import Heuristics, heuristics
from ..runtime.jit import Config

__all__ = ["Autotuner", "Config", "Heuristics", "autotune", "heuristics"]
