"""``triton.runtime.autotuner`` under :func:`mutile.as_triton`: ``Config``, ``Heuristics``
and ``heuristics`` are mutile's; ``autotune`` and ``Autotuner`` are not implemented yet
(issue 13, autotuning) and say so when used. ``Autotuner`` exists as a class so code that
subclasses it or tests ``isinstance`` against it (FlagGems' ``LibTuner``, ``LibEntry``)
still imports."""
from __future__ import annotations

from ..errors import MutileError
from ..runtime.host import Heuristics, heuristics
from ..runtime.jit import Config, KernelInterface

AUTOTUNE_ISSUE = 13


class NotImplementedYet(MutileError, NotImplementedError):
    """A Triton API that mutile has planned but does not implement yet."""


def _not_yet(what: str) -> NotImplementedYet:
    return NotImplementedYet(
        f"mutile does not implement {what} yet (issue {AUTOTUNE_ISSUE}: autotuning); "
        "remove the @triton.autotune decorator and pass one config's meta-parameters "
        "(and num_warps/num_stages) at launch instead")


class Autotuner(KernelInterface):
    """Triton's autotuner; making one raises :class:`NotImplementedYet`."""

    def __init__(self, *args, **kwargs):
        raise _not_yet("triton.runtime.Autotuner")

    def run(self, *args, **kwargs):     # pragma: no cover - no instance can exist
        raise _not_yet("triton.runtime.Autotuner")


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None,
             pre_hook=None, post_hook=None, warmup=None, rep=None, use_cuda_graph=False,
             do_bench=None, cache_results=False):
    """Triton's ``@autotune(configs, key, ...)``: raises :class:`NotImplementedYet`."""
    raise _not_yet("@triton.autotune")


__all__ = ["Autotuner", "Config", "Heuristics", "NotImplementedYet", "autotune", "heuristics"]
