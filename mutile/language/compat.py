"""The last of ``triton.language``'s names: small forms of what mutile already has, and the
names mutile refuses.

A refused name is still a builtin: a kernel that calls it compiles to a
:class:`~mutile.CompilationError` at the call, saying that mutile does not support it and
what to use instead. A user's published kernel then fails on its own line, never with a
Python ``AttributeError`` from inside the compiler. ``docs/triton-compat.md`` lists every
name with its status.
"""
from __future__ import annotations

import builtins

from ..ir import types as T
from . import semantic as S
from .core import builtin, constexpr, pointer_type
from .semantic import fail

#: Triton's largest tile, in elements (its ``TRITON_MAX_TENSOR_NUMEL``). mutile sets no
#: limit of its own at this size; published kernels only compare block sizes against it.
TRITON_MAX_TENSOR_NUMEL = constexpr(1048576)

#: ``tl.pi32_t``: pointer to int32.
pi32_t = pointer_type(T.i32)

class _TileTypeOf(type):
    """``isinstance(t, block_type)`` is True for tile types; ``block_type(element_ty,
    shape)`` makes one (Triton's argument order; mutile's own is ``TileType(shape, el)``)."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, T.TileType)

    def __call__(cls, element_ty, shape):
        return T.TileType(builtins.tuple(int(d) for d in shape), element_ty)


class block_type(metaclass=_TileTypeOf):
    """``tl.block_type``: the type of a tile (``x.type`` of a tile ``x``)."""

#: ``tl.tuple``: Python tuples are mutile's tuples (also in annotations).
tuple = tuple  # noqa: A001


class _Void:
    """``tl.void``: the type of nothing (what a function without results returns)."""

    name = "void"

    def is_void(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "ml.void"


void = _Void()


def constexpr_function(fn):
    """``@tl.constexpr_function``: ``fn`` runs at compile time when a kernel calls it on
    compile-time values (any plain Python function does in mutile; this marks it so)."""
    fn.__mutile_constexpr_function__ = True
    return fn


@builtin
def add(x, y, sanitize_overflow: bool = True, _builder=None):
    """``x + y`` (Triton's ``tl.add``; ``sanitize_overflow`` is accepted: integer addition
    wraps, docs/semantics.md)."""
    return S.add(x, y, _builder)


@builtin
def load_tensor_descriptor(desc, offsets, _builder=None):
    """``desc.load(offsets)``."""
    if not getattr(desc, "__mutile_desc__", False):
        fail(f"load_tensor_descriptor needs a tensor descriptor, got {type(desc).__name__}")
    return desc.load(offsets, _builder=_builder)


@builtin
def store_tensor_descriptor(desc, offsets, value, _builder=None):
    """``desc.store(offsets, value)``."""
    if not getattr(desc, "__mutile_desc__", False):
        fail(f"store_tensor_descriptor needs a tensor descriptor, got {type(desc).__name__}")
    return desc.store(offsets, value, _builder=_builder)


def _refused(name: str, instead: str):
    """A builtin that stops compilation at its call: mutile does not support ``tl.name``."""
    def refuse(*args, _builder=None, **kwargs):
        fail(f"mutile does not support tl.{name}: {instead}")
    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Not supported by mutile ({instead})."
    return builtin(refuse)


make_block_ptr = _refused(
    "make_block_ptr", "block pointers, which current Triton rejects too; use "
    "tl.make_tensor_descriptor (desc.load / desc.store), which both backends run")
advance = _refused("advance", "it moves a block pointer; use tl.make_tensor_descriptor and "
                   "new offsets in desc.load")
async_task = _refused("async_task", "Triton's experimental warp-specialization tasks; use "
                      "ml.range(..., warp_specialize=True) or mutile.language.pinghu's "
                      "ph.warp_specialize")
const = _refused("const", "const-qualified pointers; pass an ordinary pointer (a read-only "
                 "array is checked at launch)")
slice = _refused(  # noqa: A001
    "slice", "take the part with a mask or reshape/split instead")


class RefusedDtype:
    """A Triton dtype mutile has no arithmetic for. Comparing with it is allowed (nothing
    equals it); passing it to a builtin (``x.to(tl.float8e4b15)``, ``tl.full(..., dtype=)``)
    stops compilation at that call (the frontend checks every builtin's arguments)."""

    def __init__(self, name: str, why: str):
        self.name, self.why = name, why

    def refusal(self) -> str:
        return f"mutile does not support tl.{self.name}: {self.why}"

    def __repr__(self) -> str:
        return f"ml.{self.name}"


float8e4b15 = RefusedDtype("float8e4b15", "e4m3 with exponent bias 15 has no conversion rules "
                           "in mutile (docs/semantics.md); use float8e4nv or float8e5")
