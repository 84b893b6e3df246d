"""``@mutile.jit``: specialize on launch arguments, compile (with caches), launch.

``kernel[grid](*args, **meta)`` binds the arguments, picks the specialization
(constexpr values, the IR type of every runtime argument, options), finds or builds the
compiled kernel, checks the grid and the arrays, and runs it. ``kernel.warmup(...)``
compiles without running and returns the :class:`CompiledKernel`, whose ``asm`` holds
every stage's text.
"""
from __future__ import annotations

import inspect
import os
import numpy as np

from ..errors import CompilationError, DeviceFault, LaunchError, MutileError
from ..ir import types as T
from . import cache, coredump
from .kernel import Launcher, trimmed
from .specialize import closure_key, constexpr_value, runtime_type

OPTION_NAMES = ("num_warps", "num_stages", "backend", "check_bounds", "num_threads",
                "version_masks", "num_ctas", "maxnreg", "sanitize", "vectorize", "wmma",
                "async_lowering", "warp_specialize")
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}


def default_backend() -> str:
    return os.environ.get("MUTILE_BACKEND", "llvm")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0", "false", "False")


def _check_bounds(given) -> bool:
    """Bounds checking is on unless ``check_bounds=False`` or ``MUTILE_CHECK_BOUNDS=0``
    (an explicit launch option wins over the environment)."""
    if given is not None:
        return bool(given)
    env = os.environ.get("MUTILE_CHECK_BOUNDS", "").strip().lower()
    return env not in ("0", "false", "off", "no")


class JITFunction:
    """A function compiled for the tile machine when launched (``@mutile.jit``)."""
    __mutile_jit__ = True

    def __init__(self, fn, do_not_specialize=(), debug=None, **_ignored):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__qualname__ = fn.__qualname__
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters)
        from ..language.core import constexpr
        self.constexprs = {p for p, par in self.signature.parameters.items()
                           if par.annotation is constexpr or par.annotation == "constexpr"
                           or getattr(par.annotation, "__name__", "") == "constexpr"
                           or str(par.annotation).endswith("constexpr")}
        self.cache: dict = {}

    def __repr__(self):
        return f"JITFunction({self.__module__}:{self.__qualname__})"

    def __call__(self, *args, **kwargs):
        raise CompilationError(f"@jit function {self.fn.__name__} cannot be called directly; "
                               f"launch it as {self.fn.__name__}[grid](...) or call it from "
                               "another @jit function")

    def __getitem__(self, grid):
        return Launcher(self, grid)

    # ------------------------------------------------------------ binding
    def bind(self, args, kwargs):
        options = dict(DEFAULT_OPTIONS)
        for k in OPTION_NAMES:
            if k in kwargs and k not in self.params:
                options[k] = kwargs.pop(k)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise LaunchError(f"{self.fn.__name__}({', '.join(self.params)}): {e}") from None
        bound.apply_defaults()
        options.setdefault("backend", default_backend())
        options["check_bounds"] = _check_bounds(options.get("check_bounds"))
        options["sanitize"] = bool(options.get("sanitize")) or _env_flag("MUTILE_SANITIZE")
        return dict(bound.arguments), options

    def specialize(self, bound: dict) -> dict:
        """Parameter -> constexpr value or IR type; and, for a kernel defined inside a
        function, ``"<closure>"`` -> the values it reads from there (:func:`closure_key`)."""
        spec = {}
        for p in self.params:
            v = bound[p]
            spec[p] = constexpr_value(p, v) if p in self.constexprs else runtime_type(p, v)
        closure = closure_key(self.fn) if self.fn.__closure__ else ()
        if closure:
            spec["<closure>"] = closure
        return spec

    # ------------------------------------------------------------ compile
    def warmup(self, *args, grid=None, **kwargs) -> CompiledKernel:
        """Compile for these arguments (arrays or IR types) without launching."""
        __tracebackhide__ = True
        try:
            bound, options = self.bind(args, kwargs)
            return self._get(self.specialize(bound), options)[0]
        except MutileError as e:
            raise trimmed(e) from None

    def _get(self, spec, options):
        # the value's type too: constexpr 2 and 2.0 are equal but specialize apart
        mem_key = (tuple((p, type(v).__name__, _freeze(v)) for p, v in spec.items()),
                   tuple(sorted((k, repr(v)) for k, v in options.items() if k != "num_threads")),
                   _override_state())
        k = self.cache.get(mem_key)
        if k is not None and cache.deps_hold(k.deps):
            return k, True
        from .compile import build
        k = build(self, spec, options)
        self.cache[mem_key] = k
        return k, False

    # ------------------------------------------------------------ launch
    def run(self, *args, grid, _compiled=None, **kwargs):
        bound, options = self.bind(args, kwargs)
        spec = self.specialize(bound)
        g = _check_grid(grid(dict(bound)) if callable(grid) else grid)   # before compiling
        if _compiled is not None:
            for p in self.params:
                if p in self.constexprs and spec[p] != _compiled.spec[p]:
                    raise LaunchError(f"argument '{p}': the kernel was compiled for "
                                      f"{p}={_compiled.spec[p]!r}, got {spec[p]!r}")
            for p in _compiled.runtime_params:
                if spec[p] != _compiled.spec[p]:
                    raise LaunchError(f"argument '{p}': the kernel was compiled for "
                                      f"{_compiled.spec[p]}, got {spec[p]}")
            k = _compiled
        else:
            k = self._get(spec, options)[0]
        try:
            k.launch(g, bound, options.get("num_threads"))
        except DeviceFault as e:
            coredump.write_if_asked(e, lambda: coredump.launch_record(self, g, bound, options))
            raise
        return k


def _check_grid(g) -> tuple:
    if isinstance(g, int):
        g = (g,)
    if not isinstance(g, (tuple, list)) or not 1 <= len(g) <= 3:
        raise LaunchError(f"grid must be a tuple of 1 to 3 positive integers, got {g!r}")
    out = []
    for i, x in enumerate(g):
        x = getattr(x, "value", x)
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise LaunchError(f"grid[{i}] must be an integer, got {x!r}")
        x = int(x)
        if x <= 0:
            raise LaunchError(f"grid[{i}] must be positive, got {x}")
        out.append(x)
    return tuple(out) + (1,) * (3 - len(out))


def _override_state():
    """None, or the ``MUTILE_OVERRIDE_DIR`` folder and the content hash of each edited
    listing in it: an edit to a listing compiles again at the next launch."""
    folder = os.environ.get("MUTILE_OVERRIDE_DIR")
    if not folder:
        return None
    import hashlib
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".musa"))
    except OSError:
        return folder, ()
    state = []
    for n in names:
        try:
            with open(os.path.join(folder, n), "rb") as f:
                state.append((n, hashlib.sha256(f.read()).hexdigest()))
        except OSError:
            state.append((n, None))
    return folder, tuple(state)


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def jit(fn=None, **options):
    """Decorator: ``@mutile.jit`` or ``@mutile.jit(do_not_specialize=...)``."""
    if fn is None:
        return lambda f: JITFunction(f, **options)
    return JITFunction(fn, **options)


class Config:
    """A set of meta-parameters and options for one launch (Triton's ``Config``)."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
                 pre_hook=None, warp_specialize=False):
        self.kwargs = dict(kwargs)
        self.num_warps, self.num_stages, self.num_ctas = num_warps, num_stages, num_ctas
        self.maxnreg, self.pre_hook = maxnreg, pre_hook
        self.warp_specialize = warp_specialize      # Pinghu: TME producer warp + consumers

    def all_kwargs(self) -> dict:
        out = {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.warp_specialize:
            out["warp_specialize"] = True
        return out

    def __repr__(self):
        kw = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({kw}, num_warps: {self.num_warps}, num_stages: {self.num_stages})"


__all__ = ["JITFunction", "CompiledKernel", "Config", "jit"]
