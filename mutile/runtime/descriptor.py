"""Host-side tensor descriptors: ``mutile.TensorDescriptor(array, block_shape)``.

A descriptor argument names a global array read and written in blocks of
``block_shape`` (``desc.load([i, j])``, or TME copies with ``mutile.language.pinghu``).
The kernel receives it as its base pointer, its dims and its strides (in elements); on
Pinghu it becomes a TME descriptor (rank <= 5; base and non-inner strides 16-byte aligned
for TME copies, checked when a copy is issued).
"""
from __future__ import annotations

from ..errors import LaunchError
from ..ir import types as T
from .specialize import as_array

MAX_RANK = 5


class TensorDescriptor:
    """``TensorDescriptor(array, block_shape)``: ``array`` (any numpy view whose innermost
    dim is contiguous, e.g. a slice of a padded allocation) read and written in blocks of
    ``block_shape`` (powers of two). Elements of a block outside the array read as 0 and
    are not written. ``mutile.TensorDescriptor(a, [64, 64])`` passes ``a`` to a kernel
    parameter used as ``a_desc.load([i, j])`` or ``ph.tme_load(a_desc, [i, j], ...)``."""

    def __init__(self, array, block_shape):
        arr = as_array(array)
        if arr is None:
            raise LaunchError(f"TensorDescriptor needs an array, got {type(array).__name__}")
        block = [int(b) for b in block_shape]
        if not 1 <= arr.ndim <= MAX_RANK:
            raise LaunchError(f"TensorDescriptor: rank {arr.ndim}; descriptors have rank 1 to "
                              f"{MAX_RANK}")
        if len(block) != arr.ndim:
            raise LaunchError(f"TensorDescriptor: block_shape {block} has {len(block)} dims, "
                              f"the array {arr.ndim}")
        if any(b <= 0 or b & (b - 1) for b in block):
            raise LaunchError(f"TensorDescriptor: block dims must be powers of two, got {block}")
        if T.scalar_from_numpy(arr.dtype) is None:
            raise LaunchError(f"TensorDescriptor: arrays of dtype {arr.dtype} are not supported")
        size = arr.itemsize
        if arr.strides[-1] != size and arr.shape[-1] > 1:
            raise LaunchError("TensorDescriptor: the innermost dim must be contiguous "
                              f"(strides {arr.strides} bytes)")
        if any(s % size or s < 0 for s in arr.strides):
            raise LaunchError(f"TensorDescriptor: strides {arr.strides} are not positive "
                              f"multiples of the element size")
        self.base, self.block_shape = arr, block
        self.shape = [int(d) for d in arr.shape]
        self.strides = [int(s) // size for s in arr.strides[:-1]] + [1]
        self.dtype = T.scalar_from_numpy(arr.dtype)

    @property
    def type(self) -> T.DescType:
        """The IR type a kernel is specialized for."""
        return T.DescType(self.dtype, tuple(self.block_shape))

    def launch_args(self) -> list:
        """What the kernel's expanded parameters receive: base, dims, strides."""
        return [self.base, *self.shape, *self.strides]

    def __repr__(self):
        return (f"TensorDescriptor({self.dtype}, shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape})")


__all__ = ["TensorDescriptor"]
