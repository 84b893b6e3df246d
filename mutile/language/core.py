"""The values a kernel computes with, and the marker that makes a function a builtin.

* :class:`constexpr` wraps a compile-time value (and annotates kernel parameters);
* :class:`tensor` wraps one SSA value of the tile IR (a scalar or a tile);
* :func:`builtin` marks the DSL functions: inside a ``@jit`` kernel the frontend calls
  them with the IR builder as ``_builder``; anywhere else they raise.
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from ..errors import CompilationError
from ..ir import types as T
from ..ir.core import Value

# Triton's dtype names --------------------------------------------------------------
dtype = T.ScalarType
pointer_type = T.PointerType
int1, int8, int16, int32, int64 = T.i1, T.i8, T.i16, T.i32, T.i64
uint8, uint16, uint32, uint64 = T.u8, T.u16, T.u32, T.u64
float16, bfloat16, float32, float64 = T.f16, T.bf16, T.f32, T.f64
float8e4nv, float8e5 = T.f8e4m3, T.f8e5m2
float8_e4m3fn, float8_e5m2 = T.f8e4m3, T.f8e5m2
float8e4b8, float8e5b16 = T.f8e4b8, T.f8e5b16        # the "fnuz" fp8 formats
DTYPES = {t.triton_name: t for t in T.SCALARS.values()}


class constexpr:
    """A compile-time constant. As an annotation (``BLOCK: ml.constexpr``) it makes a
    kernel parameter part of the specialization: each value compiles its own kernel."""

    def __init__(self, value):
        self.value = python_value(value.value if isinstance(value, constexpr) else value)

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __bool__(self):
        return bool(self.value)

    def __index__(self):
        return self.value

    def __eq__(self, other):
        return self.value == (other.value if isinstance(other, constexpr) else other)

    def __hash__(self):
        return hash(self.value)

    def __iter__(self):
        return iter(self.value)

    def __getitem__(self, index):
        return self.value[_unwrap(index)]

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)


def _constexpr_op(op, reflected=False):
    """A dunder of :class:`constexpr`: apply ``op`` to the values, wrap the result (as
    Triton's ``constexpr(2) * BLOCK`` is a constexpr on the host)."""
    if reflected:
        return lambda self, other: constexpr(op(_unwrap(other), self.value))
    return lambda self, other: constexpr(op(self.value, _unwrap(other)))


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("lshift", operator.lshift),
                   ("rshift", operator.rshift), ("and", operator.and_), ("or", operator.or_),
                   ("xor", operator.xor)):
    setattr(constexpr, f"__{_name}__", _constexpr_op(_op))
    setattr(constexpr, f"__r{_name}__", _constexpr_op(_op, reflected=True))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
                   ("ge", operator.ge)):
    setattr(constexpr, f"__{_name}__", _constexpr_op(_op))
for _name, _op in (("neg", operator.neg), ("pos", operator.pos), ("invert", operator.invert)):
    setattr(constexpr, f"__{_name}__", lambda self, _op=_op: constexpr(_op(self.value)))


def python_value(v):
    """``v`` with numpy scalars (``np.float32(1.5)``, ``np.int64(16)``, ``np.bool_``) as
    the Python numbers they hold, inside tuples and lists too: in a kernel a numpy scalar
    is a number typed like the Python literal (a weak ``float``/``int``/``bool``)."""
    if isinstance(v, np.generic):       # ml_dtypes scalars (bfloat16, fp8) included
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, np.integer):
            return int(v)
        t = T.scalar_from_numpy(v.dtype)
        if isinstance(v, np.floating) or (t is not None and t.is_floating()):
            return float(v)
        return v
    if isinstance(v, (tuple, list)) and any(isinstance(x, (np.generic, tuple, list)) for x in v):
        out = [python_value(x) for x in v]
        if isinstance(v, list):
            return out
        return type(v)(*out) if hasattr(v, "_fields") else tuple(out)
    return v


def _unwrap(x):
    return x.value if isinstance(x, constexpr) else x


class tensor:
    """A scalar or tile value inside a kernel. ``dtype`` is its element type (a
    :class:`pointer_type` for pointers), ``shape`` its dims (``[]`` for scalars)."""

    def __init__(self, handle: Value):
        self.handle = handle

    @property
    def type(self) -> T.Type:
        return self.handle.type

    @property
    def dtype(self):
        return self.handle.type.scalar

    @property
    def shape(self) -> list:
        return list(T.shape_of(self.handle.type))

    @property
    def numel(self) -> int:
        t = self.handle.type
        return t.numel if isinstance(t, T.TileType) else 1

    def __repr__(self) -> str:
        return f"tensor<{self.type}>"

    def __bool__(self):
        raise TypeError("a tensor's truth value is only known when the kernel runs; "
                        "use it in an `if` or combine masks with & and |")

    def __iter__(self):
        raise TypeError("a tensor cannot be iterated over")


class CalledOutsideJit(CompilationError):
    """A DSL builtin was called from plain Python."""


def builtin(fn):
    """Mark ``fn`` as a DSL builtin: usable only inside ``@mutile.jit`` code."""

    @functools.wraps(fn)
    def wrapper(*args, _builder=None, **kwargs):
        if _builder is None:
            raise CalledOutsideJit(
                f"mutile.language.{fn.__name__}() can only be called inside a @mutile.jit "
                "function") from None
        return fn(*args, _builder=_builder, **kwargs)

    wrapper.__mutile_builtin__ = True
    return wrapper


def is_builtin(fn) -> bool:
    return getattr(fn, "__mutile_builtin__", False)
