"""Moving whole elements between the positions of a tile, exactly, with the IR's own ops.

The builtins composed in :mod:`.combine`, :mod:`.shapes`, :mod:`.sorting` and :mod:`.mx`
(reduce with a combine function, scans, sort, join/split, gather, batched dot...) need
no op of their own: they take halves of a tile, put two tiles side by side and swap
pairs of elements, and this file says how, once. An element moves as the integer of its
width (:func:`as_bits`): a select plus an ``or``/``xor`` reduction carries every bit —
NaN payloads, -0.0, pointers — so each backend's existing ops do the work bit for bit.
None of these are builtins; each takes the IR builder ``b``.
"""
from __future__ import annotations

from ..ir import types as T
from . import semantic as S
from .core import tensor
from .semantic import fail

_INT_OF_WIDTH = {8: T.i8, 16: T.i16, 32: T.i32, 64: T.i64}


def log2_exact(n: int, what: str) -> int:
    """log2 of the power of two ``n`` (``what`` names it in the error)."""
    if n <= 0 or n & (n - 1):
        fail(f"{what} must be a power of two, got {n}")
    return n.bit_length() - 1


def as_bits(x: tensor, b) -> tensor:
    """``x`` reinterpreted as signed integers of its width (bool and integers as they are;
    pointers as int64)."""
    t = x.dtype
    if t.is_ptr():
        return tensor(b("bitcast", x.handle, to=T.i64))
    if t.is_int():
        return x
    return tensor(b("bitcast", x.handle, to=_INT_OF_WIDTH[t.bits]))


def from_bits(bits: tensor, dtype, b) -> tensor:
    """Undo :func:`as_bits`: ``bits`` read back as ``dtype``."""
    if bits.dtype == dtype:
        return bits
    return tensor(b("bitcast", bits.handle, to=dtype))


def reshape(x: tensor, shape, b) -> tensor:
    """The same elements, row-major, in ``shape`` (``[]``: the one element as a scalar)."""
    shape = list(shape)
    if x.shape == shape:
        return x
    if not x.shape:
        return S.broadcast_to(x, shape, b)
    if not shape:
        return drop_axis(x, 0, b)
    return tensor(b("reshape", x.handle, type=T.TileType(tuple(shape), x.dtype)))


def position(shape, axis: int, b) -> tensor:
    """int32 tile counting 0..shape[axis]-1 along ``axis``, size 1 on every other axis."""
    n = shape[axis]
    ar = tensor(b("arange", start=0, end=n))
    dims = [1] * len(shape)
    dims[axis] = n
    return reshape(ar, dims, b)


def at(shape, axis: int, k: int, b) -> tensor:
    """i1 tile of ``shape``: true where the index along ``axis`` is ``k``."""
    return S.broadcast_to(S.compare("eq", position(shape, axis, b), k, b), list(shape), b)


def _or_reduce(bits: tensor, axis: int, b) -> tensor:
    return tensor(b("reduce", bits.handle, axis=axis, kind="or"))


def take(x: tensor, axis: int, k: int, b) -> tensor:
    """Index ``k`` of ``x``'s size-2 (or size-1) ``axis``; that axis disappears."""
    bits = as_bits(x, b)
    zero = S.constant(b, 0, bits.type)
    if x.shape[axis] > 1:
        bits = tensor(b("select", at(x.shape, axis, k, b).handle, bits.handle, zero.handle))
    return from_bits(_or_reduce(bits, axis, b), x.dtype, b)


def drop_axis(x: tensor, axis: int, b) -> tensor:
    """``x`` without its size-1 ``axis`` (a scalar when it was the only one)."""
    if x.shape[axis] != 1:
        fail(f"internal: axis {axis} of {x.shape} is not of size 1")
    if len(x.shape) > 1:
        shape = x.shape[:axis] + x.shape[axis + 1:]
        return tensor(b("reshape", x.handle, type=T.TileType(tuple(shape), x.dtype)))
    return take(x, 0, 0, b)


def stack(lo: tensor, hi: tensor, axis: int, b) -> tensor:
    """``lo`` and ``hi`` (one type) as index 0 and 1 of a new size-2 ``axis``."""
    shape = list(lo.shape)
    shape.insert(axis, 2)
    if lo.shape:
        lo, hi = (tensor(b("expand_dims", v.handle, axis=axis)) for v in (lo, hi))
    lo, hi = S.broadcast_to(lo, shape, b), S.broadcast_to(hi, shape, b)
    return tensor(b("select", at(shape, axis, 0, b).handle, lo.handle, hi.handle))


def halves(x: tensor, axis: int, b) -> tuple:
    """``x`` cut along ``axis`` (even size) into its first and second half."""
    n = x.shape[axis]
    cut = reshape(x, x.shape[:axis] + [2, n // 2] + x.shape[axis + 1:], b)
    return take(cut, axis, 0, b), take(cut, axis, 1, b)


def pairs(x: tensor, axis: int, b) -> tuple:
    """``x``'s elements at even and at odd indices along ``axis`` (even size)."""
    n = x.shape[axis]
    cut = reshape(x, x.shape[:axis] + [n // 2, 2] + x.shape[axis + 1:], b)
    return take(cut, axis + 1, 0, b), take(cut, axis + 1, 1, b)


def concat(lo: tensor, hi: tensor, axis: int, b) -> tensor:
    """``lo`` then ``hi`` along ``axis`` (the inverse of :func:`halves`)."""
    s = stack(lo, hi, axis, b)
    shape = list(lo.shape)
    shape[axis] *= 2
    return reshape(s, shape, b)


def unstack(x: tensor, b) -> list:
    """The ``x.shape[0]`` slices of ``x`` along axis 0 (by halving; a power of two)."""
    n = x.shape[0]
    if n == 1:
        return [drop_axis(x, 0, b)]
    lo, hi = halves(x, 0, b)
    return unstack(lo, b) + unstack(hi, b)


def restack(parts: list, b) -> tensor:
    """The inverse of :func:`unstack`: ``parts`` (one type) as the slices of axis 0."""
    if len(parts) == 1:
        p = parts[0]
        return reshape(p, [1] + p.shape, b)
    half = len(parts) // 2
    return concat(restack(parts[:half], b), restack(parts[half:], b), 0, b)


def swap_pairs(x: tensor, axis: int, b) -> tensor:
    """Each element exchanged with its partner along the size-2 ``axis``: the xor of the
    pair, xored with the element, is the other one."""
    bits = as_bits(x, b)
    kept = list(x.shape)
    kept[axis] = 1
    pair = reshape(tensor(b("reduce", bits.handle, axis=axis, kind="xor")), kept, b)
    pair = S.broadcast_to(pair, x.shape, b)
    return from_bits(tensor(b("xor", bits.handle, pair.handle)), x.dtype, b)


def flip_axis(x: tensor, axis: int, b) -> tensor:
    """``x`` reversed along ``axis`` (a power-of-two size): viewing that axis as a cube
    of size-2 axes, every one of them swapped."""
    n = x.shape[axis]
    steps = log2_exact(n, f"the size of the flipped dim ({x.shape})")
    if steps == 0:
        return x
    cube = reshape(x, x.shape[:axis] + [2] * steps + x.shape[axis + 1:], b)
    for i in range(steps):
        cube = swap_pairs(cube, axis + i, b)
    return reshape(cube, x.shape, b)


def move_axis(x: tensor, src: int, dst: int, b) -> tensor:
    """``x`` with axis ``src`` moved to position ``dst``."""
    if src == dst:
        return x
    order = [i for i in range(len(x.shape)) if i != src]
    order.insert(dst, src)
    return tensor(b("permute", x.handle, order=order))


def is_nan(x: tensor, b) -> tensor:
    """i1: ``x != x`` for floats, false for everything else."""
    if not x.dtype.is_floating():
        return S.broadcast_to(S.constant(b, False, T.i1), x.shape, b)
    return S.compare("ne", x, x, b)


def greater(x: tensor, y: tensor, b) -> tensor:
    """i1: ``x > y``, with NaN above every number (so sorting gathers NaNs at one end)."""
    gt = S.compare("gt", x, y, b)
    if not x.dtype.is_floating():
        return gt
    nan_x, nan_y = is_nan(x, b), is_nan(y, b)
    return S.bitwise("or", gt, S.bitwise("and", nan_x, S.logical_not(nan_y, b), b), b)
