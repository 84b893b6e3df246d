"""Triton's shape builtins beyond reshape/permute: ``join``, ``split``, ``interleave``,
``cat``, ``ravel``, ``squeeze``, ``unsqueeze``, ``gather`` and the index helper
``swizzle2d``. All are compositions of existing ops (:mod:`.compose`), exact for every
dtype (elements move as their bits)."""
from __future__ import annotations

from ..ir import types as T
from . import compose as C
from . import semantic as S
from .core import _unwrap, builtin, tensor
from .semantic import fail


def _const_int(x, what: str) -> int:
    x = _unwrap(x)
    if isinstance(x, bool) or not isinstance(x, int):
        fail(f"{what} must be a compile-time integer, got {x!r}")
    return x


def _dim(x, rank: int, what: str) -> int:
    d = _const_int(x, what)
    if not -rank <= d < rank:
        fail(f"{what} {d} out of range for rank {rank}")
    return d % rank


def _same_type(a, c, what: str, b):
    """``a`` and ``c`` as tensors of one dtype (a Python number takes the other's type)."""
    a, c = _unwrap(a), _unwrap(c)
    if isinstance(c, tensor) and not isinstance(a, tensor):
        a = S.to_tensor_typed(a, c.dtype, b)
    a = S.to_tensor(a, b)
    c = S.to_tensor_typed(c, a.dtype, b)
    if a.dtype != c.dtype:
        fail(f"{what} needs two tensors of one dtype, got {a.dtype!r} and {c.dtype!r}")
    return a, c


@builtin
def join(a, b, _builder=None) -> tensor:
    """``a`` and ``b`` (broadcast to one shape) side by side in a new minor dim of size 2:
    shapes (4, 8) and (4, 8) give (4, 8, 2); two scalars give (2,). Inverse of split."""
    bl = _builder
    x, y = _same_type(a, b, "join", bl)
    x, y = S.broadcast_pair(x, y, bl)
    return C.stack(x, y, len(x.shape), bl)


@builtin
def split(a, _builder=None) -> tuple:
    """The two halves of ``a``'s last dim, which must have size 2: (4, 8, 2) gives two
    (4, 8) tensors, (2,) two scalars. Inverse of join."""
    x = S.to_tensor(a, _builder)
    if not x.shape or x.shape[-1] != 2:
        fail(f"split needs a last dim of size 2, got shape {x.shape}")
    ax = len(x.shape) - 1
    return C.take(x, ax, 0, _builder), C.take(x, ax, 1, _builder)


@builtin
def interleave(a, b, _builder=None) -> tensor:
    """``a`` and ``b`` (one shape) interleaved along their last dim: ``[a0, b0, a1, b1..]``,
    i.e. ``join(a, b)`` reshaped to ``a.shape[:-1] + [2 * a.shape[-1]]``."""
    c = join(a, b, _builder=_builder)
    if len(c.shape) == 1:
        return c
    return C.reshape(c, c.shape[:-2] + [2 * c.shape[-2]], _builder)


@builtin
def cat(input, other, can_reorder=False, dim=0, _builder=None) -> tensor:
    """``input`` then ``other`` (one shape and dtype) along ``dim``. mutile always keeps
    the order (``can_reorder`` is accepted and allows nothing more)."""
    b = _builder
    x, y = _same_type(input, other, "cat", b)
    if not x.shape or x.shape != y.shape:
        fail(f"cat needs two tiles of one shape, got {x.shape} and {y.shape}")
    return C.concat(x, y, _dim(dim, len(x.shape), "cat dim"), b)


@builtin
def ravel(x, can_reorder=False, _builder=None) -> tensor:
    """``x`` flattened to one dim, row-major."""
    x = S.to_tensor(x, _builder)
    return C.reshape(x, [x.numel], _builder) if x.shape else x


@builtin
def squeeze(x, dim, _builder=None) -> tensor:
    """``x`` without its size-1 dim ``dim`` (negative counts from the end)."""
    x = S.to_tensor(x, _builder)
    if not x.shape:
        fail("squeeze needs a tile, got a scalar")
    d = _dim(dim, len(x.shape), "squeeze dim")
    if x.shape[d] != 1:
        fail(f"squeeze: dim {d} of shape {x.shape} has size {x.shape[d]}, not 1")
    return C.drop_axis(x, d, _builder)


@builtin
def unsqueeze(x, dim, _builder=None) -> tensor:
    """``x`` with a new size-1 dim at ``dim`` (negative counts from the end of the
    result); the same as ``expand_dims``."""
    x = S.to_tensor(x, _builder)
    d = _dim(dim, len(x.shape) + 1, "unsqueeze dim")
    return C.reshape(x, x.shape[:d] + [1] + x.shape[d:], _builder)


@builtin
def gather(src, index, axis, _builder=None) -> tensor:
    """``out[.., j, ..] = src[.., index[.., j, ..], ..]`` along ``axis``: ``index`` (an
    integer tile of ``src``'s rank, equal to it on every other dim) picks, for each of its
    positions, the element of ``src`` along ``axis``. The result has ``index``'s shape and
    ``src``'s dtype; an index outside ``[0, src.shape[axis])`` gives 0 (Triton leaves it
    undefined). Costs ``index.numel * src.shape[axis]`` selects (in pieces of at most
    :data:`GATHER_BUDGET`)."""
    b = _builder
    s, idx = S.to_tensor(src, b), S.to_tensor(index, b)
    if not idx.dtype.is_int() or idx.dtype.is_bool():
        fail(f"gather: index must be an integer tile, got {idx.dtype!r}")
    if not s.shape or len(idx.shape) != len(s.shape):
        fail(f"gather: src and index need one rank, got shapes {s.shape} and {idx.shape}")
    ax = _dim(axis, len(s.shape), "gather axis")
    for d, (m, n) in enumerate(zip(idx.shape, s.shape)):
        if d != ax and m != n:
            fail(f"gather: index shape {idx.shape} must equal src shape {s.shape} except "
                 f"along axis {ax}")
    return C.from_bits(_gather_bits(C.as_bits(s, b), idx, ax, b), s.dtype, b)


#: elements of the one-hot [.., m, n, ..] tile one gather step builds at most (the Pinghu
#: machine moves a tile between threads through shared memory, 192 KiB a block)
GATHER_BUDGET = 8192


def _gather_bits(bits: tensor, idx: tensor, ax: int, b) -> tensor:
    """gather on integer ``bits``: in pieces of ``idx`` (halved along ``ax`` first, then
    along its largest other dim, with ``bits``) while the one-hot tile is too large."""
    n = bits.shape[ax]
    if idx.numel * n > GATHER_BUDGET and idx.numel > 1:
        d = ax if idx.shape[ax] > 1 else max(range(len(idx.shape)), key=lambda i: idx.shape[i])
        i_lo, i_hi = C.halves(idx, d, b)
        s_lo, s_hi = (bits, bits) if d == ax else C.halves(bits, d, b)
        return C.concat(_gather_bits(s_lo, i_lo, ax, b), _gather_bits(s_hi, i_hi, ax, b), d, b)
    wide = idx.shape[:ax + 1] + [n] + idx.shape[ax + 1:]       # [.., m, n, ..]
    src_w = S.broadcast_to(tensor(b("expand_dims", bits.handle, axis=ax)), wide, b)
    idx_w = S.broadcast_to(tensor(b("expand_dims", idx.handle, axis=ax + 1)), wide, b)
    hit = S.compare("eq", idx_w, S.broadcast_to(C.position(wide, ax + 1, b), wide, b), b)
    picked = tensor(b("select", hit.handle, src_w.handle,
                      S.constant(b, 0, T.TileType(tuple(wide), bits.dtype)).handle))
    return tensor(b("reduce", picked.handle, axis=ax + 1, kind="or"))


@builtin
def swizzle2d(i, j, size_i, size_j, size_g, _builder=None):
    """Map the row-major index (i, j) of a ``size_i x size_j`` grid to the column-major
    order within groups of ``size_g`` rows (the last group may be shorter): the program
    order of Triton's grouped matmul. Returns ``(new_i, new_j)``."""
    b = _builder
    ij = S.add(S.mul(i, size_j, b), j, b)
    size_gj = S.mul(size_g, size_j, b)
    off_i = S.mul(S.floordiv(ij, size_gj, b), size_g, b)
    rows = S.minmax("min", S.sub(size_i, off_i, b), size_g, b)
    ij = S.mod(ij, size_gj, b)
    return S.add(off_i, S.mod(ij, rows, b), b), S.floordiv(ij, rows, b)
