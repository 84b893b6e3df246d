"""What the DSL's operations mean: type promotion, broadcasting, and the IR they emit.

The rules are Triton's: a Python number combined with a tensor takes the tensor's kind
when it can (``x_f16 * 2.0`` stays f16; a numpy scalar is the Python number it holds, see
:func:`~mutile.language.core.python_value`), two Python numbers meet at their literals'
types (``where(m, 0, -1.0e6)`` is f32); then f64, f32, f16 win in that order (``/`` and
``%`` on halves compute in f32); bf16 stays bf16 only with bf16, else f32; fp8 computes
as f16; integers widen, and mixing signedness at the same width gives the unsigned
type; ``/`` on integers computes in f32; ``//`` and ``%`` on integers follow
C (truncate toward zero). Errors raised here are :class:`SemanticError`; the frontend
adds the source location.
"""
from __future__ import annotations

from ..ir import semantics
from ..ir import types as T
from ..ir.core import Builder
from .core import _unwrap, tensor


class SemanticError(Exception):
    """A DSL operation was given operands it cannot take."""


def fail(msg: str):
    raise SemanticError(msg)


# ---------------------------------------------------------------- constants
def python_scalar_type(v) -> T.ScalarType:
    if isinstance(v, bool):
        return T.i1
    if isinstance(v, int):
        if -2**31 <= v < 2**31:
            return T.i32
        if -2**63 <= v < 2**63:
            return T.i64
        if 0 <= v < 2**64:
            return T.u64
        fail(f"integer constant {v} does not fit in 64 bits")
    if isinstance(v, float):
        return T.f32
    fail(f"{type(v).__name__} value {v!r} cannot be used as a number in a kernel")


def constant(b: Builder, value, ty: T.Type) -> tensor:
    """A scalar or splat-tile constant of type ``ty``."""
    s = ty.scalar
    if s.is_floating():
        value = float(value)
        if s.bits < 32:   # rounded once here (docs/semantics.md), so every backend agrees
            value = float(semantics.convert(semantics.convert(value, T.f64, s), s, T.f64))
    elif s.is_bool():
        value = bool(value)
    else:
        value = int(value)
        info = (1 << s.bits)
        if s.kind == "uint":
            value %= info
        else:
            value = (value + info // 2) % info - info // 2
    return tensor(b("constant", value=value, type=ty))


def to_tensor(x, b: Builder) -> tensor:
    """Turn a Python number (or constexpr of one) into a scalar tensor."""
    x = _unwrap(x)
    if isinstance(x, tensor):
        return x
    return constant(b, x, python_scalar_type(x))


def is_number(x) -> bool:
    x = _unwrap(x)
    return isinstance(x, (int, float)) and not isinstance(x, tensor)


# ---------------------------------------------------------------- shapes
def broadcast_shapes(a: list, b: list) -> list:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and x != 1 and y != 1:
            fail(f"shapes {a} and {b} cannot be broadcast together")
        out.append(max(x, y))
    return out[::-1]


def broadcast_to(x: tensor, shape: list, b: Builder) -> tensor:
    """Broadcast ``x`` to ``shape`` (numpy rules: size-1 dims and missing leading dims)."""
    shape = list(shape)
    if x.shape == shape:
        return x
    if not x.shape:
        return tensor(b("splat", x.handle, type=T.TileType(tuple(shape), x.dtype)))
    if len(x.shape) > len(shape):
        fail(f"cannot broadcast shape {x.shape} to {shape}")
    broadcast_shapes(x.shape, shape)
    if broadcast_shapes(x.shape, shape) != shape:
        fail(f"cannot broadcast shape {x.shape} to {shape}")
    while len(x.shape) < len(shape):
        x = tensor(b("expand_dims", x.handle, axis=0))
    if x.shape == shape:
        return x
    return tensor(b("broadcast", x.handle, type=T.TileType(tuple(shape), x.dtype)))


def broadcast_pair(x: tensor, y: tensor, b: Builder):
    shape = broadcast_shapes(x.shape, y.shape)
    return broadcast_to(x, shape, b), broadcast_to(y, shape, b)


# ---------------------------------------------------------------- casts
def cast(x, dtype, b: Builder, bitcast: bool = False) -> tensor:
    """``x.to(dtype)``: numeric conversion, or reinterpretation with ``bitcast=True``."""
    dtype = _unwrap(dtype)
    x = to_tensor(x, b)
    if not isinstance(dtype, (T.ScalarType, T.PointerType)):
        fail(f"cannot convert to {dtype!r}: not a dtype")
    if x.dtype == dtype:
        return x
    if bitcast and not (x.dtype.is_ptr() or dtype.is_ptr()):
        if x.dtype.bits != dtype.bits:
            fail(f"bitcast from {x.dtype!r} to {dtype!r} changes the bit width")
        return tensor(b("bitcast", x.handle, to=dtype))
    if x.dtype.is_ptr() or dtype.is_ptr():
        if x.dtype.is_ptr() and dtype.is_ptr():
            return tensor(b("bitcast", x.handle, to=dtype))
        if x.dtype.is_ptr() and dtype in (T.i64, T.u64):
            return tensor(b("bitcast", x.handle, to=dtype))
        if dtype.is_ptr() and x.dtype in (T.i64, T.u64):   # an address read from memory
            return tensor(b("bitcast", x.handle, to=dtype))
        if dtype.is_ptr():
            fail(f"cannot convert {x.dtype!r} to {dtype!r}: a pointer is made only from a "
                 "64-bit integer (int64 or uint64, e.g. an address loaded from an int64 array)")
        fail(f"cannot convert {x.dtype!r} to {dtype!r}")
    return tensor(b("cast", x.handle, to=dtype))


# ---------------------------------------------------------------- promotion
def _float_rank(t):
    return {"f8e4m3": 0, "f8e5m2": 0, "f8e4b8": 0, "f8e5b16": 0, "f16": 1, "bf16": 1, "f32": 2,
            "f64": 3}[t.name]


def computation_type(a: T.ScalarType, b: T.ScalarType, div_or_mod: bool = False) -> T.ScalarType:
    """The type two tensor operands are converted to before an arithmetic op."""
    if a.is_ptr() or b.is_ptr():
        fail(f"arithmetic on pointers {a!r}, {b!r} is not defined (use + with an integer)")
    if T.f64 in (a, b):
        return T.f64
    if T.f32 in (a, b):
        return T.f32
    if T.f16 in (a, b):
        return T.f32 if div_or_mod else T.f16
    if T.bf16 in (a, b):
        return T.bf16 if a == b and not div_or_mod else T.f32
    if a.is_fp8() or b.is_fp8():
        return T.f32 if div_or_mod else T.f16
    return integer_promote(a, b)


def integer_promote(a: T.ScalarType, b: T.ScalarType) -> T.ScalarType:
    if a == b:
        return a
    if a.is_bool():
        return b
    if b.is_bool():
        return a
    if (a.kind == "uint") == (b.kind == "uint"):
        return a if a.bits >= b.bits else b
    u, s = (a, b) if a.kind == "uint" else (b, a)
    return u if u.bits >= s.bits else s


def _scalar_fits(v, t: T.ScalarType) -> bool:
    if isinstance(v, float):
        return t.is_floating()
    if t.is_floating():
        return True
    if t.is_bool():
        return isinstance(v, bool)
    lo, hi = ((0, 2 ** t.bits - 1) if t.kind == "uint"
              else (-2 ** (t.bits - 1), 2 ** (t.bits - 1) - 1))
    return lo <= v <= hi


def operand_types(x, y, div_or_mod: bool = False):
    """Promotion that lets Python numbers adopt a tensor's type (Triton's weak scalars);
    two Python numbers (``where(m, 0, -1.0e6)``) meet at the type of their literals'
    promotion (i32 and f32 give f32)."""
    xs, ys = is_number(x), is_number(y)
    if xs and ys:
        c = computation_type(python_scalar_type(_unwrap(x)), python_scalar_type(_unwrap(y)),
                             div_or_mod)
        return c, c
    if xs or ys:
        num, t = (_unwrap(x), y.dtype) if xs else (_unwrap(y), x.dtype)
        if t.is_ptr():
            return (python_scalar_type(num), t) if xs else (t, python_scalar_type(num))
        if _scalar_fits(num, t) and not (isinstance(num, bool) and not t.is_bool()) \
                and not (div_or_mod and t.is_floating() and t.bits < 32):
            res = t
        else:
            res = computation_type(t, python_scalar_type(num), div_or_mod)
        return res, res
    c = computation_type(x.dtype, y.dtype, div_or_mod) if not (x.dtype.is_ptr() or
                                                                 y.dtype.is_ptr()) else None
    return (c, c) if c else (x.dtype, y.dtype)


def _prepare(x, y, b: Builder, div_or_mod=False, force=None):
    tx, ty = operand_types(x, y, div_or_mod)
    if force is not None:
        tx = ty = force
    x = cast(to_tensor_typed(x, tx, b), tx, b)
    y = cast(to_tensor_typed(y, ty, b), ty, b)
    return broadcast_pair(x, y, b)


def to_tensor_typed(x, t, b: Builder) -> tensor:
    x = _unwrap(x)
    if isinstance(x, tensor):
        return x
    if t is not None and not t.is_ptr():
        return constant(b, x, t)
    return to_tensor(x, b)


# ---------------------------------------------------------------- arithmetic
def add(x, y, b: Builder) -> tensor:
    if isinstance(_unwrap(y), tensor) and y.dtype.is_ptr() and not (
            isinstance(_unwrap(x), tensor) and x.dtype.is_ptr()):
        x, y = y, x
    if isinstance(_unwrap(x), tensor) and x.dtype.is_ptr():
        return addptr(x, y, b)
    return _binary("add", x, y, b)


def addptr(p: tensor, off, b: Builder) -> tensor:
    off = to_tensor(off, b)
    if off.dtype.is_ptr():
        fail(f"cannot add two pointers ({describe(p)} and {describe(off)})")
    if not off.dtype.is_int():
        fail(f"a pointer offset must be an integer, got {off.dtype!r} (adding {describe(off)} "
             f"to the pointer {describe(p)})")
    p, off = broadcast_pair(p, off, b)
    return tensor(b("addptr", p.handle, off.handle))


def sub(x, y, b: Builder) -> tensor:
    if isinstance(_unwrap(x), tensor) and x.dtype.is_ptr():
        y = to_tensor(y, b)
        if y.dtype.is_ptr():
            fail("subtracting pointers is not supported")
        return addptr(x, neg(y, b), b)
    return _binary("sub", x, y, b)


def mul(x, y, b):
    return _binary("mul", x, y, b)


def truediv(x, y, b: Builder) -> tensor:
    tx, ty = operand_types(x, y, True)
    if tx.is_int() and ty.is_int():
        return _binary("div", x, y, b, force=T.f32)
    return _binary("div", x, y, b, div_or_mod=True)


def floordiv(x, y, b: Builder) -> tensor:
    tx, ty = operand_types(x, y)
    if not (tx.is_int() and ty.is_int()):
        fail(f"// is defined for integers only, got {tx!r} and {ty!r} (use / and floor)")
    return _binary("div", x, y, b)


def mod(x, y, b):
    return _binary("rem", x, y, b, div_or_mod=True)


def describe(x) -> str:
    """``x`` for a message: a tensor's type and the variable or parameter it came from
    (``ptr<f32> 'n'``), or a number's value."""
    x = _unwrap(x)
    if not isinstance(x, tensor):
        return repr(x)
    return f"{x.type} '{x.handle.hint}'" if x.handle.hint else str(x.type)


def no_pointers(what: str, *operands):
    """Fail unless every operand is a number (``what``: the operation, for the message)."""
    ptrs = [v for v in operands if isinstance(_unwrap(v), tensor) and _unwrap(v).dtype.is_ptr()]
    if ptrs:
        fail(f"{what} is not defined on pointers, got " + " and ".join(map(describe, operands)))


def _binary(name, x, y, b, div_or_mod=False, force=None) -> tensor:
    no_pointers(f"operator {name}", x, y)
    x, y = _prepare(x, y, b, div_or_mod, force)
    return tensor(b(name, x.handle, y.handle))


def bitwise(name, x, y, b) -> tensor:
    no_pointers(f"bitwise {name}", x, y)
    x, y = _prepare(x, y, b)
    if not x.dtype.is_int():
        fail(f"bitwise {name} needs integers, got {x.dtype!r}")
    return tensor(b(name, x.handle, y.handle))


def compare(pred, x, y, b) -> tensor:
    no_pointers(f"comparison {pred}", x, y)
    x, y = _prepare(x, y, b)
    return tensor(b("cmp", x.handle, y.handle, pred=pred))


def neg(x, b) -> tensor:
    x = to_tensor(x, b)
    if x.dtype.is_ptr():
        fail(f"cannot negate a pointer ({describe(x)})")
    return tensor(b("neg", x.handle))


def invert(x, b) -> tensor:
    x = to_tensor(x, b)
    if not x.dtype.is_int():
        fail(f"~ needs an integer, got {x.dtype!r}")
    return tensor(b("not", x.handle))


def logical_not(x, b) -> tensor:
    x = to_tensor(x, b)
    return compare("eq", x, 0, b) if not x.dtype.is_bool() else tensor(b("not", x.handle))


def minmax(name, x, y, b, propagate_nan=False) -> tensor:
    no_pointers(f"{name}imum", x, y)
    x, y = _prepare(x, y, b)
    r = tensor(b(name, x.handle, y.handle))
    if propagate_nan and x.dtype.is_floating():
        nan_x = compare("ne", x, x, b)
        nan_y = compare("ne", y, y, b)
        r = where(nan_x, x, where(nan_y, y, r, b), b)
    return r


def where(cond, x, y, b) -> tensor:
    cond = to_tensor(cond, b)
    if not cond.dtype.is_bool():
        cond = compare("ne", cond, 0, b)
    tx, ty = (_unwrap(v).type if isinstance(_unwrap(v), tensor) else None for v in (x, y))
    if (tx is not None and tx.scalar.is_ptr() or ty is not None and ty.scalar.is_ptr()) \
            and tx != ty:
        fail(f"where() arms must be the same pointer type, got {describe(x)} and {describe(y)}")
    x, y = _prepare(x, y, b)
    shape = broadcast_shapes(cond.shape, x.shape)
    cond, x, y = (broadcast_to(v, shape, b) for v in (cond, x, y))
    return tensor(b("select", cond.handle, x.handle, y.handle))


def unary_float(name, x, b) -> tensor:
    x = to_tensor(x, b)
    if not x.dtype.is_floating():
        fail(f"{name} needs a floating-point operand, got {x.dtype!r}; convert with .to()")
    if x.dtype.is_fp8():
        fail(f"{name} is not defined on {x.dtype!r}; convert to float16 or float32 first")
    return tensor(b(name, x.handle))


def fma(x, y, z, b) -> tensor:
    no_pointers("fma", x, y, z)
    x, y = _prepare(x, y, b)
    x, z = _prepare(x, z, b)
    y, z = broadcast_pair(cast(y, x.dtype, b), z, b)
    x = broadcast_to(x, z.shape, b)
    if not x.dtype.is_floating():
        fail(f"fma needs floating-point operands, got {x.dtype!r}")
    return tensor(b("fma", x.handle, y.handle, z.handle))


def as_bool(x, b) -> tensor:
    x = to_tensor(x, b)
    return x if x.dtype.is_bool() else compare("ne", x, 0, b)
