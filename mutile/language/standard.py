"""The DSL's builtins, with Triton's names and arguments (``import mutile.language as ml``).

Each is usable only inside ``@mutile.jit`` code, where the frontend passes the IR
builder as ``_builder``. Shapes and axes must be compile-time constants.
"""
from __future__ import annotations

from ..ir import types as T
from . import semantic as S
from .core import _unwrap, builtin, constexpr, tensor
from .semantic import fail


def _const_int(x, what: str) -> int:
    x = _unwrap(x)
    if isinstance(x, tensor) or not isinstance(x, int) or isinstance(x, bool):
        fail(f"{what} must be a compile-time integer (a constexpr), got {x!r}")
    return x


def _shape(shape, what="shape") -> list:
    shape = _unwrap(shape)
    if isinstance(shape, (int, constexpr)):
        shape = [shape]
    if not isinstance(shape, (list, tuple)):
        fail(f"{what} must be a list of compile-time integers, got {shape!r}")
    dims = [_const_int(d, f"{what} entries") for d in shape]
    for d in dims:
        if d <= 0 or d & (d - 1):
            fail(f"{what} {dims}: every dim must be a power of two")
    return dims


def _dtype(d):
    d = _unwrap(d)
    if not isinstance(d, (T.ScalarType, T.PointerType)):
        fail(f"expected a dtype (e.g. ml.float32), got {d!r}")
    return d


# ---------------------------------------------------------------- indices
def _grid_axis(op: str, axis, b) -> tensor:
    axis = _const_int(axis, "axis")
    if axis not in (0, 1, 2):
        fail(f"{op} axis must be 0, 1 or 2, got {axis}")
    return tensor(b(op, axis=axis))


@builtin
def program_id(axis, _builder=None) -> tensor:
    """This program's index along grid axis ``axis`` (0, 1 or 2)."""
    return _grid_axis("program_id", axis, _builder)


@builtin
def num_programs(axis, _builder=None) -> tensor:
    """The number of programs along grid axis ``axis``."""
    return _grid_axis("num_programs", axis, _builder)


@builtin
def arange(start, end, _builder=None) -> tensor:
    """int32 tile ``[start, ..., end-1]``; ``end - start`` must be a power of two."""
    start, end = _const_int(start, "arange start"), _const_int(end, "arange end")
    n = end - start
    if n <= 0 or n & (n - 1):
        fail(f"arange's range must be a power of two in length, got {n} ({start}..{end})")
    return tensor(_builder("arange", start=start, end=end))


@builtin
def full(shape, value, dtype, _builder=None) -> tensor:
    """A tile of ``shape`` with every element ``value`` converted to ``dtype``; with
    ``shape=()`` (or ``[]``) a scalar, as in Triton."""
    shape, dtype = _shape(shape), _dtype(dtype)
    value = _unwrap(value)
    if isinstance(value, tensor):
        return S.broadcast_to(S.cast(value, dtype, _builder), shape, _builder)
    return S.constant(_builder, value, T.tile_or_scalar(shape, dtype))


@builtin
def zeros(shape, dtype, _builder=None) -> tensor:
    """A tile of ``shape`` filled with zeros of ``dtype``."""
    return full(shape, 0, dtype, _builder=_builder)


@builtin
def zeros_like(x, _builder=None) -> tensor:
    """Zeros with ``x``'s shape and dtype."""
    return full(x.shape, 0, x.dtype, _builder=_builder)


@builtin
def cdiv(x, div, _builder=None):
    """Ceiling division ``(x + div - 1) // div``."""
    if S.is_number(x) and S.is_number(div):
        return constexpr(-(-_unwrap(x) // _unwrap(div)))
    return S.floordiv(S.sub(S.add(x, div, _builder), 1, _builder), div, _builder)


# ---------------------------------------------------------------- memory
@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False, _builder=None) -> tensor:
    """Read the elements ``pointer`` points to. Where ``mask`` is false nothing is read and
    the result is ``other`` (zero without ``other``, as Triton gives in practice)."""
    b = _builder
    p = S.to_tensor(pointer, b)
    if hasattr(_unwrap(pointer), "__mutile_desc__"):
        fail("load() takes pointers; load a tensor descriptor with desc.load([offsets])")
    if not p.dtype.is_ptr():
        fail(f"load() needs a pointer or a tile of pointers, got {p.dtype!r}")
    mask, other = _unwrap(mask), _unwrap(other)
    if mask is None and other is not None:
        other = None
    ops = []
    if mask is not None:
        m = S.as_bool(mask, b)
        shape = S.broadcast_shapes(p.shape, m.shape)
        p, m = S.broadcast_to(p, shape, b), S.broadcast_to(m, shape, b)
        ops.append(m.handle)
        if other is not None:
            o = S.cast(S.to_tensor_typed(other, p.dtype.element_ty, b), p.dtype.element_ty, b)
            ops.append(S.broadcast_to(o, p.shape, b).handle)
    attrs = {"volatile": True} if volatile else {}
    return tensor(b.create("load", [p.handle] + ops, None, attrs).result)


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="",
          _builder=None) -> None:
    """Write ``value`` (converted to the pointed-to type, broadcast to the pointer's shape)
    where ``mask`` holds."""
    b = _builder
    p = S.to_tensor(pointer, b)
    if not p.dtype.is_ptr():
        fail(f"store() needs a pointer or a tile of pointers, got {p.dtype!r}")
    v = S.to_tensor_typed(value, p.dtype.element_ty, b)
    shape = S.broadcast_shapes(p.shape, v.shape)
    m = None
    if _unwrap(mask) is not None:
        m = S.as_bool(mask, b)
        shape = S.broadcast_shapes(shape, m.shape)
        m = S.broadcast_to(m, shape, b)
    p = S.broadcast_to(p, shape, b)
    v = S.broadcast_to(S.cast(v, p.dtype.element_ty, b), shape, b)
    b.create("store", [p.handle, v.handle] + ([m.handle] if m is not None else []))


# ---------------------------------------------------------------- shapes
@builtin
def broadcast_to(x, *shape, _builder=None) -> tensor:
    """``x`` broadcast to ``shape`` (numpy rules)."""
    if len(shape) == 1 and isinstance(_unwrap(shape[0]), (list, tuple)):
        shape = _unwrap(shape[0])
    return S.broadcast_to(S.to_tensor(x, _builder), _shape(shape), _builder)


@builtin
def broadcast(x, y, _builder=None):
    """``x`` and ``y`` broadcast to their common shape."""
    return S.broadcast_pair(S.to_tensor(x, _builder), S.to_tensor(y, _builder), _builder)


@builtin
def expand_dims(x, axis, _builder=None) -> tensor:
    """``x`` with a new size-1 dim at ``axis`` (or at each of a sequence of axes)."""
    x = S.to_tensor(x, _builder)
    axes = _unwrap(axis)
    axes = [axes] if not isinstance(axes, (list, tuple)) else list(axes)
    rank = len(x.shape) + len(axes)
    for ax in sorted(_const_int(a, "axis") % rank if _const_int(a, "axis") < 0 else
                     _const_int(a, "axis") for a in axes):
        if not 0 <= ax <= len(x.shape):
            fail(f"expand_dims axis {ax} out of range for shape {x.shape}")
        x = tensor(_builder("expand_dims", x.handle, axis=ax))
    return x


@builtin
def reshape(x, *shape, can_reorder=False, _builder=None) -> tensor:
    """The same elements (row-major order) in a new shape."""
    if len(shape) == 1 and isinstance(_unwrap(shape[0]), (list, tuple)):
        shape = _unwrap(shape[0])
    x = S.to_tensor(x, _builder)
    dims = _shape(shape)
    n = 1
    for d in dims:
        n *= d
    if n != x.numel:
        fail(f"cannot reshape {x.shape} ({x.numel} elements) to {dims} ({n} elements)")
    if dims == x.shape:
        return x
    if not x.shape:
        return S.broadcast_to(x, dims, _builder)
    if not dims:
        fail(f"cannot reshape the tile {x.shape} to a scalar; take its element with ml.sum(x) "
             "or ml.max(x)")
    return tensor(_builder("reshape", x.handle, type=T.TileType(tuple(dims), x.dtype)))


view = reshape


@builtin
def permute(x, *dims, _builder=None) -> tensor:
    """Reorder dims: result dim i is ``x``'s dim ``dims[i]``."""
    if len(dims) == 1 and isinstance(_unwrap(dims[0]), (list, tuple)):
        dims = _unwrap(dims[0])
    x = S.to_tensor(x, _builder)
    order = [_const_int(d, "dims") for d in dims]
    if sorted(order) != list(range(len(x.shape))):
        fail(f"permute order {order} is not a permutation of the {len(x.shape)} dims of {x.shape}")
    if order == sorted(order):
        return x
    return tensor(_builder("permute", x.handle, order=order))


@builtin
def trans(x, *dims, _builder=None) -> tensor:
    """Transpose: swap the two dims of a 2-D tile, or permute by ``dims``."""
    x = S.to_tensor(x, _builder)
    if not dims:
        if len(x.shape) != 2:
            fail(f"trans() without dims needs a 2-D tile, got shape {x.shape}")
        dims = (1, 0)
    return permute(x, *dims, _builder=_builder)


@builtin
def cast(x, dtype, fp_downcast_rounding=None, bitcast=False, _builder=None) -> tensor:
    """``x`` converted to ``dtype`` (reinterpreted with ``bitcast=True``). Float
    conversions round to nearest even (``fp_downcast_rounding`` None or "rtne")."""
    rounding = _unwrap(fp_downcast_rounding)
    if rounding not in (None, "rtne"):
        fail(f"fp_downcast_rounding={rounding!r} is not supported: float conversions round "
             "to nearest even ('rtne')")
    return S.cast(x, _dtype(dtype), _builder, bitcast=bool(_unwrap(bitcast)))


# ---------------------------------------------------------------- elementwise
@builtin
def where(condition, x, y, _builder=None) -> tensor:
    """``x`` where ``condition`` holds, else ``y`` (broadcast, promoted)."""
    return S.where(condition, x, y, _builder)


@builtin
def minimum(x, y, propagate_nan=None, _builder=None) -> tensor:
    """Elementwise minimum; with ``propagate_nan=ml.PropagateNan.ALL`` a NaN wins."""
    return S.minmax("min", x, y, _builder, _unwrap(propagate_nan) == "all")


@builtin
def maximum(x, y, propagate_nan=None, _builder=None) -> tensor:
    """Elementwise maximum; with ``propagate_nan=ml.PropagateNan.ALL`` a NaN wins."""
    return S.minmax("max", x, y, _builder, _unwrap(propagate_nan) == "all")


@builtin
def clamp(x, min, max, propagate_nan=None, _builder=None) -> tensor:
    """``minimum(maximum(x, min), max)``."""
    return S.minmax("min", S.minmax("max", x, min, _builder, _unwrap(propagate_nan) == "all"),
                    max, _builder, _unwrap(propagate_nan) == "all")


def _math(name, doc):
    def fn(x, _builder=None):
        return S.unary_float(name, x, _builder)
    fn.__name__ = name
    fn.__doc__ = doc
    return builtin(fn)


exp = _math("exp", "e ** x, elementwise.")
exp2 = _math("exp2", "2 ** x, elementwise.")
log = _math("log", "Natural logarithm, elementwise.")
log2 = _math("log2", "Base-2 logarithm, elementwise.")
sqrt = _math("sqrt", "Square root (correctly rounded), elementwise.")
sqrt_rn = sqrt
rsqrt = _math("rsqrt", "1 / sqrt(x), elementwise.")
sin = _math("sin", "Sine, elementwise.")
cos = _math("cos", "Cosine, elementwise.")
erf = _math("erf", "The error function, elementwise.")
floor = _math("floor", "Round down, elementwise.")
ceil = _math("ceil", "Round up, elementwise.")
tanh = _math("tanh", "Hyperbolic tangent, elementwise.")


@builtin
def abs(x, _builder=None) -> tensor:
    """|x|, elementwise (integers wrap at the minimum)."""
    x = S.to_tensor(x, _builder)
    if x.dtype.is_int() and x.dtype.kind == "uint" or x.dtype.is_bool():
        return x
    return tensor(_builder("abs", x.handle))


@builtin
def sigmoid(x, _builder=None) -> tensor:
    """1 / (1 + exp(-x)), elementwise."""
    b = _builder
    e = S.unary_float("exp", S.neg(x, b), b)
    return S.truediv(1.0, S.add(1.0, e, b), b)


@builtin
def fma(x, y, z, _builder=None) -> tensor:
    """x * y + z rounded once."""
    return S.fma(x, y, z, _builder)


@builtin
def div_rn(x, y, _builder=None) -> tensor:
    """x / y, correctly rounded."""
    return S.truediv(x, y, _builder)


@builtin
def fdiv(x, y, ieee_rounding=False, _builder=None) -> tensor:
    """x / y for floats."""
    return S.truediv(x, y, _builder)


@builtin
def umulhi(x, y, _builder=None) -> tensor:
    """The high 32 bits of the 64-bit product of two uint32/int32 tiles."""
    b = _builder
    x, y = S._prepare(x, y, b)
    if x.dtype not in (T.i32, T.u32):
        fail(f"umulhi needs 32-bit integers, got {x.dtype!r}")
    w = S.mul(S.cast(S.cast(x, T.u32, b), T.u64, b), S.cast(S.cast(y, T.u32, b), T.u64, b), b)
    return S.cast(S.bitwise("shr", w, 32, b), x.dtype, b)


class PropagateNan:
    """Triton's NaN policy for minimum/maximum/clamp."""
    NONE = "none"
    ALL = "all"


# ---------------------------------------------------------------- Triton's compile-time helpers
# Published kernels import these from ``triton.language.standard`` (bitonic sorts:
# ``n_dims: tl.constexpr = _log2(x.shape[-1])``). Plain Python: they run at compile time.
def _unwrap_if_constexpr(o):
    """``o``'s value if it is a constexpr, else ``o``."""
    return _unwrap(o)


def _log2(i):
    """floor(log2(i)) of a compile-time integer ``i`` >= 1, as a constexpr (0 for 1)."""
    n = _unwrap(i)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        fail(f"_log2 needs a compile-time integer >= 1, got {n!r}")
    return constexpr(n.bit_length() - 1)


def _is_power_of_two(i):
    """Whether the compile-time integer ``i`` is a power of two, as a constexpr."""
    n = _unwrap(i)
    return constexpr(isinstance(n, int) and n > 0 and n & (n - 1) == 0)
