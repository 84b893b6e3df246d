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
import re
import textwrap

import numpy as np

from ..errors import CompilationError, DeviceFault, LaunchError, MutileError
from ..ir import types as T
from . import cache, coredump, graph
from .kernel import CompiledKernel, Launcher, trimmed
from .launch_plan import KernelCache, Plan, find_plan, plan_allowed, signature_key
from .specialize import closure_key, constexpr_value, runtime_type
from .torch_arrays import is_torch_tensor

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


class KernelInterface:
    """What launch code written for Triton expects of a kernel object (Triton's
    ``KernelInterface``): ``kernel[grid](*args, **kwargs)`` calls ``run(*args, grid=grid,
    warmup=False, **kwargs)`` and ``kernel.warmup(*args, grid=..., **kwargs)`` calls it with
    ``warmup=True``. :class:`JITFunction` and :class:`~mutile.runtime.host.Heuristics` are
    subclasses; so are wrappers such as FlagGems' ``LibEntry``, which implement ``run``."""

    def run(self, *args, grid, warmup, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement run(*args, grid, "
                                  "warmup, **kwargs)")

    def __getitem__(self, grid):
        return GridCall(self, grid)

    def warmup(self, *args, grid=None, **kwargs):
        """Compile for these arguments without launching (``run(..., warmup=True)``)."""
        __tracebackhide__ = True
        try:
            return self.run(*args, grid=grid, warmup=True, **kwargs)
        except MutileError as e:
            raise trimmed(e) from None


class GridCall:
    """``kernel[grid]`` of a :class:`KernelInterface`: calling it runs the kernel; a mutile
    error it raises ends at the caller's line, not in the runtime's frames."""
    __slots__ = ("kernel", "grid")

    def __init__(self, kernel, grid):
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        try:
            return self.kernel.run(*args, grid=self.grid, warmup=False, **kwargs)
        except MutileError as e:
            raise trimmed(e) from None


def _is_constexpr_annotation(annotation) -> bool:
    """``ml.constexpr``, ``tl.constexpr`` or their names as strings (``from __future__
    import annotations`` turns every annotation into its source text, quotes included)."""
    from ..language.core import constexpr
    return (annotation is constexpr or getattr(annotation, "__name__", "") == "constexpr"
            or (isinstance(annotation, str)
                and annotation.strip().strip("'\"").endswith("constexpr")))


class KernelParam(str):
    """One parameter of a ``@jit`` function as Triton's ``kernel.params`` lists it. It *is*
    the parameter's name (a ``str``, so it indexes everything keyed by name) and carries
    ``num`` (its position), ``is_constexpr``, ``do_not_specialize``,
    ``do_not_specialize_on_alignment``, ``annotation``, ``default`` and ``has_default``."""

    def __new__(cls, num: int, param: inspect.Parameter, do_not_specialize=False,
                do_not_specialize_on_alignment=False):
        self = super().__new__(cls, param.name)
        self.num, self._param = num, param
        self.is_constexpr = _is_constexpr_annotation(param.annotation)
        self.do_not_specialize = bool(do_not_specialize)
        self.do_not_specialize_on_alignment = bool(do_not_specialize_on_alignment)
        return self

    def __reduce__(self):
        return (KernelParam, (self.num, self._param, self.do_not_specialize,
                              self.do_not_specialize_on_alignment))

    @property
    def name(self) -> str:
        return str(self)

    @property
    def annotation(self) -> str:
        """Triton's spelling: "constexpr", "" when unannotated, else the annotation's text."""
        a = self._param.annotation
        if self.is_constexpr:
            return "constexpr"
        if a is inspect.Parameter.empty:
            return ""
        return a if isinstance(a, str) else getattr(a, "__name__", str(a))

    is_const = False

    @property
    def default(self):
        return self._param.default

    @property
    def has_default(self) -> bool:
        return self._param.default is not inspect.Parameter.empty


def _param_set(spec, names, what) -> set:
    """The parameter names picked by ``spec`` (indices or names), checked."""
    out = set()
    for x in spec or ():
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            if not 0 <= x < len(names):
                raise LaunchError(f"{what}: index {x} is not a parameter (there are "
                                  f"{len(names)})")
            out.add(names[x])
        elif x in names:
            out.add(x)
        else:
            raise LaunchError(f"{what}: '{x}' is not a parameter ({', '.join(names)})")
    return out


class JITFunction(KernelInterface):
    """A function compiled for the tile machine when launched (``@mutile.jit``).

    Triton's attributes: ``fn``, ``src`` (the source from ``def`` on), ``arg_names``,
    ``params`` (:class:`KernelParam`), ``constexprs`` (the positions of the constexpr
    parameters), ``signature``, ``cache_key``, ``__name__``; ``run(*args, grid, warmup)``.
    """
    __mutile_jit__ = True

    def __init__(self, fn, version=None, do_not_specialize=None,
                 do_not_specialize_on_alignment=None, debug=None, noinline=None, repr=None,
                 launch_metadata=None, **_ignored):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__qualname__ = fn.__qualname__
        self.__globals__ = fn.__globals__
        self.module, self.version = fn.__module__, version
        self.debug, self.noinline, self.launch_metadata = debug, noinline, launch_metadata
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        what = f"@jit({fn.__name__})"
        dns = _param_set(do_not_specialize, self.arg_names, f"{what} do_not_specialize")
        dnsa = _param_set(do_not_specialize_on_alignment, self.arg_names,
                          f"{what} do_not_specialize_on_alignment")
        self.do_not_specialize = list(do_not_specialize or ())
        self.do_not_specialize_on_alignment = list(do_not_specialize_on_alignment or ())
        self.params = [KernelParam(i, par, par.name in dns, par.name in dnsa)
                       for i, par in enumerate(self.signature.parameters.values())]
        self.constexprs = [p.num for p in self.params if p.is_constexpr]
        # the names of the parameters compiled as constants (the runtime's own view)
        self.constexpr_names = frozenset(p.name for p in self.params if p.is_constexpr)
        self.cache = KernelCache()
        self._plans: dict = {}          # call signature -> Plan (see .launch_plan)
        self._compiling: set = set()    # specialization keys being compiled (any thread)

    @property
    def constexpr_names(self) -> frozenset:
        """The names of the parameters compiled as constants (the runtime's own view)."""
        return self._constexpr_names

    @constexpr_names.setter
    def constexpr_names(self, names) -> None:
        self._constexpr_names = frozenset(names)
        self.runtime_names = frozenset(self.arg_names) - self._constexpr_names

    @property
    def src(self) -> str:
        """The function's source from its ``def`` line on (decorators dropped), dedented."""
        text = textwrap.dedent("".join(inspect.getsourcelines(self.fn)[0]))
        m = re.search(r"^(async\s+)?def\s", text, re.MULTILINE)
        return text[m.start():] if m else text

    @property
    def starting_line_number(self) -> int:
        return inspect.getsourcelines(self.fn)[1]

    @property
    def cache_key(self) -> str:
        """A hash that changes when the kernel's source may have (see ``cache.source_hash``)."""
        return cache.source_hash(self.fn)

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
        from ..language.core import constexpr
        options = dict(DEFAULT_OPTIONS)
        for k in OPTION_NAMES:
            if k in kwargs and k not in self.arg_names:
                options[k] = kwargs.pop(k)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise LaunchError(f"{self.fn.__name__}({', '.join(self.arg_names)}): {e}") from None
        bound.apply_defaults()
        out = dict(bound.arguments)
        for p, v in out.items():        # ml.constexpr(3) for a runtime parameter: the value 3
            if isinstance(v, constexpr) and p not in self.constexpr_names:
                out[p] = v.value
        for k in ("num_warps", "num_stages"):
            options[k] = getattr(options[k], "value", options[k])
        options.setdefault("backend", default_backend())
        options["check_bounds"] = _check_bounds(options.get("check_bounds"))
        options["sanitize"] = bool(options.get("sanitize")) or _env_flag("MUTILE_SANITIZE")
        return out, options

    def _bind_compiled(self, compiled, args, kwargs):
        """The arguments of ``compiled[grid](...)``: all of them, or (Triton's compiled-kernel
        form) only the runtime ones, the constexprs being those it was compiled for."""
        runtime = compiled.runtime_params
        if (len(args) == len(runtime) < len(self.arg_names)
                and not kwargs.keys() & set(self.arg_names)):
            full = {p: compiled.spec[p] for p in self.arg_names if p not in runtime}
            full.update(zip(map(str, runtime), args))
            return self.bind((), {**full, **kwargs})
        return self.bind(args, kwargs)

    def specialize(self, bound: dict) -> dict:
        """Parameter -> constexpr value or IR type; and, for a kernel defined inside a
        function, ``"<closure>"`` -> the values it reads from there (:func:`closure_key`)."""
        spec = {}
        for p in self.arg_names:
            v = bound[p]
            if p in self.constexpr_names:
                spec[p] = constexpr_value(p, v)
                continue
            try:
                spec[p] = runtime_type(p, v)
            except LaunchError as e:
                if not is_torch_tensor(v):
                    raise
                raise LaunchError(f"argument '{p}': {e}") from None    # a tensor's dtype/device
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
        if mem_key in self._compiling and graph.capturing() is not None:
            raise graph.still_compiling(self)
        from .compile import build
        self._compiling.add(mem_key)
        try:
            k = build(self, spec, options)
        finally:
            self._compiling.discard(mem_key)
        self.cache[mem_key] = k
        return k, False

    # ------------------------------------------------------------ launch
    def run(self, *args, grid=None, warmup=False, _compiled=None, **kwargs):
        """Launch over ``grid`` (a tuple, or a function of the bound arguments) and return
        the :class:`CompiledKernel`; with ``warmup=True`` compile only (Triton's ``run``)."""
        if warmup:
            bound, options = self.bind(args, kwargs)
            return self._get(self.specialize(bound), options)[0]
        if grid is None:
            raise LaunchError(f"{self.fn.__name__}: a launch needs a grid, as in "
                              f"{self.fn.__name__}[grid](...)")
        key = None
        if _compiled is None and graph.capturing() is None and plan_allowed(self):
            plan = find_plan(self, args, kwargs)
            if plan is not None:
                return self._run_plan(plan, grid, args, kwargs)
            key = signature_key(self.runtime_names, args, self.arg_names, kwargs)
        kw = dict(kwargs) if key is not None else kwargs
        if _compiled is not None:
            bound, options = self._bind_compiled(_compiled, args, kwargs)
        else:
            bound, options = self.bind(args, kwargs)
        spec = self.specialize(bound)
        g = _check_grid(grid(dict(bound)) if callable(grid) else grid)   # before compiling
        if _compiled is not None:
            for p in self.arg_names:       # constexprs, runtime types and None arguments
                was, now = _compiled.spec[p], spec[p]
                if now == was:
                    continue
                if isinstance(was, T.Type) and isinstance(now, T.Type):
                    raise LaunchError(f"argument '{p}': the kernel was compiled for {was}, "
                                      f"got {now}")
                raise LaunchError(f"argument '{p}': the kernel was compiled for {p}={was!r}, "
                                  f"got {now!r}")
            k = _compiled
        else:
            k = self._get(spec, options)[0]
        capture = graph.capturing()
        if capture is not None:
            capture.record(self, k, g, bound, options)
            return k
        try:
            k.launch(g, bound, options.get("num_threads"))
        except DeviceFault as e:
            coredump.write_if_asked(e, lambda: coredump.launch_record(self, g, bound, options))
            raise
        if key is not None:
            self._plans[key] = Plan(self, k, args, kw, options)
        return k

    def _run_plan(self, plan, grid, args, kwargs):
        """The launch of a call whose signature has a plan (:mod:`.launch_plan`)."""
        k = plan.kernel
        if callable(grid):
            bound, _ = self.bind(args, dict(kwargs))
            grid = grid(bound)
        g = _check_grid(grid)
        values = plan.values(args, kwargs)
        try:
            if plan.go is not None:
                plan.go(values, g)
            else:
                k.binary.run(values, g, None, plan.num_threads)
        except DeviceFault as e:
            bound, options = self.bind(args, dict(kwargs))
            coredump.write_if_asked(e, lambda: coredump.launch_record(self, g, bound, options))
            raise
        return k


def _check_grid(g) -> tuple:
    if type(g) is tuple:                 # the common grids, checked without a generator
        n = len(g)
        if n == 1:
            x = g[0]
            if type(x) is int and x > 0:
                return x, 1, 1
        elif n == 2:
            x, y = g
            if type(x) is int and type(y) is int and x > 0 and y > 0:
                return x, y, 1
        elif n == 3:
            x, y, z = g
            if type(x) is int and type(y) is int and type(z) is int and x > 0 and y > 0 \
                    and z > 0:
                return g
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
    """Decorator: ``@mutile.jit`` or ``@mutile.jit(do_not_specialize=..., debug=...)``
    (Triton's keywords: ``version``, ``repr``, ``launch_metadata``, ``do_not_specialize``,
    ``do_not_specialize_on_alignment``, ``debug``, ``noinline``)."""
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


__all__ = ["JITFunction", "KernelInterface", "KernelParam", "CompiledKernel", "Config", "jit"]
