"""LLVM (llvmlite) CPU backend for mutile: the tile IR JIT-compiled to native code.

    kernel = compile(module, {"check_bounds": True})
    kernel.run([x, y, n], grid=(64,))         # numpy arrays for pointer parameters
    print(kernel.asm["llir"]); print(kernel.asm["asm"])

``compile(module, options)`` takes a verified :class:`mutile.ir.Module` whose kernel
has had its calls inlined, and returns an :class:`LLVMKernel`. Options:

* ``check_bounds`` (bool; False when this backend is called directly, on by default for
  launches through ``@mutile.jit``): check every global access against the arrays
  passed to the launch; a miss raises :class:`mutile.errors.DeviceFault` naming the op's
  Python line, the parameter, the element index and the length. An affine pointer tile
  is tested once from its extreme addresses; only a tile that may leave its array (a
  masked tail, a real miss) or a gather is checked element by element;
* ``num_threads`` (int, default ``os.cpu_count()``): default threads per launch;
* ``opt_level`` (0-3, default 3);
* ``prefetch`` (bool, default True): loads through a pointer tile that a loop advances
  by a loop-invariant step prefetch the next iteration's cache lines;
* ``version_masks`` (bool, default True): a masked load/store whose mask is a
  conjunction of ``offs < bound``-style tests on affine offsets also gets an unmasked
  copy, taken when a scalar test shows every lane is active.

``serialize(kernel)`` / ``deserialize(data)`` save and restore a compiled kernel
(machine code and launch facts) for the runtime's disk cache.

Where things are: :mod:`.lower` (the walker and the launch ABI), :mod:`.lower_context`
(types, constants, conversions, tile storage, the ``@lowers`` registry),
:mod:`.lower_tiles` (buffers and lazy tiles), :mod:`.lower_sep` (address structure),
``lower_elementwise / _shape / _memory / _desc / _reduce / _dot / _control / _debug``
(one file per op family), :mod:`.engine` (LLVM O3 + MCJIT), :mod:`.launch` (threads,
argument packing, faults).
"""
from __future__ import annotations

from collections.abc import Mapping

from mutile.errors import CompilationError

from .engine import Engine, host_cpu
from .launch import launch, programs_function

__all__ = ["compile", "serialize", "deserialize", "LLVMKernel"]


class LLVMKernel:
    """A compiled kernel: ``.run(args, grid)``, ``.asm`` texts and ``.metadata``."""

    def __init__(self, lowered, engine: Engine, options: dict, unoptimized: str):
        self.lowered_info = {k: getattr(lowered, k) for k in
                             ("entry", "param_names", "param_types", "checks", "frame_bytes",
                              "int_pointers")}
        self.name = lowered.entry[: -len("_programs")]
        self.engine = engine                    # keeps the machine code alive
        self.param_names = lowered.param_names
        self.param_types = lowered.param_types
        self.checks = lowered.checks
        self.frame_bytes = lowered.frame_bytes
        self.int_pointers = lowered.int_pointers
        self.options = options
        self.programs = programs_function(engine.address(lowered.entry))
        self.prints = "@printf" in unoptimized or "@\"printf\"" in unoptimized
        self.asm = _Texts(engine, unoptimized)
        self.metadata = {
            "name": self.name, "entry": lowered.entry, "params": list(self.param_names),
            "check_bounds": bool(options.get("check_bounds", False)),
            "frame_bytes": self.frame_bytes, "num_checks": len(self.checks),
            "cpu": host_cpu()[0],
        }

    def run(self, args, grid, arg_ranges=None, num_threads=None) -> None:
        """Launch over ``grid`` (1-3 sizes); see :func:`launch.launch` for ``args``.

        ``arg_ranges``: optional ``(lo, hi, ...)`` byte range per parameter (None for
        scalars), defaulting to the extent of each array argument."""
        launch(self, list(args), grid, num_threads or self.options.get("num_threads"),
               arg_ranges)

    launch = run

    def runner(self, num_threads=None):
        """The steady-state launcher of this kernel (:mod:`.fast_launch`), or None."""
        from .fast_launch import runner
        return runner(self, num_threads or self.options.get("num_threads"))

    def __repr__(self) -> str:
        return f"<LLVMKernel {self.name} ({', '.join(self.param_names)})>"


class _Texts(Mapping):
    """``{"llir", "asm", "llir_unoptimized"}``; the assembly is emitted when first read."""

    def __init__(self, engine, unoptimized):
        self._engine, self._unopt = engine, unoptimized

    def __getitem__(self, key):
        if key == "llir":
            return self._engine.llir
        if key == "asm":
            return self._engine.asm
        if key == "llir_unoptimized":
            return self._unopt
        raise KeyError(key)

    def __iter__(self):
        return iter(("llir", "asm", "llir_unoptimized"))

    def __len__(self):
        return 3


def compile(module, options: dict | None = None) -> LLVMKernel:
    """Compile ``module``'s kernel for the host CPU (see the module docstring)."""
    from .lower import lower_kernel
    options = dict(options or {})
    func = module.entry
    if any(op.name == "call" for op in func.walk()):
        raise CompilationError("llvm backend: inline calls before compiling", func.loc)
    lowered = lower_kernel(module, options)
    text = str(lowered.llvm_module)
    try:
        engine = Engine(text, opt=int(options.get("opt_level", 3)))
    except RuntimeError as e:     # LLVM rejected what the lowering made: an internal error
        first = str(e).strip().splitlines()
        raise CompilationError(f"llvm backend: internal error compiling kernel "
                               f"'{func.name}': {' '.join(first[:3])}", func.loc) from None
    return LLVMKernel(lowered, engine, options, text)


def serialize(kernel: LLVMKernel) -> bytes:
    """Bytes from which :func:`deserialize` rebuilds ``kernel`` without lowering or
    optimizing again (the optimized LLVM IR plus the launch facts)."""
    import pickle
    return pickle.dumps({"version": 1, "info": kernel.lowered_info, "options": kernel.options,
                         "llir": kernel.asm["llir"], "unoptimized": kernel.asm["llir_unoptimized"],
                         "host": host_cpu(), "object": kernel.engine.object_code})


def deserialize(data: bytes) -> LLVMKernel:
    """The kernel saved by :func:`serialize`: its machine code when saved on this kind of
    host, else its optimized IR compiled again."""
    import pickle
    from types import SimpleNamespace
    d = pickle.loads(data)
    if d.get("version") != 1:
        raise ValueError("unknown serialized llvm kernel version")
    same_host = d.get("host") == host_cpu()
    engine = Engine(d["llir"], optimize=False, object_code=d.get("object") if same_host else None)
    return LLVMKernel(SimpleNamespace(**d["info"]), engine, d["options"], d["unoptimized"])
