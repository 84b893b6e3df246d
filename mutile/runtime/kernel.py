"""What ``kernel.warmup(...)`` returns and ``kernel[grid]`` calls: :class:`CompiledKernel`
(one specialization, its stage texts, its launch-time argument checks) and :class:`Launcher`.
Imported by :mod:`.jit` and :mod:`.compile`; imports neither."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import LaunchError, MutileError
from ..ir import types as T
from .address_table import is_address_table
from .capture import capturing as _capturing
from .launch_plan import find_plan
from .specialize import as_array


class AsmTexts(Mapping):
    """Every stage's text: the IR stages (``ir``, then one per pass) and the backend's
    (``llir``, ``asm``...), the latter produced only when read."""

    def __init__(self, stages: dict, backend_texts):
        self._stages, self._backend = stages, backend_texts

    def __getitem__(self, key):
        if key in self._stages:
            return self._stages[key]
        return self._backend[key]

    def __iter__(self):
        yield from self._stages
        yield from self._backend

    def __len__(self):
        return len(self._stages) + len(self._backend)


class KernelMetadata(dict):
    """``kernel.metadata``: what the compile recorded (a dict), also readable as attributes
    under Triton's names for what published host code reads: ``.shared`` (shared-memory
    bytes per block; 0 on the llvm backend, which has none), ``.num_warps``,
    ``.num_stages``, ``.name``."""
    _TRITON_NAMES = {"shared": "shared_bytes"}

    def __getattr__(self, name):
        key = self._TRITON_NAMES.get(name, name)
        if key in self:
            return self[key]
        if name == "shared":
            return 0
        raise AttributeError(f"kernel metadata has no {name!r}; it has {', '.join(self)}")


class CompiledKernel:
    """One compiled specialization: ``asm`` (stage name -> text), ``metadata``, and
    ``kernel[grid](*args)`` to launch it with arguments of the same specialization.
    ``n_regs`` / ``n_spills`` (registers per thread, registers spilled to local memory) and
    ``_init_handles()`` are there for Triton host code that sizes its grid from them; on
    the llvm backend, which has no register file to report, both counts are 0."""

    def __init__(self, jitfn, params, spec, options, binary, asm, metadata, stored, deps):
        self.jitfn, self.params, self.spec, self.options = jitfn, params, spec, options
        self.binary, self.metadata = binary, KernelMetadata(metadata)
        self.asm = AsmTexts(asm, binary.asm)
        self.stored, self.deps = stored, deps
        self.runtime_params = [p for p in params if isinstance(spec[p], T.Type) and p not in
                               jitfn.constexpr_names]

    def __getitem__(self, grid):
        return Launcher(self.jitfn, grid, self)

    @property
    def n_regs(self) -> int:
        return int(self.metadata.get("registers_per_thread", 0))

    @property
    def n_spills(self) -> int:
        return int(self.metadata.get("local_bytes", 0)) // 4

    def _init_handles(self) -> None:
        """Triton loads the binary onto the device here; a mutile kernel is ready already."""

    def launch(self, grid: tuple, bound: dict, num_threads=None):
        self.binary.run(self.backend_args(bound), grid, None, num_threads)

    def backend_args(self, bound: dict) -> list:
        """The backend's argument list for ``bound`` (parameter -> value), checked against
        this specialization: dtypes, descriptor types, writeability, scalar ranges."""
        args = []
        for p in self.runtime_params:
            v, t = bound[p], self.spec[p]
            i = len(args)                       # the parameter's index in the kernel
            if isinstance(t, T.DescType):
                if getattr(v, "type", None) != t:
                    raise LaunchError(f"argument '{p}': the kernel was compiled for a "
                                      f"TensorDescriptor of {t}, got {v!r}")
                if i in self.stored and not v.base.flags.writeable:
                    raise LaunchError(f"argument '{p}' is read-only but the kernel stores to it")
                args += v.launch_args()
                continue
            if t.is_ptr() and is_address_table(v):     # the backend needs its members
                if t.element_ty != T.i64:
                    raise LaunchError(f"argument '{p}': the kernel was compiled for "
                                      f"{t.element_ty!r} arrays, got an AddressTable (int64)")
                if i in self.stored:
                    raise LaunchError(f"argument '{p}' is an AddressTable, which is read-only, "
                                      "but the kernel stores to it")
                args.append(v)
                continue
            if t.is_ptr():
                arr = as_array(v)
                if arr is None:
                    raise LaunchError(f"argument '{p}' must be an array of {t.element_ty!r}, "
                                      f"got {type(v).__name__}")
                if T.scalar_from_numpy(arr.dtype) != t.element_ty:
                    raise LaunchError(f"argument '{p}': the kernel was compiled for "
                                      f"{t.element_ty!r} arrays, got dtype {arr.dtype}")
                if i in self.stored and not arr.flags.writeable:
                    raise LaunchError(f"argument '{p}' is read-only but the kernel stores to it")
                args.append(arr)
            else:
                args.append(scalar_arg(p, v, t))
        return args


def scalar_arg(name, v, t):
    if isinstance(v, (bool, int, float, np.generic)):
        if t.is_floating():
            return float(v)
        if t.is_bool():
            return int(bool(v))
        iv = int(v)
        if t.kind == "int" and not -2 ** (t.bits - 1) <= iv < 2 ** (t.bits - 1):
            raise LaunchError(f"argument '{name}': {iv} does not fit the compiled type {t!r}")
        return iv
    raise LaunchError(f"argument '{name}' must be a number ({t!r}), got {type(v).__name__}")


def trimmed(e: MutileError) -> MutileError:
    """``e`` without the compiler's frames: raised again from the entry point the user
    called, its traceback ends at the user's line (Triton filters them the same way)."""
    e.__cause__ = e.__context__ = None
    return e.with_traceback(None)


class Launcher:
    """``kernel[grid]``: calling it launches; a mutile error it raises shows the user's
    line and this one frame, not the compiler's."""
    __slots__ = ("jitfn", "grid", "compiled")

    def __init__(self, jitfn, grid, compiled=None):
        self.jitfn, self.grid, self.compiled = jitfn, grid, compiled

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        jitfn = self.jitfn
        try:
            if self.compiled is None and _capturing() is None:    # the steady state
                plan = find_plan(jitfn, args, kwargs)
                if plan is not None:
                    return jitfn._run_plan(plan, self.grid, args, kwargs)
            return jitfn.run(*args, grid=self.grid, _compiled=self.compiled, **kwargs)
        except MutileError as e:
            raise trimmed(e) from None
