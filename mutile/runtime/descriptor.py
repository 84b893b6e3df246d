"""Host-side tensor descriptors: ``mutile.TensorDescriptor``, in Triton's form
``TensorDescriptor(base, shape, strides, block_shape)`` (also ``.from_tensor(t,
block_shape)``) and mutile's short form ``TensorDescriptor(array, block_shape)``.

A descriptor argument names a global array read and written in blocks of
``block_shape`` (``desc.load([i, j])``, or TME copies with ``mutile.language.pinghu``).
The kernel receives it as its base pointer, its dims and its strides (in elements); on
Pinghu it becomes a TME descriptor (rank <= 5; base and non-inner strides 4-byte aligned
for TME copies, checked when a copy is issued). ``block_shape`` may be set after
construction (a launch hook does, as Triton's attention tutorial's ``pre_hook``): the
kernel is specialized for the block shape the descriptor has at launch.
"""
from __future__ import annotations

import numpy as np

from ..errors import LaunchError
from ..ir import types as T
from .specialize import as_array

MAX_RANK = 5


def _byte_span(a: np.ndarray) -> tuple[int, int]:
    """[lo, hi) byte offsets, from ``a``'s first element, that its elements occupy."""
    lo = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(a.shape, a.strides) if s > 0)
    return lo, hi + a.itemsize


def _region(arr: np.ndarray, shape, strides) -> np.ndarray:
    """The view of ``arr``'s memory from its first element with ``shape`` and ``strides``
    (in elements), refused unless it lies inside the memory ``arr`` spans."""
    shape, strides = [int(d) for d in shape], [int(s) for s in strides]
    if len(strides) != len(shape):
        raise LaunchError(f"TensorDescriptor: shape {shape} and strides {strides} differ "
                          "in rank")
    if any(d <= 0 for d in shape) or any(s < 0 for s in strides):
        raise LaunchError(f"TensorDescriptor: shape {shape} must be positive and strides "
                          f"{strides} non-negative")
    size = arr.itemsize
    view = np.lib.stride_tricks.as_strided(arr, shape, [s * size for s in strides],
                                           writeable=arr.flags.writeable)
    lo, hi = _byte_span(arr) if arr.size else (0, 0)
    vlo, vhi = _byte_span(view)
    if vlo < lo or vhi > hi:
        raise LaunchError(f"TensorDescriptor: shape {shape} with strides {strides} reaches "
                          f"{vhi} bytes from the base, past the {hi} bytes of its array "
                          f"(shape {list(arr.shape)})")
    return view


def _block(block_shape, ndim: int) -> list:
    block = [int(getattr(b, "value", b)) for b in block_shape]
    if len(block) != ndim:
        raise LaunchError(f"TensorDescriptor: block_shape {block} has {len(block)} dims, "
                          f"the array {ndim}")
    if any(b <= 0 or b & (b - 1) for b in block):
        raise LaunchError(f"TensorDescriptor: block dims must be powers of two, got {block}")
    return block


class TensorDescriptor:
    """``TensorDescriptor(base, shape, strides, block_shape, padding="zero")`` (Triton's
    form: the memory of array or tensor ``base`` from its first element, seen with
    ``shape`` and ``strides`` in elements) or ``TensorDescriptor(array, block_shape)``
    (``array``'s own shape and strides: any numpy view or torch tensor whose innermost dim
    is contiguous, e.g. a slice of a padded allocation). It is read and written in blocks
    of ``block_shape`` (powers of two); elements of a block outside the shape read as 0
    and are not written. ``mutile.TensorDescriptor(a, [64, 64])`` passes ``a`` to a kernel
    parameter used as ``a_desc.load([i, j])`` or ``ph.tme_load(a_desc, [i, j], ...)``.

    ``base`` is the numpy view of the described memory; ``shape``, ``strides`` (in
    elements), ``block_shape``, ``padding`` and ``dtype`` (the element's IR type)."""

    def __init__(self, base, shape, strides=None, block_shape=None, padding="zero"):
        arr = as_array(base)
        if arr is None:
            raise LaunchError(f"TensorDescriptor needs an array, got {type(base).__name__}")
        if strides is None and (shape is None) != (block_shape is None):   # the short form
            block_shape = shape if block_shape is None else block_shape
        elif strides is None or block_shape is None or shape is None:
            raise LaunchError("TensorDescriptor takes (base, shape, strides, block_shape) or "
                              "(array, block_shape)")
        else:
            arr = _region(arr, shape, strides)
        if padding != "zero":
            raise LaunchError(f"TensorDescriptor: padding={padding!r} is not supported by "
                              "mutile (elements outside the shape read as 0: padding='zero')")
        if not 1 <= arr.ndim <= MAX_RANK:
            raise LaunchError(f"TensorDescriptor: rank {arr.ndim}; descriptors have rank 1 to "
                              f"{MAX_RANK}")
        self.block_shape = _block(block_shape, arr.ndim)
        if T.scalar_from_numpy(arr.dtype) is None:
            raise LaunchError(f"TensorDescriptor: arrays of dtype {arr.dtype} are not supported")
        size = arr.itemsize
        if arr.strides[-1] != size and arr.shape[-1] > 1:
            raise LaunchError("TensorDescriptor: the innermost dim must be contiguous "
                              f"(strides {arr.strides} bytes)")
        if any(s % size or s < 0 for s in arr.strides):
            raise LaunchError(f"TensorDescriptor: strides {arr.strides} are not positive "
                              f"multiples of the element size")
        self.base, self.padding = arr, padding
        self.shape = [int(d) for d in arr.shape]
        self.strides = [int(s) // size for s in arr.strides[:-1]] + [1]
        self.dtype = T.scalar_from_numpy(arr.dtype)

    @staticmethod
    def from_tensor(tensor, block_shape, padding="zero") -> "TensorDescriptor":
        """The descriptor of the whole of ``tensor`` (its shape and strides), as Triton's."""
        return TensorDescriptor(tensor, block_shape, padding=padding)

    @property
    def type(self) -> T.DescType:
        """The IR type a kernel is specialized for (its block shape checked again: a hook
        may have set it)."""
        return T.DescType(self.dtype, tuple(_block(self.block_shape, len(self.shape))))

    def launch_args(self) -> list:
        """What the kernel's expanded parameters receive: base, dims, strides."""
        return [self.base, *self.shape, *self.strides]

    def __repr__(self):
        return (f"TensorDescriptor({self.dtype}, shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape})")


__all__ = ["TensorDescriptor"]
