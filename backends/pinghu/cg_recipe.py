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

from .cg_values import TileVal, Uniform, log2, numel

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
    from mutile.ir import types as T

    from .operands import IntImm
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


def emit(cg, r, shape: tuple, ty, index: TileVal | None = None):
    """Evaluate recipe ``r`` in the block layout of ``shape``: a TileVal of type ``ty``
    (carrying the recipe again, so it can move on). With ``index`` (an i32 run of flat
    indices, e.g. every 4th element's), evaluate it at those indices instead."""
    from mutile.ir import types as T

    from .cg_elementwise import binary, cast_into, compare
    from .operands import IntImm
    cache: dict = {}
    if index is not None:
        cache["idx"] = index

    def new(t):
        if index is None:
            return cg.new_tile(shape, t)
        from .cg_context import width
        w = width(t)
        return TileVal(cg.vreg(index.E * w, w), shape, t, index.E, w)

    def ev(node, t):
        if isinstance(node, Const):
            return node.value
        if id(node) in cache:
            return cache[id(node)]
        if isinstance(node, Bits):
            if "idx" not in cache:
                cache["idx"] = cg.index_run(shape)
            idx, nb = cache["idx"], log2(max(numel(shape), 1))
            if node.shift == 0 and node.width >= nb:
                return TileVal(idx.vreg, idx.shape, idx.ty, idx.E, idx.w, node)
            out = new(T.i32)
            src = idx.run()
            if node.shift:
                cg.emit("ALU.SHR.U32", out.run(), src, IntImm(node.shift))
                src = out.run()
            if node.shift + node.width < nb:
                cg.emit("ALU.LOP.AND.B32", out.run(), src, IntImm((1 << node.width) - 1))
            out.recipe = node
            cache[id(node)] = out
            return out
        attrs = dict(node.attrs)
        if node.op == "cast":
            a = ev(node.args[0], None)
            out = new(attrs["to"])
            cast_into(cg, a, node.ty, attrs["to"], out)
        elif node.op == "cmp":
            a, b = (ev(x, node.ty) for x in node.args)
            out = new(T.i1)
            compare(cg, attrs["pred"], a, b, node.ty, out)
        else:
            a, b = (ev(x, node.ty) for x in node.args)
            out = new(node.ty)
            binary(cg, node.op, a, b, node.ty, out)
        out.recipe = node
        cache[id(node)] = out
        return out

    return ev(r, ty)
