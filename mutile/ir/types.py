"""Types of the tile IR: scalars, pointers, tiles and tensor descriptors.

Types are immutable and compare by value. Their ``str`` is their IR text
(``f32``, ``ptr<f16>``, ``tile<64x32xf32>``, ``desc<f16, 64x64>``); the language
layer exposes the same objects under Triton's names (``ml.float32`` is ``f32``).
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


class Type:
    """Base of all IR types."""

    def is_tile(self) -> bool:
        return False

    def is_ptr(self) -> bool:
        return False

    @property
    def scalar(self) -> "Type":
        """The element type of a tile; a non-tile type is its own scalar."""
        return self


@dataclass(frozen=True, eq=True)
class ScalarType(Type):
    """An integer (signed ``iN``, unsigned ``uN``, boolean ``i1``) or float scalar."""
    name: str
    kind: str          # "int", "uint", "float"
    bits: int
    np_dtype: object = None
    triton_name: str = ""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"ml.{self.triton_name or self.name}"

    # Triton-compatible queries -------------------------------------------------
    @property
    def primitive_bitwidth(self) -> int:
        return self.bits

    def is_floating(self) -> bool:
        return self.kind == "float"

    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    def is_bool(self) -> bool:
        return self.name == "i1"

    def is_int_signed(self) -> bool:
        return self.kind == "int" and self.bits > 1

    def is_int_unsigned(self) -> bool:
        return self.kind == "uint" or self.name == "i1"

    def is_fp8(self) -> bool:
        return self.name in ("f8e4m3", "f8e5m2")

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def to_numpy(self) -> np.dtype:
        return np.dtype(self.np_dtype)

    def to(self, *_a, **_k):  # pragma: no cover - guard for misuse
        raise TypeError(f"{self!r} is a dtype, not a tensor")


def _s(name, kind, bits, npd, tname):
    return ScalarType(name, kind, bits, npd, tname)


i1 = _s("i1", "int", 1, np.bool_, "int1")
i8 = _s("i8", "int", 8, np.int8, "int8")
i16 = _s("i16", "int", 16, np.int16, "int16")
i32 = _s("i32", "int", 32, np.int32, "int32")
i64 = _s("i64", "int", 64, np.int64, "int64")
u8 = _s("u8", "uint", 8, np.uint8, "uint8")
u16 = _s("u16", "uint", 16, np.uint16, "uint16")
u32 = _s("u32", "uint", 32, np.uint32, "uint32")
u64 = _s("u64", "uint", 64, np.uint64, "uint64")
f8e4m3 = _s("f8e4m3", "float", 8, ml_dtypes.float8_e4m3fn, "float8e4nv")
f8e5m2 = _s("f8e5m2", "float", 8, ml_dtypes.float8_e5m2, "float8e5")
f16 = _s("f16", "float", 16, np.float16, "float16")
bf16 = _s("bf16", "float", 16, ml_dtypes.bfloat16, "bfloat16")
f32 = _s("f32", "float", 32, np.float32, "float32")
f64 = _s("f64", "float", 64, np.float64, "float64")

SCALARS: dict[str, ScalarType] = {
    t.name: t for t in (i1, i8, i16, i32, i64, u8, u16, u32, u64,
                        f8e4m3, f8e5m2, f16, bf16, f32, f64)}


def scalar_from_numpy(dt) -> ScalarType | None:
    """The scalar type whose host arrays have numpy dtype ``dt`` (None if none)."""
    dt = np.dtype(dt)
    for t in SCALARS.values():
        if np.dtype(t.np_dtype) == dt:
            return t
    return None


@dataclass(frozen=True, eq=True)
class PointerType(Type):
    """A global-memory address of elements of ``element_ty``."""
    element_ty: ScalarType

    def __str__(self) -> str:
        return f"ptr<{self.element_ty}>"

    def __repr__(self) -> str:
        return f"pointer_type({self.element_ty!r})"

    def is_ptr(self) -> bool:
        return True

    bits = 64
    name = "ptr"
    kind = "ptr"

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False


@dataclass(frozen=True, eq=True)
class TileType(Type):
    """A fixed-shape block of scalars or pointers; every dim is a power of two."""
    shape: tuple
    element: Type

    def __str__(self) -> str:
        return "tile<" + "x".join(map(str, self.shape)) + f"x{self.element}>"

    def is_tile(self) -> bool:
        return True

    def is_ptr(self) -> bool:
        return self.element.is_ptr()

    @property
    def scalar(self) -> Type:
        return self.element

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, eq=True)
class DescType(Type):
    """A tensor descriptor: a global tensor of ``element`` read in blocks of ``block``."""
    element: ScalarType
    block: tuple

    def __str__(self) -> str:
        return f"desc<{self.element}, " + "x".join(map(str, self.block)) + ">"


@dataclass(frozen=True, eq=True)
class SharedType(Type):
    """A buffer in the block's shared memory (Pinghu): ``shape`` elements of ``element``
    stored row-major under a swizzle of ``swizzle`` bytes (0, 16, 32 or 64)."""
    shape: tuple
    element: ScalarType
    swizzle: int = 0

    def __str__(self) -> str:
        return "smem<" + "x".join(map(str, self.shape)) + f"x{self.element}, " \
            f"swizzle={self.swizzle}>"

    @property
    def nbytes(self) -> int:
        n = self.element.itemsize
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, eq=True)
class BarrierType(Type):
    """``count`` AsyncBarriers of the block (Pinghu), used one at a time."""
    count: int

    def __str__(self) -> str:
        return f"barrier<{self.count}>"


def desc_arg_types(t: DescType) -> list:
    """The kernel parameters a descriptor argument of type ``t`` arrives as: base
    pointer, dims, strides (elements, i64)."""
    return [PointerType(t.element)] + [i64] * (2 * len(t.block))


def tile_or_scalar(shape: tuple, element: Type) -> Type:
    """``tile<shape x element>`` or just ``element`` when ``shape`` is empty."""
    return TileType(tuple(shape), element) if shape else element


def shape_of(t: Type) -> tuple:
    return t.shape if isinstance(t, TileType) else ()
