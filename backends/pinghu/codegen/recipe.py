"""Recipes: integer index arithmetic kept as an expression of the element index, so that
``broadcast`` and ``permute`` recompute it in the new layout instead of moving it through
shared memory.

Triton kernels build offsets and masks as ``offs_m[:, None] * stride + offs_n[None, :]``:
every ``[:, None]`` is a broadcast, and in the block layout a broadcast moves elements
between threads. But ``offs_m`` is a function of the element's row-major index ``i``
(``(i >> s) & m`` plus uniform scalars), and so is everything computed from it. A recipe
records that function: :class:`Bits` ``(i >> shift) & (2**width - 1)``, :class:`Const` a
uniform scalar, :class:`Node` an elementwise op. ``expand_dims``/``reshape`` keep ``i``;
a broadcast or permute maps the bits of the source index onto bits of the destination
index, so a recipe carries over as long as each :class:`Bits` field stays contiguous.
"""
from __future__ import annotations

from dataclasses import dataclass

from mutile.ir import types as T

from ..isa.operands import IntImm
from .values import TileVal, Uniform, log2, numel

MAX_NODES = 16        # a longer recipe is cheaper to move through shared memory


@dataclass(frozen=True, eq=False)
class Bits:
    shift: int
    width: int


@dataclass(frozen=True, eq=False)
class Const:
    value: Uniform


@dataclass(frozen=True, eq=False)
class Node:
    op: str                 # an elementwise IR op name ("add", "cmp", "cast", ...)
    args: tuple
    ty: object              # the operands' element type (the result's for "cast")
    attrs: tuple = ()       # sorted attribute items (cmp's pred, cast's target)


def size(r) -> int:
    return 1 + sum(size(a) for a in r.args) if isinstance(r, Node) else 1


def of(val):
    """The recipe of a codegen value, if it has one (uniforms are constants)."""
    if isinstance(val, Uniform):
        return Const(val)
    if isinstance(val, TileVal):
        return getattr(val, "recipe", None)
    return None


def combine(op: str, args: list, ty, attrs: dict | None = None):
    """A node over the operands' recipes, or None when one has none or it grows too big."""
    rs = [of(a) for a in args]
    if any(r is None for r in rs) or all(isinstance(r, Const) for r in rs):
        return None
    node = Node(op, tuple(rs), ty, tuple(sorted((attrs or {}).items())))
    return node if size(node) <= MAX_NODES else None


def arange(n: int, start: int):
    """The recipe of ``arange(start, start + n)`` (a 1-D tile: ``i + start``)."""
    bits = Bits(0, log2(n))
    if not start:
        return bits
    return Node("add", (bits, Const(Uniform(IntImm(start), (), T.i32))), T.i32)


def remap(r, bit_of):
    """``r`` over a new index whose bit ``bit_of[b]`` is the old index's bit ``b``; None
    when a field's bits are not contiguous and in order in the new index."""
    if r is None:
        return None
    if isinstance(r, Const):
        return r
    if isinstance(r, Bits):
        if r.width == 0:
            return r
        new = [bit_of[b] for b in range(r.shift, r.shift + r.width)]
        if any(b is None for b in new) or new != list(range(new[0], new[0] + r.width)):
            return None
        return Bits(new[0], r.width)
    args = tuple(remap(a, bit_of) for a in r.args)
    return None if any(a is None for a in args) else Node(r.op, args, r.ty, r.attrs)


def broadcast_bits(src_shape: tuple, dst_shape: tuple) -> list:
    """For a broadcast (``src_shape`` padded to ``dst_shape``'s rank): the destination bit
    of every source index bit."""
    out = []
    for s in range(len(src_shape) - 1, -1, -1):
        inner = log2(numel(dst_shape[s + 1:]))
        out += [inner + b for b in range(log2(src_shape[s]))]
    return out


def permute_bits(src_shape: tuple, order: tuple, dst_shape: tuple) -> list:
    """For a permute (result dim ``k`` is source dim ``order[k]``): the destination bit of
    every source index bit."""
    out = []
    for s in range(len(src_shape) - 1, -1, -1):
        k = order.index(s)
        inner = log2(numel(dst_shape[k + 1:]))
        out += [inner + b for b in range(log2(src_shape[s]))]
    return out
