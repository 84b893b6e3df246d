"""``sort``, ``topk``, ``bitonic_merge``, ``flip`` and ``histogram``, composed of
existing ops as Triton's standard library composes them.

Sorting is a bitonic network on the tile viewed as a cube of size-2 axes: each
compare-and-swap stage pairs every element with its partner along one of those axes
(:func:`~.compose.swap_pairs`) and keeps the smaller or larger. Each pair is compared
once, from the left element's side, so the pair is always permuted, never duplicated;
NaN counts as larger than every number (ascending sorts put NaNs last, as numpy does).
``topk`` is Triton's bitonic top-k: sort runs of k, then repeatedly keep the larger of
two runs elementwise and merge.
"""
from __future__ import annotations

from ..ir import types as T
from . import compose as C
from . import semantic as S
from .core import _unwrap, builtin, tensor
from .semantic import fail


def _sort_dim(x: tensor, dim, what: str) -> int:
    if not x.shape:
        fail(f"{what} needs a tile, got a scalar")
    dim = _unwrap(dim)
    if dim is None:
        return len(x.shape) - 1
    if isinstance(dim, bool) or not isinstance(dim, int) or not -len(x.shape) <= dim < len(x.shape):
        fail(f"{what}: dim must be None or an integer in [-{len(x.shape)}, {len(x.shape)}), "
             f"got {dim!r}")
    return dim % len(x.shape)


def _compare_and_swap(h: tensor, flip, axis: int, b) -> tensor:
    """One network stage on the cube ``h`` along its size-2 ``axis``: each pair (l, r)
    becomes (min, max), or (max, min) where ``flip`` holds."""
    y = C.swap_pairs(h, axis, b)
    right = C.at(h.shape, axis, 1, b)
    # the pair's own order, seen from the left element (x, y) and the right one (y, x)
    out_of_order = S.where(right, C.greater(y, h, b), C.greater(h, y, b), b)
    swap = S.bitwise("xor", out_of_order, flip, b)
    return S.where(swap, y, h, b)


def _direction(h: tensor, stage: int, order, b):
    """What ``flip`` is for ``stage``: constant (0 ascending, 1 descending), or, for the
    alternating order of the inner stages, bit ``stage`` of each element's index."""
    if order != 2:
        return S.constant(b, bool(order), T.i1)
    n_dims = len(h.shape)
    return S.compare("eq", C.position(h.shape, n_dims - 1 - stage, b), 1, b)


def _merge(h: tensor, stage: int, order, b) -> tensor:
    """Sort every bitonic run of 2**stage elements of the cube ``h`` in ``order``."""
    if stage == 0:
        return h
    flip = _direction(h, stage, order, b)
    n_dims = len(h.shape)
    for i in range(stage):
        h = _compare_and_swap(h, flip, n_dims - 1 - (stage - 1 - i), b)
    return h


def _larger(h: tensor, axis: int, descending: bool, b) -> tensor:
    """Elementwise the larger (smaller if not ``descending``) of the two halves of the
    cube ``h`` along its size-2 ``axis``."""
    lo, hi = C.take(h, axis, 0, b), C.take(h, axis, 1, b)
    pick_hi = C.greater(hi, lo, b) if descending else C.greater(lo, hi, b)
    return S.where(pick_hi, hi, lo, b)


def _sort_last(x: tensor, k, descending: bool, b) -> tensor:
    """Sort ``x`` along its last dim, or keep its ``k`` first elements of that order."""
    n = x.shape[-1]
    log_n = C.log2_exact(n, "the sorted dim's size")
    log_k = log_n if k is None else C.log2_exact(k, "topk's k")
    n_dims = C.log2_exact(x.numel, "the tile's size")
    h = C.reshape(x, [2] * n_dims, b) if n_dims else x
    for i in range(1, log_k + 1):
        h = _merge(h, i, 2 if i < log_n else descending, b)
    for i in range(log_k + 1, log_n + 1):
        h = _larger(h, len(h.shape) - 1 - log_k, descending, b)
        h = _merge(h, log_k, 2 if i < log_n else descending, b)
    return C.reshape(h, x.shape[:-1] + [1 << log_k], b)


def _along(x: tensor, dim: int, fn, b) -> tensor:
    """``fn`` (which works on the last dim) applied along ``dim``."""
    last = len(x.shape) - 1
    return C.move_axis(fn(C.move_axis(x, dim, last, b)), last, dim, b)


@builtin
def sort(x, dim=None, descending=False, _builder=None) -> tensor:
    """``x`` sorted along ``dim`` (default: the last), ascending or ``descending``; NaNs
    go last (first when descending). The dim's size must be a power of two."""
    b = _builder
    x = S.to_tensor(x, b)
    d = _sort_dim(x, dim, "sort")
    return _along(x, d, lambda t: _sort_last(t, None, bool(_unwrap(descending)), b), b)


@builtin
def topk(x, k, dim=None, descending=True, _builder=None) -> tensor:
    """The ``k`` largest elements of ``x`` along ``dim`` (default: the last), largest
    first; the ``k`` smallest, smallest first, with ``descending=False``. ``k`` is a
    power of two no larger than the dim."""
    b = _builder
    x = S.to_tensor(x, b)
    d = _sort_dim(x, dim, "topk")
    k = _unwrap(k)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 < k <= x.shape[d]:
        fail(f"topk: k must be a compile-time integer in [1, {x.shape[d]}], got {k!r}")
    return _along(x, d, lambda t: _sort_last(t, k, bool(_unwrap(descending)), b), b)


@builtin
def bitonic_merge(x, dim=None, descending=False, _builder=None) -> tensor:
    """Sort ``x`` along ``dim`` (default: the last) given that it is bitonic there
    (ascending then descending, or the reverse): the last stage of a bitonic sort."""
    b = _builder
    x = S.to_tensor(x, b)
    d = _sort_dim(x, dim, "bitonic_merge")

    def merge(t):
        log_n = C.log2_exact(t.shape[-1], "the merged dim's size")
        n_dims = C.log2_exact(t.numel, "the tile's size")
        h = C.reshape(t, [2] * n_dims, b) if n_dims else t
        return C.reshape(_merge(h, log_n, bool(_unwrap(descending)), b), t.shape, b)
    return _along(x, d, merge, b)


@builtin
def flip(x, dim=None, _builder=None) -> tensor:
    """``x`` reversed along ``dim`` (default: the last; a power-of-two size)."""
    x = S.to_tensor(x, _builder)
    return C.flip_axis(x, _sort_dim(x, dim, "flip"), _builder)


@builtin
def histogram(input, num_bins, mask=None, _builder=None) -> tensor:
    """int32 counts of the values of the 1-D integer tile ``input`` in the bins
    ``0 .. num_bins-1`` (width 1); values outside them, and elements where ``mask`` is
    false, are not counted. ``num_bins`` is a power of two."""
    b = _builder
    x = S.to_tensor(input, b)
    if len(x.shape) != 1 or not x.dtype.is_int() or x.dtype.is_bool():
        fail(f"histogram needs a 1-D integer tile, got {x.type}")
    bins = _unwrap(num_bins)
    if isinstance(bins, bool) or not isinstance(bins, int):
        fail(f"histogram: num_bins must be a compile-time integer, got {bins!r}")
    C.log2_exact(bins, "histogram: num_bins")
    m = None
    if _unwrap(mask) is not None:
        m = S.broadcast_to(S.as_bool(mask, b), x.shape, b)
    return _counts(x, m, bins, b)


#: elements of the [bins, n] match tile one histogram step builds at most (the Pinghu
#: machine reduces it through shared memory)
HISTOGRAM_BUDGET = 8192


def _counts(x: tensor, m, bins: int, b) -> tensor:
    """The histogram of ``x`` where ``m`` (or everywhere), in halves of ``x`` while the
    match tile is too large."""
    n = x.shape[0]
    if bins * n > HISTOGRAM_BUDGET and n > 1:
        (x0, x1), (m0, m1) = C.halves(x, 0, b), (C.halves(m, 0, b) if m is not None
                                               else (None, None))
        return S.add(_counts(x0, m0, bins, b), _counts(x1, m1, bins, b), b)
    wide = [bins, n]
    hit = S.compare("eq", S.broadcast_to(C.reshape(x, [1, n], b), wide, b),
                    S.broadcast_to(C.position(wide, 0, b), wide, b), b)
    if m is not None:
        hit = S.bitwise("and", hit, S.broadcast_to(C.reshape(m, [1, n], b), wide, b), b)
    return tensor(b("reduce", S.cast(hit, T.i32, b).handle, axis=1, kind="sum"))
