"""The vocabulary libdevice's compositions are written in: :class:`Emit` wraps the IR
builder so a formula reads as arithmetic (``e.fma(x, y, e.neg(p))``), and knows the bit
layout of the float types (exponent, next float, ``2**k`` from bits).

Every method emits mutile builtins' IR (through :mod:`mutile.language.semantic`), so
each composition runs on every backend and carries the user's source location.
"""
from __future__ import annotations

from ...ir import types as T
from ...ir.semantics import FLOAT_FORMATS
from .. import semantic as S
from ..core import tensor

INT_OF = {16: T.i16, 32: T.i32, 64: T.i64}
UINT_OF = {16: T.u16, 32: T.u32, 64: T.u64}


class Emit:
    """Arithmetic on tensors and Python numbers, emitted through builder ``b``."""

    def __init__(self, b):
        self.b = b

    # ------------------------------------------------------------ arithmetic
    def add(self, x, y):
        return S.add(x, y, self.b)

    def sub(self, x, y):
        return S.sub(x, y, self.b)

    def mul(self, x, y):
        return S.mul(x, y, self.b)

    def div(self, x, y):
        return S.truediv(x, y, self.b)

    def rem(self, x, y):
        return S.mod(x, y, self.b)

    def fma(self, x, y, z):
        return S.fma(x, y, z, self.b)

    def neg(self, x):
        return S.neg(x, self.b)

    def abs(self, x):
        x = S.to_tensor(x, self.b)
        return x if x.dtype.kind == "uint" else tensor(self.b("abs", x.handle))

    def max(self, x, y):
        return S.minmax("max", x, y, self.b)

    def min(self, x, y):
        return S.minmax("min", x, y, self.b)

    def fn(self, name: str, x):
        """A unary float builtin of mutile: exp, log, sqrt, sin, floor..."""
        return S.unary_float(name, x, self.b)

    def pow(self, x, y):
        x, y = S._prepare(x, y, self.b)
        return tensor(self.b("pow", x.handle, y.handle))

    # ------------------------------------------------------------ comparisons, selection
    def cmp(self, pred: str, x, y):
        return S.compare(pred, x, y, self.b)

    def lt(self, x, y):
        return self.cmp("lt", x, y)

    def le(self, x, y):
        return self.cmp("le", x, y)

    def gt(self, x, y):
        return self.cmp("gt", x, y)

    def ge(self, x, y):
        return self.cmp("ge", x, y)

    def eq(self, x, y):
        return self.cmp("eq", x, y)

    def ne(self, x, y):
        return self.cmp("ne", x, y)

    def where(self, c, x, y):
        return S.where(c, x, y, self.b)

    def any(self, *masks):
        out = masks[0]
        for m in masks[1:]:
            out = S.bitwise("or", out, m, self.b)
        return out

    def all(self, *masks):
        out = masks[0]
        for m in masks[1:]:
            out = S.bitwise("and", out, m, self.b)
        return out

    def not_(self, m):
        return S.logical_not(m, self.b)

    # ------------------------------------------------------------ integers and casts
    def and_(self, x, y):
        return S.bitwise("and", x, y, self.b)

    def or_(self, x, y):
        return S.bitwise("or", x, y, self.b)

    def xor(self, x, y):
        return S.bitwise("xor", x, y, self.b)

    def shl(self, x, y):
        return S.bitwise("shl", x, y, self.b)

    def shr(self, x, y):
        return S.bitwise("shr", x, y, self.b)

    def cast(self, x, t):
        return S.cast(x, t, self.b)

    def bitcast(self, x, t):
        return S.cast(x, t, self.b, bitcast=True)

    def const(self, v, t):
        return S.constant(self.b, v, t)

    # ------------------------------------------------------------ float layout
    @staticmethod
    def layout(t: T.ScalarType):
        """(mantissa bits, exponent bias, smallest normal exponent, largest exponent)."""
        f = FLOAT_FORMATS[t.name]
        return f.mbits, f.bias, 1 - f.bias, (1 << f.ebits) - 2 - f.bias

    def bits(self, x):
        """``x``'s bits as a signed integer of its width (negative iff the sign is set)."""
        return self.bitcast(x, INT_OF[x.dtype.bits])

    def from_bits(self, i, t):
        return self.bitcast(self.cast(i, INT_OF[t.bits]), t)

    def isnan(self, x):
        return self.ne(x, x)

    def isinf(self, x):
        return self.eq(self.abs(x), float("inf"))

    def isfinite(self, x):
        return self.lt(self.abs(x), float("inf"))

    def signbit(self, x):
        return self.lt(self.bits(x), 0)

    def copysign(self, x, y):
        """|x| with y's sign bit (NaNs included), on the bits."""
        t = x.dtype
        top = 1 << (t.bits - 1)
        ix = self.and_(self.bits(x), top - 1)
        iy = self.and_(self.bits(y), self.const(-top, INT_OF[t.bits]))
        return self.from_bits(self.or_(ix, iy), t)

    def next_up(self, x):
        """The next float above ``x`` (NaN and +inf stay; -0 and +0 give the smallest
        positive subnormal)."""
        t = x.dtype
        i = self.bits(x)
        step = self.from_bits(self.where(self.gt(x, 0), self.add(i, 1), self.sub(i, 1)), t)
        tiny = self.from_bits(self.const(1, INT_OF[t.bits]), t)
        out = self.where(self.eq(x, 0), tiny, step)
        return self.where(self.any(self.isnan(x), self.eq(x, float("inf"))), x, out)

    def next_down(self, x):
        return self.neg(self.next_up(self.neg(x)))

    def pow2(self, k, t):
        """``2.0 ** k`` in float type ``t`` for integer ``k`` in the normal exponent range."""
        mbits, bias, _, _ = self.layout(t)
        k = self.cast(k, INT_OF[t.bits])
        return self.from_bits(self.shl(self.add(k, bias), mbits), t)

    def exponent(self, x):
        """The unbiased binary exponent (int32) of finite nonzero ``x``: |x| = m * 2**e
        with 1 <= m < 2; subnormals included."""
        t = x.dtype
        mbits, bias, _, _ = self.layout(t)
        scaled = self.mul(x, 2.0 ** (mbits + 1))
        sub = self.lt(self.abs(x), 2.0 ** (1 - bias))
        y = self.where(sub, scaled, x)
        e = self.and_(self.shr(self.bits(y), mbits), (1 << (t.bits - 1 - mbits)) - 1)
        e = self.sub(self.cast(e, T.i32), bias)
        return self.where(sub, self.sub(e, mbits + 1), e)
