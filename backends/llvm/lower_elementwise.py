"""Elementwise ops: one emitter per op, on scalars and vectors alike.

Each ``EMIT[name](ctx, xs, t, attrs)`` computes the op on LLVM values ``xs`` (scalars or
``<w x ...>`` vectors, in the repr of operand type ``t``) with the meaning of the same
row of :mod:`mutile.ir.semantics`: integers wrap, ``x/0 = -1`` (unsigned: all ones),
``x%0 = x``, ``INT_MIN/-1 = INT_MIN`` (never a trap), shifts by >= the width give 0 or
the sign fill, min/max lose NaNs, f16/bf16/fp8 compute in f32 and round once.

A scalar op emits its instructions in place. A tile op becomes an :class:`Expr`
(fused into its single reader) or a buffer written by one chunk loop.
"""
from __future__ import annotations

from llvmlite import ir

from mutile.ir import types as T
from mutile.ir.ops import UNARY_FLOAT

from . import fpconv
from . import lower_math as mathops
from .lower_context import I1, LowerContext, lowers
from .lower_sep import sep_add, sep_cast, sep_of, sep_scale
from .lower_tiles import Expr, Uniform

EMIT: dict = {}


def emitter(*names):
    def deco(fn):
        for n in names:
            EMIT[n] = fn
        return fn
    return deco


def _count(x) -> int:
    return x.type.count if isinstance(x.type, ir.VectorType) else 1


def _c(ctx, like, value):
    """A constant of ``like``'s (integer) lane type, splatted to its shape."""
    ty = like.type.element if isinstance(like.type, ir.VectorType) else like.type
    return ctx.splat(ir.Constant(ty, value), _count(like))


def _in_float(ctx, xs, t, fn):
    """Compute ``fn`` on ``xs`` widened to f32/f64 and round the result back to ``t``."""
    return ctx.from_compute(fn(*[ctx.to_compute(x, t) for x in xs]), t)


def _signed(t) -> bool:
    return t.is_int_signed()


# ---------------------------------------------------------------- arithmetic
def _arith(fop, iop):
    def emit(ctx, xs, t, at):
        b = ctx.b
        if t.is_floating():
            return _in_float(ctx, xs, t, lambda x, y: getattr(b, fop)(x, y))
        return getattr(b, iop)(*xs)
    return emit


EMIT["add"] = _arith("fadd", "add")
EMIT["sub"] = _arith("fsub", "sub")
EMIT["mul"] = _arith("fmul", "mul")
EMIT["and"] = lambda ctx, xs, t, at: ctx.b.and_(*xs)
EMIT["or"] = lambda ctx, xs, t, at: ctx.b.or_(*xs)
EMIT["xor"] = lambda ctx, xs, t, at: ctx.b.xor(*xs)


@emitter("div")
def _emit_div(ctx, xs, t, at):
    b = ctx.b
    if t.is_floating():
        return _in_float(ctx, xs, t, b.fdiv)
    x, y = xs
    zero = b.icmp_unsigned("==", y, _c(ctx, y, 0))
    if not _signed(t):
        q = b.udiv(x, b.select(zero, _c(ctx, y, 1), y))
        return b.select(zero, _c(ctx, y, -1), q)
    ovf = b.and_(b.icmp_signed("==", x, _c(ctx, x, 1 << (t.bits - 1))),
                 b.icmp_signed("==", y, _c(ctx, y, -1)))
    bad = b.or_(zero, ovf)
    q = b.sdiv(x, b.select(bad, _c(ctx, y, 1), y))       # x / 1 = x: INT_MIN / -1 = INT_MIN
    return b.select(zero, _c(ctx, y, -1), q)


@emitter("rem")
def _emit_rem(ctx, xs, t, at):
    b = ctx.b
    if t.is_floating():
        return _in_float(ctx, xs, t, b.frem)
    x, y = xs
    zero = b.icmp_unsigned("==", y, _c(ctx, y, 0))
    if not _signed(t):
        r = b.urem(x, b.select(zero, _c(ctx, y, 1), y))
        return b.select(zero, x, r)
    ovf = b.and_(b.icmp_signed("==", x, _c(ctx, x, 1 << (t.bits - 1))),
                 b.icmp_signed("==", y, _c(ctx, y, -1)))
    r = b.srem(x, b.select(b.or_(zero, ovf), _c(ctx, y, 1), y))   # x % 1 = 0 covers ovf
    return b.select(zero, x, r)


def float_minmax(ctx, fname: str, x, y):
    """minnum/maxnum with -0 < +0 (docs/semantics.md): equal operands combine bitwise,
    ``and`` for max (+0 wins), ``or`` for min."""
    b = ctx.b
    r = ctx.call_overloaded(fname, [x, y])
    vec = isinstance(x.type, ir.VectorType)
    ity = ir.IntType({"half": 16, "float": 32, "double": 64}[str(x.type.element if vec
                                                              else x.type)])
    bits_t = ir.VectorType(ity, x.type.count) if vec else ity
    xi, yi = b.bitcast(x, bits_t), b.bitcast(y, bits_t)
    both = b.and_(xi, yi) if fname == "maxnum" else b.or_(xi, yi)
    return b.select(b.fcmp_ordered("==", x, y), b.bitcast(both, x.type), r)


def _minmax(fname, sname, uname):
    def emit(ctx, xs, t, at):
        if t.is_floating():
            return _in_float(ctx, xs, t, lambda x, y: float_minmax(ctx, fname, x, y))
        return ctx.call_overloaded(sname if _signed(t) else uname, xs)
    return emit


EMIT["min"] = _minmax("minnum", "smin", "umin")
EMIT["max"] = _minmax("maxnum", "smax", "umax")


@emitter("shl")
def _emit_shl(ctx, xs, t, at):
    b = ctx.b
    x, y = xs
    big = b.icmp_unsigned(">=", y, _c(ctx, y, t.bits))
    return b.select(big, _c(ctx, x, 0), b.shl(x, b.select(big, _c(ctx, y, 0), y)))


@emitter("shr")
def _emit_shr(ctx, xs, t, at):
    b = ctx.b
    x, y = xs
    big = b.icmp_unsigned(">=", y, _c(ctx, y, t.bits))
    if _signed(t):
        return b.ashr(x, b.select(big, _c(ctx, y, t.bits - 1), y))
    return b.select(big, _c(ctx, x, 0), b.lshr(x, b.select(big, _c(ctx, y, 0), y)))


EMIT["pow"] = lambda ctx, xs, t, at: _in_float(
    ctx, xs, t, lambda x, y: mathops.binary(ctx, "pow", x, y))

_FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@emitter("cmp")
def _emit_cmp(ctx, xs, t, at):
    b = ctx.b
    op = _FCMP[at["pred"]]
    if t.is_floating():
        x, y = (ctx.to_compute(v, t) for v in xs)
        if op == "!=":
            return b.fcmp_unordered(op, x, y)
        return b.fcmp_ordered(op, x, y)
    if _signed(t):
        return b.icmp_signed(op, *xs)
    return b.icmp_unsigned(op, *xs)


# ---------------------------------------------------------------- unary
def _unary_float(name):
    def emit(ctx, xs, t, at):
        return _in_float(ctx, xs, t, lambda x: mathops.unary(ctx, name, x))
    return emit


for _n in UNARY_FLOAT:
    EMIT[_n] = _unary_float(_n)


@emitter("neg")
def _emit_neg(ctx, xs, t, at):
    if t.is_floating():
        return _in_float(ctx, xs, t, ctx.b.fneg)
    return ctx.b.neg(xs[0])


@emitter("abs")
def _emit_abs(ctx, xs, t, at):
    if t.is_floating():
        return _in_float(ctx, xs, t, lambda x: ctx.call_overloaded("fabs", [x]))
    if not _signed(t):
        return xs[0]
    return ctx.call_overloaded("abs", [xs[0], ir.Constant(I1, 0)])


@emitter("not")
def _emit_not(ctx, xs, t, at):
    return ctx.b.xor(xs[0], _c(ctx, xs[0], -1))


@emitter("fma")
def _emit_fma(ctx, xs, t, at):
    return _in_float(ctx, xs, t, lambda a, b, c: ctx.call_overloaded("fma", [a, b, c]))


@emitter("select")
def _emit_select(ctx, xs, t, at):
    return ctx.b.select(*xs)


# ---------------------------------------------------------------- conversions
def emit_cast(ctx, x, src, dst):
    """Numeric conversion with :func:`mutile.ir.semantics.convert`'s rules."""
    b = ctx.b
    n = _count(x)
    if src == dst:
        return x
    if dst == T.i1:
        if src.is_floating():
            y = ctx.to_compute(x, src)
            elem = y.type.element if n > 1 else y.type
            return b.fcmp_unordered("!=", y, ctx.splat(ir.Constant(elem, 0.0), n))
        return b.icmp_unsigned("!=", x, _c(ctx, x, 0))
    if src.is_floating() and dst.is_floating():
        return ctx.fconv(x, src, dst)
    if src.is_floating():
        y = ctx.to_compute(x, src)
        return _fp_to_int(ctx, y, dst, ctx.vtype(dst, n))
    if dst.is_floating():
        return fpconv.convert_int(b, x, _signed(src), dst.name)
    return ctx.int_cast(x, ctx.repr_type(dst), _signed(src))


def _fp_to_int(ctx, y, dst, ity):
    """``llvm.fpto[su]i.sat``: truncate toward zero, saturate, NaN -> 0."""
    base = "fptosi.sat" if _signed(dst) else "fptoui.sat"
    name = f"llvm.{base}.{ctx.suffix(ity)}.{ctx.suffix(y.type)}"
    fn = ctx.intrinsic(name, ity, [y.type])
    return ctx.b.call(fn, [y])


def emit_bitcast(ctx, x, src, dst):
    ty = ctx.vtype(dst, _count(x))
    return x if x.type == ty else ctx.b.bitcast(x, ty)


# ---------------------------------------------------------------- the lowering
def _operand_type(op):
    return (op.operands[1] if op.name == "select" else op.operands[0]).type.scalar


def _int_sep(ctx, op, vals):
    """The address-structure fact of an integer tile result (None if unknown)."""
    name = op.name
    t = op.result.type.scalar
    if not (isinstance(t, T.ScalarType) and t.is_int() and t.bits > 1):
        return None
    if name in ("add", "sub"):
        return sep_add(ctx, sep_of(ctx, vals[0], _signed(t)), sep_of(ctx, vals[1], _signed(t)),
                       name == "sub")
    if name == "mul":
        for a, u in ((0, 1), (1, 0)):
            if isinstance(vals[u], Uniform):
                return sep_scale(ctx, sep_of(ctx, vals[a], _signed(t)), vals[u].value)
    if name == "cast":
        src = op.operands[0].type.scalar
        if src.is_int() and src.bits > 1 and t.bits >= src.bits:
            return sep_cast(ctx, sep_of(ctx, vals[0], _signed(src)), ctx.repr_type(t),
                            _signed(src))
    return None


_LIGHT = frozenset({"add", "sub", "and", "or", "xor", "min", "max", "cmp", "select", "neg",
                    "abs", "not", "bitcast", "shl", "shr"})


def _narrow_float(t) -> bool:
    return isinstance(t, T.ScalarType) and t.is_floating() and t.bits < 32


def _light(op) -> bool:
    """About one instruction per element (narrow floats convert, so they are not light)."""
    if op.name == "cast":
        return op.operands[0].type.scalar.is_int() and op.result.type.scalar.is_int()
    operand = _operand_type(op)
    return op.name in _LIGHT and not _narrow_float(operand) and \
        not _narrow_float(op.result.type.scalar)


def _scalar_fn(op):
    """``fn(ctx, xs)`` computing ``op`` on scalar or vector operand values."""
    name, at = op.name, op.attrs
    if name == "cast":
        src, dst = op.operands[0].type.scalar, op.result.type.scalar
        return lambda ctx, xs: emit_cast(ctx, xs[0], src, dst)
    if name == "bitcast":
        src, dst = op.operands[0].type.scalar, op.result.type.scalar
        return lambda ctx, xs: emit_bitcast(ctx, xs[0], src, dst)
    emit, t = EMIT[name], _operand_type(op)
    return lambda ctx, xs: emit(ctx, xs, t, at)


@lowers(*EMIT, "cast", "bitcast")
def lower_elementwise(ctx: LowerContext, op) -> None:
    """Scalars: the op's instructions. Tiles: a fused :class:`Expr` (or its buffer)."""
    fn = _scalar_fn(op)
    vals = [ctx[v] for v in op.operands]
    rt = op.result.type
    if not rt.is_tile():
        ctx.bind(op.result, fn(ctx, vals))
        return
    if all(isinstance(v, Uniform) for v in vals):
        ctx.bind(op.result, Uniform(fn(ctx, [v.value for v in vals]), rt))
        return
    expr = Expr(fn, vals, rt, light=_light(op))
    expr.sep = _int_sep(ctx, op, vals)
    ctx.bind(op.result, ctx.settle(expr, op.result))
