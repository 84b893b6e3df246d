"""mutile: a Python tile DSL and compiler for Moore Threads' Pinghu GPUs, with an
llvmlite JIT for the host CPU.

    import mutile, mutile.language as ml

    @mutile.jit
    def add(X, Y, Z, n, BLOCK: ml.constexpr): ...
    add[(mutile.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
"""
from .errors import CompilationError, DeviceFault, LaunchError, MutileError
from .runtime.descriptor import TensorDescriptor
from .runtime.jit import Config, JITFunction, jit
from .runtime.kernel import CompiledKernel

__version__ = "0.1.0"


def cdiv(x: int, y: int) -> int:
    """Ceiling division of integers (host side)."""
    return -(-x // y)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


from . import language, testing  # noqa: E402

__all__ = ["jit", "JITFunction", "CompiledKernel", "Config", "cdiv", "next_power_of_2",
           "TensorDescriptor", "CompilationError", "LaunchError", "DeviceFault", "MutileError", "language", "testing"]
