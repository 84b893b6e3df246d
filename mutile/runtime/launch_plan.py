"""The steady-state launch: a binding plan cached per call signature.

The first launch of a kernel with some call signature takes the full path (bind through
``inspect``, specialize every argument, find the compiled kernel). It leaves a
:class:`Plan`: where each runtime argument comes from (a position, a keyword or the
default), the compiled kernel, its options. The next launch with the same *signature*
(:func:`signature_key`) only reads its arguments out of ``args``/``kwargs`` and
re-checks what can change between calls with the same signature:

* the key holds what decides the specialization: the number of positional arguments,
  the keyword names, per runtime argument its Python type and, for an array, its dtype
  (hence the pointer type), for an int whether it fits i32 (else the kernel takes i64),
  every constexpr and launch option by type and value, and the environment switches
  that change compilation (``MUTILE_BACKEND``, ``MUTILE_CHECK_BOUNDS``,
  ``MUTILE_SANITIZE``); a value of any other kind (tensors, descriptors, address
  tables, wrapped constants) never gets a plan and always takes the full path;
* at each launch: the kernel's dependencies still hold (globals it read, callees'
  sources: ``cache.deps_hold``), the kernel cache was not changed since the plan was made,
  arrays the kernel stores to are writeable, the grid is valid, and the backend
  re-derives each array's address and extent (bounds checks) from the array itself.

Kernels defined inside functions (closures) and runs with ``MUTILE_OVERRIDE_DIR`` set
always take the full path: what they depend on is read afresh each time.
"""
from __future__ import annotations

from itertools import chain

import numpy as np

from .. import environ
from ..errors import LaunchError
from ..ir import types as T
from .cache import deps_hold

ENV_SWITCHES = ("MUTILE_BACKEND", "MUTILE_CHECK_BOUNDS", "MUTILE_SANITIZE")
_I32_LO, _I32_HI = -2 ** 31, 2 ** 31
_ENV_KEYS = tuple(environ.key(n) for n in ENV_SWITCHES)
_OVERRIDE_KEY = environ.key("MUTILE_OVERRIDE_DIR")
_env_get = environ.get

class KernelCache(dict):
    """``JITFunction.cache`` (specialization key -> CompiledKernel) whose ``generation``
    moves on at every change, so a plan made before a change is never used after it."""
    generation = 0

    def _moved(self):
        self.generation += 1

    def __setitem__(self, key, value):
        self._moved()
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self._moved()
        super().__delitem__(key)

    def clear(self):
        self._moved()
        super().clear()

    def pop(self, *a):
        self._moved()
        return super().pop(*a)

    def popitem(self):
        self._moved()
        return super().popitem()

    def update(self, *a, **kw):
        self._moved()
        super().update(*a, **kw)

    def setdefault(self, key, default=None):
        self._moved()
        return super().setdefault(key, default)


_SCALARS = frozenset((int, float, bool, str))


def signature_key(runtime_names, args, names, kwargs):
    """The plan key of a call (None: this call takes the full path). Per argument, its
    name and Python type, and: an array's dtype; for an int, only whether it fits i32
    (else no plan: the kernel would take i64); for a constexpr or an option, its value."""
    key = [len(args)]
    append = key.append
    for name, v in chain(zip(names, args), kwargs.items()):
        tp = type(v)
        if name in runtime_names:
            if tp is np.ndarray:
                v = v.dtype
            elif tp is int:
                if not _I32_LO <= v < _I32_HI:
                    return None
                v = None
            elif tp is float or v is None:
                v = None
            else:
                return None
        elif tp not in _SCALARS and v is not None:
            return None
        append(name)
        append(tp)
        append(v)
    for name in _ENV_KEYS:
        append(_env_get(name))
    return tuple(key)


class Plan:
    """Where a call with one signature finds each runtime argument, and what to launch."""
    __slots__ = ("kernel", "generation", "sources", "stored", "num_threads", "names", "go")

    def __init__(self, jitfn, kernel, args, kwargs, options):
        self.kernel, self.generation = kernel, jitfn.cache.generation
        pos = {name: i for i, name in enumerate(jitfn.arg_names[:len(args)])}
        defaults = {p.name: p.default for p in jitfn.params}
        sources = []                # (position, keyword or None, default)
        for p in kernel.runtime_params:
            if p in pos:
                sources.append((pos[p], None, None))
            elif p in kwargs:
                sources.append((-1, p, None))
            else:
                sources.append((-2, None, defaults[p]))
        self.sources = tuple(sources)
        self.stored = tuple(i for i, p in enumerate(kernel.runtime_params)
                            if i in kernel.stored and isinstance(kernel.spec[p], T.PointerType))
        self.num_threads = options.get("num_threads")
        self.names = tuple(kernel.runtime_params)
        make = getattr(kernel.binary, "runner", None)   # the backend's steady-state launcher
        self.go = make(self.num_threads) if make is not None else None

    def values(self, args, kwargs) -> list:
        """The backend's argument list of this call (runtime parameters, in order)."""
        out = []
        for i, kw, default in self.sources:
            out.append(args[i] if i >= 0 else kwargs[kw] if kw is not None else default)
        for i in self.stored:
            if not out[i].flags.writeable:
                raise LaunchError(f"argument '{self.names[i]}' is read-only but the kernel "
                                  "stores to it")
        return out


def plan_allowed(jitfn) -> bool:
    """Whether launches of ``jitfn`` may use plans (see the module docstring)."""
    return not jitfn.fn.__closure__ and not _env_get(_OVERRIDE_KEY)


def find_plan(jitfn, args, kwargs):
    """The plan of this call of ``jitfn`` if it has one that still holds, else None."""
    if not plan_allowed(jitfn):
        return None
    names = jitfn.runtime_names
    key = signature_key(names, args, jitfn.arg_names, kwargs)
    plan = jitfn._plans.get(key) if key is not None else None
    if plan is None or plan.generation != jitfn.cache.generation:
        return None
    deps = plan.kernel.deps
    if deps and not deps_hold(deps):
        return None
    return plan
