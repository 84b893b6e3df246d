"""``libdevice``: the names of Triton's ``triton.language.extra.libdevice`` (CUDA's and
MUSA's device math library) on mutile's math, each a builtin usable in ``@jit`` code.

One row per name below says what arguments it takes, how it is computed and (in its
docstring) what it returns; the builtins, their ``__all__`` and the tests read the rows.
Argument kinds:

* ``f`` floats (Python numbers adopt the tile's type; float16/bfloat16 compute in float32
  and round once to their type), promoted together when there are several;
* ``d`` float32 or float64 only (the directed-rounding operations);
* ``i`` 32- or 64-bit integers, promoted together;
* conversions and bit reinterpretations take the one source type their name says.

Names mutile cannot compute (Bessel, gamma and error-function families, ``fma`` with
directed rounding, ``rcp64h``) are builtins too: calling one is a CompilationError at the
call that names the function. Results follow Triton's declarations: ``isnan``/``isinf``
are int1, ``signbit``/``finitef``/``isfinited``/``ilogb`` int32, ``llrint``/``llround``
int64, and the float -> unsigned conversions hold their bits in int32/int64, as there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...ir import types as T
from .. import semantic as S
from ..core import _unwrap, builtin, tensor
from ..semantic import fail
from . import _functions as F
from . import _integer as I
from . import _rounding as R
from ._emit import Emit


@dataclass(frozen=True)
class Row:
    name: str
    args: str                  # one kind letter per argument, or a conversion's source type
    impl: Callable
    doc: str


ROWS: dict[str, Row] = {}
UNSUPPORTED: dict[str, str] = {}


def _simple(names, args: str, doc: str, impl):
    """Register ``impl(e, *args)`` under each of ``names`` (a name or a list)."""
    for n in [names] if isinstance(names, str) else names:
        ROWS[n] = Row(n, args, impl, doc)


# ------------------------------------------------------------ argument preparation
def _floats(e: Emit, name: str, args, kinds: str):
    """The float arguments promoted to one type, and that type's compute type."""
    xs = [_unwrap(a) if S.is_number(a) else S.to_tensor(a, e.b) for a in args]
    tensors = [x for x in xs if isinstance(x, tensor)]
    if not tensors:                                         # numbers only: float32
        xs = tensors = [S.to_tensor(float(a), e.b) for a in xs]
    t = tensors[0].dtype
    for x in tensors[1:]:
        t = S.computation_type(t, x.dtype)
    if not t.is_floating():
        fail(f"libdevice.{name} needs floating-point arguments, got "
             + ", ".join(S.describe(x) for x in xs) + "; convert with .to()")
    if "d" in kinds and t not in (T.f32, T.f64):
        fail(f"libdevice.{name} is defined for float32 and float64, got {t!r}")
    ct = t if t in (T.f32, T.f64) else T.f32
    xs = [S.broadcast_to(S.cast(S.to_tensor_typed(x, t, e.b), ct, e.b), _shape(tensors), e.b)
          for x in xs]
    return xs, t


def _shape(tensors):
    shape = []
    for x in tensors:
        shape = S.broadcast_shapes(shape, x.shape)
    return shape


def _ints(e: Emit, name: str, args):
    """The integer arguments promoted to one 32- or 64-bit type and broadcast."""
    xs = [S.to_tensor(a, e.b) for a in args]
    if not all(x.dtype.is_int() and not x.dtype.is_bool() for x in xs):
        t = None
    else:
        t = xs[0].dtype
        for x in xs[1:]:
            t = S.integer_promote(t, x.dtype)
    if t is None or t.bits < 32:
        fail(f"libdevice.{name} needs 32- or 64-bit integer arguments, got "
             + ", ".join(S.describe(x) for x in xs))
    return [S.broadcast_to(S.cast(x, t, e.b), _shape(xs), e.b) for x in xs]


def _source(e: Emit, name: str, x, src: T.ScalarType):
    """``x`` as the conversion's source type: a number, or a tile of the same kind no
    wider than ``src``."""
    x = S.to_tensor(x, e.b)
    t = x.dtype
    same_kind = t.is_floating() == src.is_floating() and not t.is_bool() and not t.is_ptr()
    if not same_kind or t.bits > src.bits:
        fail(f"libdevice.{name} takes a {src!r} argument, got {S.describe(x)}")
    return S.cast(x, src, e.b)


def _call(r: Row, args, b):
    e = Emit(b)
    if len(args) != len(r.args) and not r.args.startswith("="):
        fail(f"libdevice.{r.name}() takes {len(r.args)} argument(s), got {len(args)}")
    if r.args.startswith("="):                              # conversions: "=<src type>"
        if len(args) != 1:
            fail(f"libdevice.{r.name}() takes 1 argument, got {len(args)}")
        return r.impl(e, _source(e, r.name, args[0], T.SCALARS[r.args[1:]]))
    if set(r.args) <= {"i"}:
        return r.impl(e, *_ints(e, r.name, args))
    if r.args == "n":                                       # an integer or a float
        x = S.to_tensor(args[0], b)
        if x.dtype.is_int():
            return r.impl(e, *_ints(e, r.name, [x]))
    if r.args == "fn":                                      # a float and an integer
        (x,), t = _floats(e, r.name, args[:1], "f")
        n = args[1] if isinstance(args[1], int) else S.to_tensor(args[1], b)
        if not isinstance(n, int) and not n.dtype.is_int():
            fail(f"libdevice.{r.name}'s exponent must be an integer, got {S.describe(n)}")
        return _round_back(e, r.impl(e, x, n), t)
    xs, t = _floats(e, r.name, args, r.args)
    return _round_back(e, r.impl(e, *xs), t)


def _round_back(e: Emit, out, t):
    if isinstance(out, tensor) and out.dtype.is_floating() and out.dtype != t:
        return e.cast(out, t)
    return out


def _as_i32(e, m):
    return e.cast(m, T.i32)


# ------------------------------------------------------------ the rows: direct maps
for _n, _op, _doc in [
        ("floor", "floor", "Round down."), ("ceil", "ceil", "Round up."),
        ("exp", "exp", "e ** x (within 2 ulp)."), ("exp2", "exp2", "2 ** x (within 2 ulp)."),
        ("log", "log", "Natural logarithm (within 2 ulp)."),
        ("log2", "log2", "Base-2 logarithm (within 2 ulp)."),
        ("sqrt", "sqrt", "Square root, correctly rounded."),
        ("sqrt_rn", "sqrt", "Square root, correctly rounded."),
        ("rsqrt", "rsqrt", "1 / sqrt(x) (within 2 ulp)."),
        ("sin", "sin", "Sine (within 2 ulp)."), ("cos", "cos", "Cosine (within 2 ulp)."),
        ("tanh", "tanh", "Hyperbolic tangent (within 4 ulp)."),
        ("erf", "erf", "The error function (within 4 ulp)."),
        ("fast_expf", "exp", "e ** x (mutile's exp: within 2 ulp)."),
        ("fast_logf", "log", "Natural logarithm (mutile's log)."),
        ("fast_log2f", "log2", "Base-2 logarithm (mutile's log2)."),
        ("fast_sinf", "sin", "Sine (mutile's sin)."),
        ("fast_cosf", "cos", "Cosine (mutile's cos).")]:
    _simple(_n, "f", _doc, lambda e, x, _op=_op: e.fn(_op, x))

_simple("abs", "n", "|x| for floats and integers (integers wrap at the minimum).",
        lambda e, x: e.abs(x))
_simple(["fma", "fma_rn"], "fff", "x * y + z rounded once.", lambda e, x, y, z: e.fma(x, y, z))
_simple(["pow", "fast_powf"], "ff", "x ** y (an integer exponent is converted to x's type).",
        lambda e, x, y: e.pow(x, y))
_simple(["div_rn", "fast_dividef"], "ff", "x / y, correctly rounded.",
        lambda e, x, y: e.div(x, y))
_simple("fmod", "ff", "x - trunc(x / y) * y, exactly (C's fmod).", lambda e, x, y: e.rem(x, y))
_simple("trunc", "f", "Round toward zero.", R.trunc)
_simple(["rint", "nearbyint"], "f", "Round to nearest, ties to even.", R.rint)
_simple("round", "f", "Round to nearest, ties away from zero.", R.round_half_away)
_simple("llrint", "f", "rint(x) as int64 (saturating; NaN gives 0).",
        lambda e, x: e.cast(R.rint(e, x), T.i64))
_simple("llround", "f", "round(x) as int64 (saturating; NaN gives 0).",
        lambda e, x: e.cast(R.round_half_away(e, x), T.i64))
_simple("saturatef", "f", "x clamped to [0, 1]; NaN gives 0.", F.saturate)
_simple("isnan", "f", "x is a NaN (int1).", lambda e, x: e.isnan(x))
_simple("isinf", "f", "x is +-inf (int1).", lambda e, x: e.isinf(x))
_simple(["finitef", "isfinited"], "f", "1 if x is finite, else 0 (int32).",
        lambda e, x: _as_i32(e, e.isfinite(x)))
_simple("signbit", "f", "1 if x's sign bit is set (-0.0 and negative NaNs too), else 0 (int32).",
        lambda e, x: _as_i32(e, e.signbit(x)))
_simple("copysign", "ff", "|x| with y's sign bit.", lambda e, x, y: e.copysign(x, y))
_simple("nextafter", "ff", "The next float after x in the direction of y.", F.nextafter)
_simple("fdim", "ff", "x - y if x > y, else +0 (NaN if either is NaN).", F.fdim)
_simple("remainder", "ff", "IEEE remainder x - n*y, n = x/y rounded to even, exactly.",
        F.remainder)
_simple(["ldexp", "scalbn"], "fn", "x * 2**n, rounded once (n an integer).", F.ldexp)
_simple("ilogb", "f", "The unbiased exponent (int32); INT_MIN for 0 and NaN, INT_MAX for inf.",
        F.ilogb)
_simple("logb", "f", "The unbiased exponent as a float; -inf for 0, +inf for inf.", F.logb)

# ------------------------------------------------------------ composed functions
for _n, _impl, _doc in [
        ("log1p", F.log1p, "log(1 + x), accurate near 0 (within 4 ulp)."),
        ("expm1", F.expm1, "exp(x) - 1, accurate near 0 (within 4 ulp)."),
        ("sinh", F.sinh, "Hyperbolic sine (within 4 ulp)."),
        ("cosh", F.cosh, "Hyperbolic cosine (within 4 ulp)."),
        ("asinh", F.asinh, "Inverse hyperbolic sine (within 4 ulp)."),
        ("acosh", F.acosh, "Inverse hyperbolic cosine (within 4 ulp)."),
        ("atanh", F.atanh, "Inverse hyperbolic tangent (within 4 ulp)."),
        ("exp10", F.exp10, "10 ** x (within 4 ulp)."),
        ("fast_exp10f", F.exp10, "10 ** x (mutile's exp10)."),
        ("log10", F.log10, "Base-10 logarithm (within 4 ulp)."),
        ("fast_log10f", F.log10, "Base-10 logarithm (mutile's log10)."),
        ("sinpi", F.sinpi, "sin(pi * x), the argument reduced exactly (within 4 ulp)."),
        ("cospi", F.cospi, "cos(pi * x), the argument reduced exactly (within 4 ulp)."),
        (["tan", "fast_tanf"], F.tan, "Tangent, sin(x) / cos(x)."),
        ("cbrt", F.cbrt, "Cube root (within 4 ulp)."),
        ("atan", F.atan, "Arctangent (within 4 ulp)."),
        ("asin", F.asin, "Arcsine (within 4 ulp)."),
        ("acos", F.acos, "Arccosine (within 4 ulp)."),
        ("rcbrt", lambda e, x: e.div(1.0, F.cbrt(e, x)), "1 / cbrt(x) (within 4 ulp).")]:
    _simple(_n, "f", _doc, _impl)

_simple("atan2", "ff", "atan(y / x) in the quadrant of (x, y), IEEE's special cases "
        "(within 4 ulp).", F.atan2)
_simple("hypot", "ff", "sqrt(x*x + y*y) without overflow (within 4 ulp).", F.norm)
_simple("rhypot", "ff", "1 / hypot(x, y).", lambda e, x, y: e.div(1.0, F.norm(e, x, y)))
_simple("norm3d", "fff", "sqrt(a*a + b*b + c*c) without overflow.", F.norm)
_simple("rnorm3d", "fff", "1 / norm3d.", lambda e, *v: e.div(1.0, F.norm(e, *v)))
_simple("norm4d", "ffff", "sqrt(a*a + b*b + c*c + d*d) without overflow.", F.norm)
_simple("rnorm4d", "ffff", "1 / norm4d.", lambda e, *v: e.div(1.0, F.norm(e, *v)))
_simple("rsqrt_rn", "f", "1 / sqrt(x): float32 through float64 (rounded once but for "
        "values within 2**-52 of a tie), float64 within 2 ulp.",
        lambda e, x: e.cast(e.div(1.0, e.fn("sqrt", e.cast(x, T.f64))), x.dtype)
        if x.dtype == T.f32 else e.div(1.0, e.fn("sqrt", x)))

# ------------------------------------------------------------ directed rounding
for _m in R.MODES:
    _simple(f"add_{_m}", "dd", f"x + y rounded {_m}.", lambda e, x, y, m=_m: R.add(e, x, y, m))
    _simple(f"sub_{_m}", "dd", f"x - y rounded {_m}.", lambda e, x, y, m=_m: R.sub(e, x, y, m))
    _simple(f"mul_{_m}", "dd", f"x * y rounded {_m}.", lambda e, x, y, m=_m: R.mul(e, x, y, m))
    _simple(f"div_{_m}", "dd", f"x / y rounded {_m}.", lambda e, x, y, m=_m: R.div(e, x, y, m))
    _simple(f"sqrt_{_m}", "d", f"sqrt(x) rounded {_m}.", lambda e, x, m=_m: R.sqrt(e, x, m))
    _simple(f"rcp_{_m}", "d", f"1 / x rounded {_m}.", lambda e, x, m=_m: R.rcp(e, x, m))
ROWS["div_rn"] = Row("div_rn", "ff", lambda e, x, y: e.div(x, y), "x / y, correctly rounded.")
ROWS["sqrt_rn"] = Row("sqrt_rn", "f", lambda e, x: e.fn("sqrt", x),
                      "Square root, correctly rounded.")

# ------------------------------------------------------------ conversions
_CONV_SRC = {"float": T.f32, "double": T.f64, "int": T.i32, "uint": T.u32, "ll": T.i64,
             "ull": T.u64}
# (source, destination, result type, rounding modes): Triton's declarations
_CONVERSIONS = [("double", "float", T.f32, R.MODES), ("double", "int", T.i32, R.MODES),
                ("double", "uint", T.i32, R.MODES), ("int", "double", T.f64, ("rn",)),
                ("uint", "double", T.f64, ("rn",)), ("float", "int", T.i32, R.MODES),
                ("float", "uint", T.i32, R.MODES), ("int", "float", T.f32, R.MODES),
                ("uint", "float", T.f32, R.MODES), ("float", "ll", T.i64, R.MODES),
                ("float", "ull", T.i64, R.MODES), ("double", "ll", T.i64, R.MODES),
                ("double", "ull", T.i64, R.MODES), ("ll", "float", T.f32, R.MODES),
                ("ull", "float", T.f32, R.MODES), ("ll", "double", T.f64, R.MODES),
                ("ull", "double", T.f64, R.MODES)]


def _converter(dst: T.ScalarType, result: T.ScalarType, mode: str):
    def impl(e, x):
        if dst.is_floating():
            return R.to_float(e, x, dst, mode)
        out = R.to_int(e, x, dst, mode)
        return out if out.dtype == result else e.bitcast(out, result)
    return impl


for _s, _d, _res, _modes in _CONVERSIONS:
    _dst = {"uint": T.u32, "ull": T.u64}.get(_d, _CONV_SRC[_d])
    for _m in _modes:
        _simple(f"{_s}2{_d}_{_m}", "=" + _CONV_SRC[_s].name,
                f"{_s} -> {_d}, rounded {_m} (result {_res!r}"
                + ("; out of range saturates, NaN gives 0" if not _dst.is_floating() else "")
                + ").", _converter(_dst, _res, _m))

for _n, _src, _dst in [("int_as_float", T.i32, T.f32), ("float_as_int", T.f32, T.i32),
                       ("uint_as_float", T.u32, T.f32), ("float_as_uint", T.f32, T.i32),
                       ("longlong_as_double", T.i64, T.f64),
                       ("double_as_longlong", T.f64, T.i64)]:
    _simple(_n, "=" + _src.name, f"The bits of a {_src!r} read as {_dst!r}.",
            lambda e, x, _dst=_dst: e.bitcast(x, _dst))
_simple("double2hiint", "=f64", "The high 32 bits of a float64 (int32).",
        lambda e, x: e.cast(e.shr(e.bitcast(x, T.i64), 32), T.i32))
_simple("double2loint", "=f64", "The low 32 bits of a float64 (int32).",
        lambda e, x: e.cast(e.bitcast(x, T.i64), T.i32))


@builtin
def hiloint2double(hi, lo, _builder=None):
    """The float64 whose high 32 bits are ``hi`` and low 32 bits ``lo`` (int32s)."""
    e = Emit(_builder)
    h, lo_ = (_source(e, "hiloint2double", v, T.i32) for v in (hi, lo))
    bits = e.or_(e.shl(e.cast(h, T.i64), 32), e.cast(e.bitcast(lo_, T.u32), T.i64))
    return e.bitcast(bits, T.f64)


# ------------------------------------------------------------ integers
for _n, _impl, _args, _doc in [
        ("clz", I.clz, "i", "Leading zero bits (int32)."),
        ("popc", I.popc, "i", "Set bits (int32)."),
        ("brev", I.brev, "i", "The bits reversed."),
        ("ffs", I.ffs, "i", "1-based index of the lowest set bit, 0 for 0 (int32)."),
        ("byte_perm", I.byte_perm, "iii", "CUDA's __byte_perm(x, y, s) (int32)."),
        ("mulhi", I.mulhi, "ii", "High half of the double-width product (signed or not)."),
        ("mul24", I.mul24, "ii", "Low 32 bits of the product of the low 24 bits."),
        ("hadd", I.hadd, "ii", "floor((x + y) / 2), without overflow."),
        ("rhadd", I.rhadd, "ii", "floor((x + y + 1) / 2), without overflow.")]:
    _simple(_n, _args, _doc, _impl)



@builtin
def sad(x, y, z, _builder=None):
    """|x - y| + z: x and y int32 (result int32) or uint32 (result uint32), z uint32; the
    difference is taken without overflow."""
    e = Emit(_builder)
    x, y = _ints(e, "sad", (x, y))
    if x.dtype.bits != 32:
        fail(f"libdevice.sad needs 32-bit integers, got {S.describe(x)}")
    zt = S.to_tensor(z, _builder)
    if not zt.dtype.is_int() or zt.dtype.bits > 32:
        fail(f"libdevice.sad's z must be a 32-bit integer, got {S.describe(zt)}")
    return I.sad(e, x, y, e.cast(zt, T.u32))


# ------------------------------------------------------------ what mutile does not compute
for _n in ("fma_rz", "fma_rd", "fma_ru"):
    UNSUPPORTED[_n] = "fma with directed rounding needs the exact error of x*y+z"
UNSUPPORTED["rcp64h"] = "it is an approximate-reciprocal hardware instruction"
for _n in ("j0", "j1", "y0", "y1", "jn", "yn", "cyl_bessel_i0", "cyl_bessel_i1", "erfinv",
           "erfc", "erfcx", "erfcinv", "normcdf", "normcdfinv", "lgamma", "tgamma"):
    UNSUPPORTED[_n] = "mutile has no implementation of this special function"


def _make(r: Row):
    def fn(*args, _builder=None):
        return _call(r, args, _builder)
    fn.__name__ = fn.__qualname__ = r.name
    fn.__doc__ = r.doc
    return builtin(fn)


def _refuse(name: str, why: str):
    def fn(*args, _builder=None):
        fail(f"libdevice.{name} is not supported by mutile ({why})")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Not supported by mutile: {why}. Calling it is a CompilationError."
    return builtin(fn)


for _r in ROWS.values():
    globals()[_r.name] = _make(_r)
for _n, _why in UNSUPPORTED.items():
    if _n not in ROWS:
        globals()[_n] = _refuse(_n, _why)

__all__ = sorted(set(ROWS) | set(UNSUPPORTED) | {"hiloint2double", "sad"})
