"""Shape ops: splat, expand_dims, reshape, broadcast, permute.

``expand_dims`` and ``reshape`` keep the row-major order, so in the block layout they
move nothing. ``splat`` (and ``broadcast`` of a uniform) stays uniform. ``broadcast`` and
``permute`` of a register tile move elements between threads: a gather through shared
memory whose source index is computed from the destination coordinates with shifts and
masks (every dim is a power of two).
"""
from __future__ import annotations

from mutile.ir import types as T

from .. import recipe
from .elementwise import emit_recipe
from ..context import Codegen, lowers
from ..values import PtrTile, TileVal, Uniform, log2, numel
from ...isa.operands import IntImm


def reshaped(val, shape: tuple):
    """``val`` with a new shape of the same row-major order (no data moves)."""
    if isinstance(val, TileVal):
        return TileVal(val.vreg, shape, val.ty, val.E, val.w, val.recipe)
    if isinstance(val, Uniform):
        return Uniform(val.src, shape, val.ty)
    if isinstance(val, PtrTile):
        return PtrTile(val.base, reshaped(val.off, shape), shape, val.ty)
    raise TypeError(type(val).__name__)


def source_index(cg: Codegen, idx: TileVal, dst_shape: tuple, src_shape: tuple,
                 src_dim_of) -> TileVal:
    """i32 tile: the row-major index into ``src_shape`` of the element that destination
    index ``idx`` reads, where source dim ``s`` takes destination coordinate
    ``src_dim_of[s]`` (None: coordinate 0)."""
    out = cg.new_tile(dst_shape, T.i32)
    first = True
    for s, d in enumerate(src_dim_of):
        if d is None or src_shape[s] == 1:
            continue
        c = cg.coord(idx, dst_shape, d)
        inner = numel(src_shape[s + 1:])
        if inner > 1:
            cg.emit("ALU.SHL.B32", c.run(), c.run(), IntImm(log2(inner)))
        if first:
            out = c
            first = False
        else:
            cg.emit("ALU.LOP.OR.B32", out.run(), out.run(), c.run())
    if first:
        cg.emit("ALU.MOV.IMM", out.run(0, 1), IntImm(0)) if out.E == 1 else \
            cg.emit("ALU.LOP.AND.B32", out.run(), idx.run(), IntImm(0))
    return out


def broadcast_to(cg: Codegen, val, shape: tuple):
    """``val`` broadcast to ``shape`` (dims of size 1 repeat; leading dims may be added)."""
    if isinstance(val, Uniform):
        return Uniform(val.src, shape, val.ty)
    if isinstance(val, PtrTile):
        return PtrTile(val.base, broadcast_to(cg, val.off, shape), shape, val.ty)
    if tuple(val.shape) == tuple(shape):
        return val
    if numel(val.shape) == 1:
        return Uniform(val.run(0, 1), shape, val.ty)
    src_shape = (1,) * (len(shape) - len(val.shape)) + tuple(val.shape)
    dims = [None if src_shape[s] == 1 else s for s in range(len(shape))]
    r = recipe.remap(val.recipe, recipe.broadcast_bits(src_shape, shape))
    if r is not None:                        # recompute it where it is needed
        return emit_recipe(cg, r, shape, val.ty)
    if own_rows(cg, val, src_shape, shape):
        return cg.materialize(Uniform(val.run(0, 1), shape, val.ty))
    src = reshaped(val, src_shape)
    return cg.gather(src, shape, lambda idx: source_index(cg, idx, shape, src_shape, dims))


def own_rows(cg: Codegen, val: TileVal, src_shape: tuple, shape: tuple) -> bool:
    """Whether broadcasting ``val`` (one element per thread, e.g. a row statistic
    ``[R]`` on ``R`` threads) to ``shape`` only repeats each thread's element over the
    destination elements it holds itself (``[R, C]``: thread ``t`` holds row ``t``), so
    one MOV per thread does it, with no move through shared memory."""
    if val.E != 1 or numel(src_shape) != cg.threads:
        return False
    k = len(shape)
    while k and src_shape[k - 1] == 1:
        k -= 1
    return all(src_shape[d] == shape[d] for d in range(k))


@lowers("splat")
def lower_splat(cg: Codegen, op) -> None:
    x = cg.as_uniform(cg.get(op.operands[0]))
    cg.bind(op.results[0], Uniform(x.src, op.results[0].type.shape, x.ty))


@lowers("expand_dims", "reshape")
def lower_reshape(cg: Codegen, op) -> None:
    cg.bind(op.results[0], reshaped(cg.get(op.operands[0]), op.results[0].type.shape))


@lowers("broadcast")
def lower_broadcast(cg: Codegen, op) -> None:
    cg.bind(op.results[0], broadcast_to(cg, cg.get(op.operands[0]),
                                        op.results[0].type.shape))


def permuted(cg: Codegen, val, order: tuple, shape: tuple):
    """``val`` with its dims reordered (result dim ``k`` is source dim ``order[k]``)."""
    if isinstance(val, Uniform):
        return Uniform(val.src, shape, val.ty)
    if isinstance(val, PtrTile):
        return PtrTile(val.base, permuted(cg, val.off, order, shape), shape, val.ty)
    if numel(shape) == 1 or list(order) == sorted(order):
        return reshaped(val, shape)
    src_shape = tuple(val.shape)
    dims = [order.index(s) for s in range(len(order))]
    r = recipe.remap(val.recipe, recipe.permute_bits(src_shape, tuple(order), shape))
    if r is not None:
        return emit_recipe(cg, r, shape, val.ty)
    return cg.gather(val, shape, lambda idx: source_index(cg, idx, shape, src_shape, dims))


@lowers("permute")
def lower_permute(cg: Codegen, op) -> None:
    cg.bind(op.results[0], permuted(cg, cg.get(op.operands[0]), tuple(op.attrs["order"]),
                                    op.results[0].type.shape))
