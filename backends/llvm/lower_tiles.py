"""How a tile value lives during lowering: a buffer, or a recipe evaluated in chunks.

Every tile-typed IR value maps to one :class:`TileVal`. A :class:`Buffer` is a
64-byte-aligned stack array (row-major, storage types: i1 as i8, bf16 as i16, fp8 as
i8, pointers as i64 addresses). The other kinds are *lazy*: they compute their
elements on demand, so a chain of elementwise ops becomes one loop with no
intermediate buffers (fusion), and a splat or an ``arange`` never touches memory.

Every kind answers two questions, both on flat row-major element indices:

* ``chunk(ctx, f, w)``: the ``w`` elements ``f .. f+w-1`` (``f`` an i64 value that is a
  multiple of ``w``; ``w`` a power of two dividing the tile's size) as a
  ``<w x repr>`` vector, or a scalar when ``w == 1``;
* ``gather(ctx, idx)``: the elements at an ``<n x i64>`` vector of flat indices.

A lazy value reads the buffers it was built from when it is *evaluated*, not when
it is built; :meth:`TileVal.reads` lists them so ``yield`` can tell when writing a
loop-carried buffer would change a value still to be evaluated.

``sep`` (on integer and pointer tiles) is a *fact* about the value's structure,
``value[i0, .., ir] = base + unit * sum_d part_d(i_d)`` (:class:`Sep`), used by memory
ops to find contiguous rows. For pointer tiles the lowering evaluates addresses from
it (:class:`SepVal`), assuming, like Triton, that integer offset arithmetic does not
overflow its type.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field

from llvmlite import ir

from mutile.ir.types import TileType

I32 = ir.IntType(32)
I64 = ir.IntType(64)


class TileVal(abc.ABC):
    """Base of the tile representations (see the module docstring)."""
    type: TileType
    sep: "Sep | None" = None

    @abc.abstractmethod
    def chunk(self, ctx, f, w):
        """The ``w`` elements starting at flat index ``f``, as a vector."""

    @abc.abstractmethod
    def gather(self, ctx, idx):
        """The elements at the flat indices of the i32 vector ``idx``."""

    def reads(self) -> list["Buffer"]:
        """Buffers whose contents this value depends on (transitively)."""
        return []

    def cheap(self) -> bool:
        """True if evaluating an element costs about as much as loading it."""
        return False


class Buffer(TileVal):
    """A materialized tile: ``ptr`` to ``numel`` storage elements, row-major.

    ``owned`` is False when another live value may share the memory (an alias made by
    reshape/expand_dims); an owned buffer whose value has one use may be updated in
    place by that use (dot accumulates into it).
    """

    def __init__(self, ptr, type: TileType, owned: bool = True):
        self.ptr, self.type, self.owned = ptr, type, owned

    def chunk(self, ctx, f, w):
        return ctx.load_elems(self.ptr, self.type.element, f, w)

    def gather(self, ctx, idx):
        return ctx.gather_elems(self.ptr, self.type.element, idx)

    def reads(self):
        return [self]

    def cheap(self):
        return True


class PackedBuffer(Buffer):
    """A 2-D (K x N) buffer stored panel-major for ``dot``'s B: element ``[k, j]`` at
    ``j0*K + k*nr + (j - j0)``, ``j0 = j - j % nr`` (N a multiple of ``nr``)."""

    def __init__(self, ptr, type: TileType, nr: int):
        super().__init__(ptr, type)
        self.nr = nr

    def index(self, ctx, f):
        """The storage index (i64 or vector) of flat row-major index ``f``."""
        b = ctx.b
        K, N = self.type.shape
        w = f.type.count if isinstance(f.type, ir.VectorType) else 1

        def c(v):
            return ctx.splat(ir.Constant(I64, v), w)
        k, j = b.udiv(f, c(N)), b.urem(f, c(N))
        in_panel = b.urem(j, c(self.nr))
        j0 = b.sub(j, in_panel)
        return b.add(b.add(b.mul(j0, c(K)), b.mul(k, c(self.nr))), in_panel)

    def chunk(self, ctx, f, w):
        if self.nr % w == 0:
            return ctx.load_elems(self.ptr, self.type.element, self.index(ctx, f), w)
        return self.gather(ctx, ctx.iota_from(f, w))

    def gather(self, ctx, idx):
        return ctx.gather_elems(self.ptr, self.type.element, self.index(ctx, idx))


class Uniform(TileVal):
    """Every element equals the scalar ``value`` (a splat or a constant tile)."""

    def __init__(self, value, type: TileType):
        self.value, self.type = value, type

    def chunk(self, ctx, f, w):
        return ctx.splat(self.value, w)

    def gather(self, ctx, idx):
        return ctx.splat(self.value, idx.type.count)

    def cheap(self):
        return True


class Iota(TileVal):
    """``arange(start, start+n)`` as i32."""

    def __init__(self, start: int, type: TileType):
        self.start, self.type = start, type

    def chunk(self, ctx, f, w):
        b = ctx.b
        first = b.add(b.trunc(f, I32), ir.Constant(I32, self.start))
        if w == 1:
            return first
        return b.add(ctx.splat(first, w), ir.Constant(ir.VectorType(I32, w), list(range(w))))

    def gather(self, ctx, idx):
        b = ctx.b
        v = b.trunc(idx, ir.VectorType(I32, idx.type.count))
        return b.add(v, ctx.splat(ir.Constant(I32, self.start), idx.type.count))

    def cheap(self):
        return True


class Expr(TileVal):
    """An elementwise op applied to operand tiles: ``emit(ctx, operand chunks)``.

    ``light`` marks an op costing about one vector instruction (add, cmp, select...).
    """

    def __init__(self, emit, operands, type: TileType, light: bool = False):
        self.emit, self.operands, self.type = emit, list(operands), type
        self.light = light

    def size(self) -> int:
        """Ops in this expression tree, or a large number if any is not light."""
        if not self.light:
            return 1 << 20
        n = 1
        for o in self.operands:
            if isinstance(o, Expr):
                n += o.size()
            elif isinstance(o, View) and isinstance(o.inner, Expr):
                n += o.inner.size()
            elif not o.cheap():
                return 1 << 20
        return n

    def chunk(self, ctx, f, w):
        return self.emit(ctx, [o.chunk(ctx, f, w) for o in self.operands])

    def gather(self, ctx, idx):
        return self.emit(ctx, [o.gather(ctx, idx) for o in self.operands])

    def reads(self):
        return [r for o in self.operands for r in o.reads()]


class View(TileVal):
    """``inner`` seen with another shape of the same row-major order (reshape)."""

    def __init__(self, inner: TileVal, type: TileType):
        self.inner, self.type = inner, type

    def chunk(self, ctx, f, w):
        return self.inner.chunk(ctx, f, w)

    def gather(self, ctx, idx):
        return self.inner.gather(ctx, idx)

    def reads(self):
        return self.inner.reads()

    def cheap(self):
        return self.inner.cheap()


class IndexMap(TileVal):
    """Element ``i`` of the result is element ``sum_d strides[d] * i_d`` of ``src``
    (broadcast: stride 0 on repeated dims; permute: permuted strides)."""

    def __init__(self, src: TileVal, type: TileType, strides):
        self.src, self.type, self.strides = src, type, tuple(strides)

    def chunk(self, ctx, f, w):
        shape = self.type.shape
        if w > shape[-1]:
            return self.gather(ctx, ctx.iota_from(f, w))
        b = ctx.b
        idx = ctx.unflatten(f, shape)
        row = ir.Constant(I64, 0)
        for d in range(len(shape) - 1):
            if self.strides[d]:
                row = b.add(row, b.mul(idx[d], ir.Constant(I64, self.strides[d])))
        last = self.strides[-1]
        if last == 0:
            return ctx.splat(self.src.chunk(ctx, row, 1), w)
        if last == 1:
            return self.src.chunk(ctx, b.add(row, idx[-1]), w)
        return self.gather(ctx, ctx.iota_from(f, w))

    def gather(self, ctx, idx):
        b = ctx.b
        n = idx.type.count
        parts = ctx.unflatten(idx, self.type.shape)
        src = ctx.splat(ir.Constant(I64, 0), n)
        for d, s in enumerate(self.strides):
            if s:
                src = b.add(src, b.mul(parts[d], ctx.splat(ir.Constant(I64, s), n)))
        return self.src.gather(ctx, src)

    def reads(self):
        return self.src.reads()


# ---------------------------------------------------------------- address structure
@dataclass
class Term:
    """``coeff * vec[i]``: ``vec`` a 1-D integer tile, ``coeff`` an LLVM integer."""
    vec: TileVal
    coeff: object
    signed: bool = True


@dataclass
class Part:
    """One dim's contribution ``step * i + sum(terms)`` (``step`` None means 0)."""
    step: object = None
    terms: tuple = ()

    def is_affine(self) -> bool:
        return not self.terms


@dataclass
class Sep:
    """``value[i] = base + unit * sum_d parts[d](i_d)`` in ``ity`` (see module doc).

    ``parts[d]`` is None where the value does not vary along dim d.
    """
    base: object
    parts: list
    ity: ir.IntType
    unit: int = 1
    notes: dict = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return len(self.parts)


class SepVal(TileVal):
    """A pointer (or integer) tile evaluated from its :class:`Sep` in ``sep.ity``."""

    def __init__(self, sep: Sep, type: TileType):
        self.sep, self.type = sep, type

    def chunk(self, ctx, f, w):
        shape = self.type.shape
        if w > shape[-1]:
            return self.gather(ctx, ctx.iota_from(f, w))
        idx = ctx.unflatten(f, shape)
        row = ctx.sep_row(self.sep, idx[:-1])
        return ctx.sep_last(self.sep, row, idx[-1], w)

    def gather(self, ctx, idx):
        return ctx.sep_eval_vector(self.sep, ctx.unflatten(idx, self.type.shape))

    def reads(self):
        return [r for p in self.sep.parts if p for t in p.terms for r in t.vec.reads()]

    def cheap(self):
        return True
