"""Host-side helpers of launch code written for Triton: ``cdiv``, ``next_power_of_2`` and
``@heuristics``, which computes meta-parameters from the bound arguments at each launch.

    @mutile.heuristics({"BLOCK": lambda args: mutile.next_power_of_2(args["n"])})
    @mutile.jit
    def kernel(X, n, BLOCK: ml.constexpr): ...
    kernel[(1,)](x, x.size)                 # BLOCK computed from n

Heuristics stack: each adds its values to the launch's keyword arguments and passes them
down, so an inner one sees what the outer ones computed (as in Triton); under an
``@autotune`` the chosen config's values reach them as keyword arguments.
"""
from __future__ import annotations

from ..errors import LaunchError, MutileError
from .jit import KernelInterface


def cdiv(x: int, y: int) -> int:
    """Ceiling division of integers (host side)."""
    return -(-x // y)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _where(fn) -> str:
    code = getattr(fn, "__code__", None)
    return f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""


class Heuristics(KernelInterface):
    """A kernel whose meta-parameters ``values`` (name -> function of the arguments dict)
    are computed at each launch (Triton's ``Heuristics``). The dict a function receives
    holds the positional arguments by name and every keyword argument of the launch."""

    def __init__(self, fn, arg_names, values):
        self.fn, self.arg_names, self.values = fn, list(arg_names), dict(values)
        self.__name__ = getattr(fn, "__name__", type(self).__name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __repr__(self):
        return f"Heuristics({', '.join(self.values)} of {self.fn!r})"

    def run(self, *args, **kwargs):
        for name, heur in self.values.items():
            try:
                kwargs[name] = heur({**dict(zip(self.arg_names, args)), **kwargs})
            except MutileError:
                raise
            except Exception as e:
                raise LaunchError(f"{self.__name__}: the heuristic for '{name}'{_where(heur)} "
                                  f"raised {type(e).__name__}: {e}") from e
        return self.fn.run(*args, **kwargs)


def heuristics(values: dict):
    """Decorator: ``@heuristics({"BLOCK": lambda args: ...})`` above ``@jit`` (or above
    another ``@heuristics``); each function takes the dict of the launch's arguments."""
    if not isinstance(values, dict) or not all(isinstance(k, str) and callable(v)
                                               for k, v in values.items()):
        raise LaunchError("heuristics(values): values must be a dict of meta-parameter name "
                          "-> function of the arguments dict")

    def decorator(fn):
        if not hasattr(fn, "arg_names") or not hasattr(fn, "run"):
            raise LaunchError(f"@heuristics must decorate a @jit function (or another "
                              f"@heuristics), got {fn!r}: put @heuristics above @jit")
        return Heuristics(fn, fn.arg_names, values)

    return decorator


__all__ = ["Heuristics", "cdiv", "heuristics", "next_power_of_2"]
