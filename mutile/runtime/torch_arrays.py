"""torch CPU tensors as kernel arrays, without importing torch.

A tensor is passed as Triton passes it: its data pointer (``t.data_ptr()``, the first
element of a view) with its shape and strides. The numpy view made here reads that memory
directly — every dtype mutile has a type for (bf16 and fp8 through ml_dtypes), tensors that
require grad, non-contiguous views — where ``np.from_dlpack`` refuses bf16/fp8 and tensors
that require grad. torch is never imported: a value is a tensor only if torch is loaded.
"""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from ..errors import LaunchError

# torch dtype name (``str(t.dtype)`` without "torch.") -> the numpy dtype of its host arrays
_DTYPES = {
    "bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16,
    "int32": np.int32, "int64": np.int64, "uint16": np.uint16, "uint32": np.uint32,
    "uint64": np.uint64, "float16": np.float16, "float32": np.float32, "float64": np.float64,
    "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2, "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "complex64": np.complex64,
    "complex128": np.complex128,
}


def is_torch_tensor(value) -> bool:
    """Whether ``value`` is a ``torch.Tensor`` (False, cheaply, when torch is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, getattr(torch, "Tensor", ()))


class _Memory:
    """The ``__array_interface__`` of a tensor's memory; it keeps the tensor alive for as
    long as the numpy view made from it lives."""

    def __init__(self, tensor, interface):
        self.tensor, self.__array_interface__ = tensor, interface


def torch_view(t) -> np.ndarray:
    """The writable numpy view of CPU tensor ``t``'s memory: same data pointer, shape,
    strides (in bytes) and element type. A :class:`LaunchError` for a tensor on another
    device or of a dtype without a numpy counterpart."""
    if t.device.type != "cpu":
        raise LaunchError(f"a torch tensor on device '{t.device}': mutile reads host memory; "
                          "pass a CPU tensor (t.cpu())")
    name = str(t.dtype).removeprefix("torch.")
    np_dtype = _DTYPES.get(name)
    if np_dtype is None:
        raise LaunchError(f"torch tensors of dtype {t.dtype} are not supported")
    size = int(t.element_size())
    interface = {"version": 3, "data": (int(t.data_ptr()), False),
                 "shape": tuple(int(d) for d in t.shape),
                 "strides": tuple(int(s) * size for s in t.stride()),
                 "typestr": f"|u{size}"}
    return np.asarray(_Memory(t, interface)).view(np_dtype)


__all__ = ["is_torch_tensor", "torch_view"]
