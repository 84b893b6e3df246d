"""``triton.tools`` under :func:`mutile.as_triton`: ``tensor_descriptor`` is mutile's
host descriptor module (``TensorDescriptor(base, shape, strides, block_shape)``)."""
from ..runtime import descriptor as tensor_descriptor

__path__: list = []     # a package to the import system: triton.x imports reach the finder

__all__ = ["tensor_descriptor"]
