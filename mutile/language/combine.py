"""Builtins that call a user's ``@jit`` function on tiles: ``reduce`` and
``associative_scan`` with a combine function, and ``map_elementwise``.

Triton builds a region from the combine function and runs it on scalars; mutile calls
the function on whole tiles — every pair of a level at once — so the IR needs no new op
and both backends run what they already run (the halves and pairs come from
:mod:`.compose`). The frontend passes such builtins ``_call_jit(fn, *args)``, which
emits a call of the ``@jit`` function (inlined later) and returns its results.

* ``reduce``: a tree over adjacent pairs (``x[2i]`` with ``x[2i+1]``, then again on the
  results), so a combine that is associative but not commutative (an argmax with a
  tie-break, a matrix product) combines its arguments in index order, as Triton's does.
* ``associative_scan``: the work-efficient scan (Blelloch's), inclusive: level by level
  the pairs are combined, the half-size result scanned, and each even element gets the
  exclusive prefix of its pair. ``reverse=True`` scans the reversed axis and reverses
  the result back, as Triton does (the later elements are the left argument).
"""
from __future__ import annotations

from . import compose as C
from . import semantic as S
from .core import _unwrap, builtin, is_builtin, tensor
from .semantic import fail


def calls_jit(fn):
    """Mark builtin ``fn`` as one that calls ``@jit`` functions: the frontend then passes
    it ``_call_jit``."""
    fn.__mutile_calls_jit__ = True
    return fn


def _name(fn) -> str:
    fn = getattr(fn, "fn", fn)
    return getattr(fn, "__name__", repr(fn))


def _check_fn(fn, what: str, role: str = "combine_fn"):
    fn = _unwrap(fn)
    if not (getattr(fn, "__mutile_jit__", False) or is_builtin(fn)):
        fail(f"{what}: {role} must be a @mutile.jit function (or a mutile.language builtin), "
             f"got {fn!r}")
    return fn


def _call(fn, args: list, call_jit, b, what: str):
    """``fn(*args)`` as a list of results: a builtin directly, a ``@jit`` function
    through the frontend."""
    if is_builtin(fn):
        r = fn(*args, _builder=b)
    elif call_jit is None:
        fail(f"{what} must be called from kernel code to call the @jit function {_name(fn)}")
    else:
        r = call_jit(fn, *args)
    if r is None:
        fail(f"{what}: {_name(fn)} returned nothing")
    return list(r) if isinstance(r, tuple) else [r]


class _Combiner:
    """The user's combine function as a function of two lists of tiles."""

    def __init__(self, fn, like: list, call_jit, b, what: str):
        self.fn, self.dtypes, self.call_jit, self.b, self.what = fn, [x.dtype for x in like], \
            call_jit, b, what

    def __call__(self, lhs: list, rhs: list) -> list:
        b = self.b
        got = _call(self.fn, lhs + rhs, self.call_jit, b, self.what)
        if len(got) != len(lhs):
            fail(f"{self.what}: combine_fn {_name(self.fn)} returned {len(got)} values for "
                 f"{len(lhs)} inputs")
        out = []
        for i, (v, like, dt) in enumerate(zip(got, lhs, self.dtypes)):
            v = S.to_tensor_typed(v, dt, b)
            if v.dtype != dt:
                fail(f"{self.what}: combine_fn {_name(self.fn)} returned {v.dtype!r} for "
                     f"input {i} of type {dt!r}; it must return the inputs' types "
                     f"(convert with .to())")
            out.append(S.broadcast_to(v, like.shape, b))
        return out


def _inputs(input, what: str, b) -> tuple:
    """(list of tiles of one shape, whether ``input`` was a single tensor)."""
    value = _unwrap(input)
    single = not isinstance(value, (tuple, list))
    xs = [S.to_tensor(v, b) for v in ([value] if single else value)]
    if not xs:
        fail(f"{what} needs at least one tensor")
    for x in xs:
        if x.shape != xs[0].shape:
            fail(f"{what}: every input must have one shape, got "
                 + " and ".join(str(v.shape) for v in xs))
    if not xs[0].shape:
        fail(f"{what} needs tiles, got a scalar")
    return xs, single


def _axis(shape, axis, what: str, allow_none: bool):
    axis = _unwrap(axis)
    if axis is None and allow_none:
        return None
    if isinstance(axis, bool) or not isinstance(axis, int):
        fail(f"{what}: axis must be a compile-time integer, got {axis!r}")
    if not -len(shape) <= axis < len(shape):
        fail(f"{what}: axis {axis} out of range for shape {shape}")
    return axis % len(shape)


@calls_jit
@builtin
def reduce(input, axis, combine_fn, keep_dims=False, _builder=None, _call_jit=None):
    """Combine the elements of ``input`` (a tile, or a tuple of tiles of one shape) along
    ``axis`` (all axes if None) with ``combine_fn(a0, .., b0, ..) -> (c0, ..)``, a
    ``@jit`` function that must be associative; ``keep_dims`` keeps the reduced axes
    with size 1. A tuple input gives a tuple of results."""
    b = _builder
    xs, single = _inputs(input, "reduce", b)
    fn = _check_fn(combine_fn, "reduce")
    shape = xs[0].shape
    ax = _axis(shape, axis, "reduce", allow_none=True)
    if ax is None:
        xs = [C.reshape(x, [x.numel], b) for x in xs]
    k = 0 if ax is None else ax
    combine = _Combiner(fn, xs, _call_jit, b, "reduce")
    while xs[0].shape[k] > 1:
        cut = [C.pairs(x, k, b) for x in xs]
        xs = combine([p[0] for p in cut], [p[1] for p in cut])
    xs = [C.drop_axis(x, k, b) for x in xs]
    if _unwrap(keep_dims):
        kept = [1] * len(shape) if ax is None else shape[:ax] + [1] + shape[ax + 1:]
        xs = [C.reshape(x, kept, b) for x in xs]
    return xs[0] if single else tuple(xs)


def _exclusive(xs: list, axis: int, combine, b) -> list:
    """The exclusive scan of ``xs`` along ``axis``: position i holds the combination of
    positions 0..i-1; position 0 holds a placeholder (it has no prefix)."""
    n = xs[0].shape[axis]
    if n == 1:
        return xs
    cut = [C.pairs(x, axis, b) for x in xs]
    even, odd = [p[0] for p in cut], [p[1] for p in cut]
    prefix = _exclusive(combine(even, odd), axis, combine, b)   # of pairs 0..i-1
    if n == 2:
        second = even
    else:
        empty = C.at(prefix[0].shape, axis, 0, b)           # pair 0 has no prefix
        joined = combine(prefix, even)
        second = [S.where(empty, e, j, b) for e, j in zip(even, joined)]
    return [C.reshape(C.stack(p, s, axis + 1, b), x.shape, b)
            for p, s, x in zip(prefix, second, xs)]


def scan(xs: list, axis: int, combine, reverse: bool, b) -> list:
    """Inclusive scan of the tiles ``xs`` along ``axis`` with ``combine`` (lists to list)."""
    if reverse:
        xs = [C.flip_axis(x, axis, b) for x in xs]
    if xs[0].shape[axis] > 1:
        prefix = _exclusive(xs, axis, combine, b)
        first = C.at(xs[0].shape, axis, 0, b)
        joined = combine(prefix, xs)
        xs = [S.where(first, x, j, b) for x, j in zip(xs, joined)]
    if reverse:
        xs = [C.flip_axis(x, axis, b) for x in xs]
    return xs


@calls_jit
@builtin
def associative_scan(input, axis, combine_fn, reverse=False, _builder=None, _call_jit=None):
    """Inclusive scan of ``input`` (a tile, or a tuple of tiles of one shape) along
    ``axis``: element i is ``combine_fn`` folded over elements 0..i (over i..n-1 with
    ``reverse=True``). ``combine_fn(a0, .., b0, ..) -> (c0, ..)`` is a ``@jit``
    function that must be associative."""
    b = _builder
    xs, single = _inputs(input, "associative_scan", b)
    fn = _check_fn(combine_fn, "associative_scan")
    ax = _axis(xs[0].shape, axis, "associative_scan", allow_none=False)
    C.log2_exact(xs[0].shape[ax], "associative_scan: the scanned dim's size")
    combine = _Combiner(fn, xs, _call_jit, b, "associative_scan")
    out = scan(xs, ax, combine, bool(_unwrap(reverse)), b)
    return out[0] if single else tuple(out)


@calls_jit
@builtin
def map_elementwise(scalar_fn, *args, pack=1, _builder=None, _call_jit=None):
    """``scalar_fn`` applied to every element of ``args`` (broadcast to one shape); one
    result or a tuple. mutile calls ``scalar_fn`` once on the whole tiles (its ops are
    elementwise), so branches inside it cannot test element values (use ``ml.where``).
    With ``pack=p`` each call receives ``p`` consecutive elements of every argument
    (``a0..a(p-1), b0..``) and returns ``p`` results per output."""
    b = _builder
    fn = _check_fn(scalar_fn, "map_elementwise", "scalar_fn")
    pack = _unwrap(pack)
    if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
        fail(f"map_elementwise: pack must be a positive integer, got {pack!r}")
    if not args:
        fail("map_elementwise needs at least one tensor argument")
    ts = [S.to_tensor(a, b) for a in args]
    shape = []
    for t in ts:
        shape = S.broadcast_shapes(shape, t.shape)
    ts = [S.broadcast_to(t, shape, b) for t in ts]
    if pack == 1:
        return _single(_call_mapped(fn, ts, _call_jit, b))
    steps = C.log2_exact(pack, "map_elementwise: pack")
    numel = ts[0].numel if shape else 1
    if numel % pack:
        fail(f"map_elementwise: pack={pack} does not divide the {numel} elements of {shape}")
    parts = [_unpack(C.reshape(t, [numel // pack] + [2] * steps, b), steps, b) for t in ts]
    got = _call_mapped(fn, [p for ps in parts for p in ps], _call_jit, b)
    if len(got) % pack:
        fail(f"map_elementwise: {_name(fn)} returned {len(got)} values, not a multiple of "
             f"pack={pack}")
    outs = []
    for o in range(len(got) // pack):
        vals = [S.broadcast_to(S.to_tensor(v, b), [numel // pack], b)
                for v in got[o * pack:(o + 1) * pack]]
        if any(v.dtype != vals[0].dtype for v in vals):
            fail(f"map_elementwise: the {pack} packed results of output {o} differ in type")
        outs.append(C.reshape(_repack(vals, b), shape, b))
    return _single(outs)


def _single(xs: list):
    return xs[0] if len(xs) == 1 else tuple(xs)


def _call_mapped(fn, args, call_jit, b) -> list:
    from ..errors import CompilationError
    try:
        return _call(fn, args, call_jit, b, "map_elementwise")
    except CompilationError as e:
        if "a condition must be a scalar" not in e.msg:
            raise
        raise CompilationError(e.msg + f" (ml.map_elementwise calls {_name(fn)} once on whole "
                               "tiles, so its branches cannot test element values)",
                               e.loc) from None


def _unpack(cube: tensor, steps: int, b) -> list:
    """The 2**steps slices of ``cube`` ([n, 2, .., 2]) along its trailing size-2 axes, in
    row-major order."""
    if steps == 0:
        return [cube]
    lo, hi = C.take(cube, 1, 0, b), C.take(cube, 1, 1, b)
    return _unpack(lo, steps - 1, b) + _unpack(hi, steps - 1, b)


def _repack(vals: list, b) -> tensor:
    """The inverse of :func:`_unpack`: the [n] tiles ``vals`` as the columns of an
    [n, len(vals)] tile."""
    if len(vals) == 1:
        return C.reshape(vals[0], vals[0].shape + [1], b)
    half = len(vals) // 2
    lo, hi = _repack(vals[:half], b), _repack(vals[half:], b)
    s = C.stack(lo, hi, 1, b)
    return C.reshape(s, [s.shape[0], 2 * half], b)
