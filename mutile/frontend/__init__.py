"""Python AST -> tile IR (see :func:`compile_kernel`)."""
from .compiler import KernelCompiler, RuntimeArg, compile_kernel

__all__ = ["KernelCompiler", "RuntimeArg", "compile_kernel"]
