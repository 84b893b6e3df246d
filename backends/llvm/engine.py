"""One JIT-compiled LLVM module: its own target machine, O3 for the host CPU, MCJIT.

llvmlite facts this relies on: ``llvm.initialize()`` raises in llvmlite >= 0.45, so
only the native target and asm printer are initialized; each execution engine gets
its OWN target machine (sharing one crashes at teardown); an :class:`Engine` must
outlive every use of its function addresses.

C functions the generated code may call (``printf``, ``fflush``, libm) are resolved
from the running process, registered once with ``llvm.add_symbol``.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import signal
import threading

from llvmlite import binding as llvm

_LOCK = threading.Lock()

_LIBC_SYMBOLS = ("printf", "fflush", "memcpy", "memset", "memmove", "syscall", "sigaction")
_LIBM_SYMBOLS = tuple(f + s for f in ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh",
                                      "erf", "pow", "fmod", "sqrt", "floor", "ceil", "fma",
                                      "expm1", "log1p", "sinh", "cosh", "atan", "atan2")
                      for s in ("", "f"))


@functools.lru_cache(maxsize=None)
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    libs = [ctypes.CDLL(None)]
    libm = ctypes.util.find_library("m")
    if libm:
        libs.append(ctypes.CDLL(libm))
    for name in _LIBC_SYMBOLS + _LIBM_SYMBOLS:
        for lib in libs:
            fn = getattr(lib, name, None)
            if fn is not None:
                llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
                break


@functools.lru_cache(maxsize=None)
def host_cpu() -> tuple[str, str]:
    """(cpu name, feature string) of the machine we run on."""
    _init()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def _target_machine():
    cpu, features = host_cpu()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=features, opt=3,
                                        codemodel="jitdefault", jit=True)


@contextlib.contextmanager
def interrupts_held():
    """Hold Ctrl-C until the block is done, then deliver it. llvmlite calls back into
    Python while it compiles (its object cache); a KeyboardInterrupt raised in such a
    callback is printed and dropped by ctypes, so without this a Ctrl-C during a compile
    is lost and the launch that follows cannot be stopped. Outside the main thread
    (where no signal handler runs) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: got.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if not got:
        return
    if callable(old):             # Python's default handler raises KeyboardInterrupt
        old(signal.SIGINT, got[0])
    elif old == signal.SIG_DFL:
        os.kill(os.getpid(), signal.SIGINT)


class Engine:
    """Compile LLVM IR text at O3 for the host and keep the machine code alive.

    ``.llir``: the optimized LLVM IR; ``.asm``: the native assembly;
    ``address(name)``: a function's entry address.
    """

    def __init__(self, llvm_ir: str, opt: int = 3, optimize: bool = True,
                 object_code: bytes | None = None):
        """Compile ``llvm_ir`` (optimizing it unless ``optimize`` is False); with
        ``object_code`` from an earlier engine (``.object_code``) on the same host, the
        machine code is loaded instead of generated."""
        _init()
        with _LOCK, interrupts_held():
            mod = llvm.parse_assembly(str(llvm_ir))
            mod.verify()
            self.tm = _target_machine()       # one target machine per engine
            mod.triple = self.tm.triple
            mod.data_layout = str(self.tm.target_data)
            pto = llvm.create_pipeline_tuning_options(speed_level=opt)
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            pto.loop_unrolling = True
            if optimize:
                pb = llvm.create_pass_builder(self.tm, pto)
                pb.getModulePassManager().run(mod, pb)
            self.llir = str(mod)
            self.object_code = object_code
            self.ee = llvm.create_mcjit_compiler(mod, self.tm)
            self.ee.set_object_cache(self._notify, lambda _m: object_code)
            self.ee.finalize_object()
        self._asm = None

    @property
    def asm(self) -> str:
        """Native assembly of the optimized module (made on first use)."""
        if self._asm is None:
            with _LOCK:
                mod = llvm.parse_assembly(self.llir)
                self._asm = _target_machine().emit_assembly(mod)
        return self._asm

    def _notify(self, _module, buf: bytes) -> None:
        self.object_code = bytes(buf)

    def address(self, name: str) -> int:
        addr = self.ee.get_function_address(name)
        if not addr:
            raise KeyError(f"no function {name!r} in the compiled module")
        return addr
