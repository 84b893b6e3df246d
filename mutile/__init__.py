"""mutile: a Python tile DSL and compiler for Moore Threads' Pinghu GPUs, with an
llvmlite JIT for the host CPU.

    import mutile, mutile.language as ml

    @mutile.jit
    def add(X, Y, Z, n, BLOCK: ml.constexpr): ...
    add[(mutile.cdiv(n, 1024),)](x, y, z, n, BLOCK=1024)
"""
from .errors import CompilationError, DeviceFault, LaunchError, MutileError
from .runtime.address_table import AddressTable
from .runtime.descriptor import TensorDescriptor
from .runtime.host import Heuristics, cdiv, heuristics, next_power_of_2
from .runtime.jit import Config, JITFunction, KernelInterface, jit
from .runtime.kernel import CompiledKernel
from .runtime.graph import Graph
from .profiler import Profile, profile
from .autotune import Autotuner, ConfigSpace, autotune

__version__ = "0.1.0"


def as_triton():
    """Install ``triton`` (and ``triton.language``, ``.testing``, ``.runtime``, ``.tools``)
    as aliases of mutile in ``sys.modules``, so code written for Triton imports mutile;
    returns the ``triton`` module. See :mod:`mutile.compat`."""
    from .compat import as_triton as install
    return install()


from . import language, testing  # noqa: E402

__all__ = ["jit", "JITFunction", "KernelInterface", "CompiledKernel", "Config", "heuristics",
           "Heuristics", "cdiv", "next_power_of_2", "TensorDescriptor", "AddressTable", "as_triton",
           "CompilationError", "LaunchError", "DeviceFault", "MutileError", "language",
           "testing", "profile", "Profile", "autotune", "Autotuner", "ConfigSpace", "Graph"]
