"""Types of the tile IR: scalars, pointers, tiles and tensor descriptors.

Types are immutable and compare by value. Their ``str`` is their IR text
(``f32``, ``ptr<f16>``, ``tile<64x32xf32>``, ``desc<f16, 64x64>``); the language
layer exposes the same objects under Triton's names (``ml.float32`` is ``f32``).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import ml_dtypes
import numpy as np

# Triton's dtype names (``dtype.name`` there, and its mangling): the queries below and
# ``dtype.is_fp16()``-style predicates read this table.
TRITON_SHORT = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
                "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
                "f8e4m3": "fp8e4nv", "f8e5m2": "fp8e5", "f8e4b8": "fp8e4b8",
                "f8e5b16": "fp8e5b16", "f16": "fp16", "bf16": "bf16", "f32": "fp32",
                "f64": "fp64"}
# Every scalar name Triton has a predicate for (mutile lacks its fp8e4b15).
_TRITON_PREDICATES = tuple(TRITON_SHORT.values()) + ("fp8e4b15",)
# float layout: (mantissa bits, exponent bias), Triton's fp_mantissa_width / exponent_bias
_FP_LAYOUT = {"f8e4m3": (3, 7), "f8e5m2": (2, 15), "f8e4b8": (3, 8), "f8e5b16": (2, 16),
              "f16": (10, 15), "bf16": (7, 127), "f32": (23, 127), "f64": (52, 1023)}
# the fp8 formats: OCP e4m3fn and e5m2, and the "fnuz" e4m3 (bias 8) and e5m2 (bias 16)
FP8 = ("f8e4m3", "f8e5m2", "f8e4b8", "f8e5b16")


class Type:
    """Base of all IR types. It also answers Triton's dtype queries (``is_fp16()``,
    ``is_block()``...): False here, each type says what it is."""

    class SIGNEDNESS(enum.Enum):
        """Triton's ``dtype.SIGNEDNESS`` (``int_signedness`` of integer types)."""
        SIGNED = 0
        UNSIGNED = 1

    SINT_TYPES = ("int8", "int16", "int32", "int64")
    UINT_TYPES = ("int1", "uint8", "uint16", "uint32", "uint64")
    FP_TYPES = ("fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32",
                "fp64")
    STANDARD_FP_TYPES = ("fp16", "bf16", "fp32", "fp64")
    OTHER_TYPES = ("void",)

    def is_tile(self) -> bool:
        return False

    def is_ptr(self) -> bool:
        return False

    def is_block(self) -> bool:
        """Triton's name for :meth:`is_tile`."""
        return self.is_tile()

    def is_const(self) -> bool:
        return False

    def is_void(self) -> bool:
        return False

    def is_floating(self) -> bool:
        return False

    def is_standard_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def is_fp8(self) -> bool:
        return False

    @property
    def cache_key_part(self) -> str:
        """Triton's spelling of the type (``fp16``, ``int32``): its ``dtype.name``."""
        return str(self)

    @staticmethod
    def is_dtype(type_str) -> bool:
        """Whether ``type_str`` is one of Triton's scalar type names (``"fp16"``)."""
        return type_str in Type.SINT_TYPES + Type.UINT_TYPES + Type.FP_TYPES + Type.OTHER_TYPES

    @property
    def scalar(self) -> "Type":
        """The element type of a tile; a non-tile type is its own scalar."""
        return self

    def with_element_ty(self, element_ty: "Type") -> "Type":
        """This type with ``element_ty`` as its scalar (a tile keeps its shape)."""
        return element_ty


def _triton_predicate(short: str):
    def pred(self) -> bool:
        return self.cache_key_part == short
    pred.__name__ = f"is_{short}"
    pred.__doc__ = f"Whether this is Triton's ``{short}``."
    return pred


for _short in _TRITON_PREDICATES:
    setattr(Type, f"is_{_short}", _triton_predicate(_short))


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

    # Triton-compatible queries (its ``dtype``; ``kind`` and ``name`` stay mutile's) -----
    @property
    def primitive_bitwidth(self) -> int:
        return self.bits

    @property
    def cache_key_part(self) -> str:
        return TRITON_SHORT[self.name]

    def is_floating(self) -> bool:
        return self.kind == "float"

    def is_standard_floating(self) -> bool:
        return self.cache_key_part in Type.STANDARD_FP_TYPES

    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    def is_bool(self) -> bool:
        return self.name == "i1"

    def is_int_signed(self) -> bool:
        return self.kind == "int" and self.bits > 1

    def is_int_unsigned(self) -> bool:
        return self.kind == "uint" or self.name == "i1"

    def is_fp8(self) -> bool:
        return self.name in FP8

    @property
    def int_signedness(self) -> "Type.SIGNEDNESS":
        if not self.is_int():
            raise AttributeError(f"{self!r} is not an integer type: it has no int_signedness")
        return Type.SIGNEDNESS.SIGNED if self.is_int_signed() else Type.SIGNEDNESS.UNSIGNED

    @property
    def int_bitwidth(self) -> int:
        if not self.is_int():
            raise AttributeError(f"{self!r} is not an integer type: it has no int_bitwidth")
        return self.bits

    @property
    def fp_mantissa_width(self) -> int:
        if not self.is_floating():
            raise AttributeError(f"{self!r} is not a float type: it has no fp_mantissa_width")
        return _FP_LAYOUT[self.name][0]

    @property
    def exponent_bias(self) -> int:
        if not self.is_floating():
            raise AttributeError(f"{self!r} is not a float type: it has no exponent_bias")
        return _FP_LAYOUT[self.name][1]

    def get_int_max_value(self) -> int:
        if not self.is_int():
            raise TypeError(f"{self!r} is not an integer type")
        return 2 ** self.bits - 1 if self.is_int_unsigned() else 2 ** (self.bits - 1) - 1

    def get_int_min_value(self) -> int:
        if not self.is_int():
            raise TypeError(f"{self!r} is not an integer type")
        return 0 if self.is_int_unsigned() else -2 ** (self.bits - 1)

    def codegen_name(self) -> str:
        """Triton's ``codegen_name()``: ``float16``, ``bfloat16``, ``int32``..."""
        return self.triton_name

    def mangle(self) -> str:
        """Triton's mangled spelling: ``i32``, ``u8``, ``u1`` (bool), ``fp16``."""
        if self.is_int():
            return ("i" if self.is_int_signed() else "u") + str(self.bits)
        return self.cache_key_part

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
f8e4b8 = _s("f8e4b8", "float", 8, ml_dtypes.float8_e4m3fnuz, "float8e4b8")
f8e5b16 = _s("f8e5b16", "float", 8, ml_dtypes.float8_e5m2fnuz, "float8e5b16")
f16 = _s("f16", "float", 16, np.float16, "float16")
bf16 = _s("bf16", "float", 16, ml_dtypes.bfloat16, "bfloat16")
f32 = _s("f32", "float", 32, np.float32, "float32")
f64 = _s("f64", "float", 64, np.float64, "float64")

SCALARS: dict[str, ScalarType] = {
    t.name: t for t in (i1, i8, i16, i32, i64, u8, u16, u32, u64,
                        f8e4m3, f8e5m2, f8e4b8, f8e5b16, f16, bf16, f32, f64)}


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
    address_space = 1        # Triton's pointer_type fields: global memory, not const
    const = False

    @property
    def primitive_bitwidth(self) -> int:
        return 64

    @property
    def cache_key_part(self) -> str:
        return f"pointer<{self.element_ty.cache_key_part}>"

    def mangle(self) -> str:
        return f"P{self.element_ty.mangle()}"


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
    def element_ty(self) -> Type:
        """Triton's name for :attr:`element` (its ``block_type.element_ty``)."""
        return self.element

    def get_block_shapes(self) -> tuple:
        return self.shape

    def with_element_ty(self, element_ty: Type) -> "TileType":
        return TileType(self.shape, element_ty)

    @property
    def cache_key_part(self) -> str:
        return f"<{self.shape}, {self.element.cache_key_part}>"

    def mangle(self) -> str:
        return f"{self.element.mangle()}S{'_'.join(map(str, self.shape))}S"

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
