"""``libdevice`` (``mutile.language.extra.libdevice`` and its ``cuda``/``musa`` import
paths): the approximated math functions against long-double numpy references, in ulps of
the result type, for float32 and float64 on both backends; the import paths; the names
mutile refuses; ``ml.math``'s ``fast_*`` and Triton 2's libdevice names; the standard
library helpers published kernels import.

Tolerances (ulps of the result, inputs over each function's whole range including
subnormals, zeros, infinities and NaN; specials must match exactly):

* 0.5 (correctly rounded): sqrt, sqrt_rn; fast_dividef as division;
* 2: exp, exp2, log, log2, sin, cos, rsqrt and their fast_* forms (mutile's own ops);
* 4: tanh, erf, log1p, expm1, sinh, cosh, asinh, acosh, atanh, exp10, log10, sinpi, cospi,
  cbrt, rcbrt, atan, asin, acos, atan2, hypot, rhypot, norm3d/4d and rnorm3d/4d, pow; 6
  for tan (sin / cos);
  rsqrt_rn 0.5 (float32 computes in float64 and rounds once; float64: 2).

The references are numpy's long-double functions (64-bit significands), ``math.erf`` for
erf (so float64 erf gets one more ulp), and for sinpi/cospi the argument reduced modulo 2
and folded to [0, 1/2] exactly before sin(pi x) is taken in long double.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile.runtime.compile import frontend_and_passes

from ..conftest import assert_bits_equal, marked, poison
from .libdevice_kit import BLOCK, assert_within, run

LD = np.longdouble
pytestmark = pytest.mark.skipif(np.finfo(LD).nmant < 63,
                                reason="needs an x87 long double for float64 references")
PI = LD("3.14159265358979323846264338327950288")


# ------------------------------------------------------------------ inputs
def spread(rng, lo, hi, n, signed=True):
    """Magnitudes 2**U(lo, hi) * U(1, 2), random signs."""
    v = np.exp2(rng.uniform(lo, hi, n)) * rng.uniform(1, 2, n)
    return v * rng.choice([-1.0, 1.0], n) if signed else v


def with_specials(v, dtype, extra=()):
    v = np.array(v, np.float64)
    sp = [0.0, -0.0, np.inf, -np.inf, np.nan, float(np.finfo(dtype).smallest_subnormal) * 3,
          1.0, -1.0] + list(extra)
    v[: len(sp)] = sp
    return v.astype(dtype)


def inputs(name, dtype, rng):
    n, big = BLOCK, 1 if dtype == np.float32 else 8
    emax = 127 if dtype == np.float32 else 1023
    u = lambda lo, hi: rng.uniform(lo, hi, n)                         # noqa: E731
    table = {
        "exp": u(-90 * big, 90 * big), "exp2": u(-130 * big, 130 * big),
        "log": spread(rng, -emax - 20, emax, n), "log2": spread(rng, -emax - 20, emax, n),
        "sin": u(-20, 20), "cos": u(-20, 20), "tan": u(-10, 10), "tanh": spread(rng, -20, 5, n),
        "erf": spread(rng, -20, 3, n), "sqrt": spread(rng, -emax - 20, emax, n, False),
        "rsqrt": spread(rng, -emax + 2, emax, n, False),
        "rsqrt_rn": spread(rng, -emax + 2, emax, n, False),
        "log1p": np.concatenate([spread(rng, -60, -1, n // 2) * 0.99,
                                 spread(rng, -3, emax, n - n // 2, False)]),
        "expm1": np.concatenate([spread(rng, -60, 0, n // 2), u(-80 * big, 80 * big)[n // 2:]]),
        "sinh": np.concatenate([spread(rng, -40, 0, n // 2), u(-89 * big, 89 * big)[n // 2:]]),
        "cosh": u(-89 * big, 89 * big), "asinh": spread(rng, -40, emax, n),
        "acosh": 1 + spread(rng, -40, emax, n, False), "atanh": spread(rng, -40, -0.001, n),
        "exp10": u(-38 * big, 38 * big), "log10": spread(rng, -emax - 20, emax, n),
        "sinpi": np.concatenate([u(-10, 10)[: n // 2], np.round(u(-50, 50) * 2)[: n // 4] / 2,
                                 spread(rng, -30, 30, n - n // 2 - n // 4)]),
        "cbrt": spread(rng, -emax - 20, emax, n), "rcbrt": spread(rng, -emax + 2, emax, n),
        "atan": spread(rng, -40, 40, n),
        "asin": np.concatenate([u(-1, 1)[: n // 2], 1 - spread(rng, -50, -1, n - n // 2)]),
    }
    key = {"fast_expf": "exp", "fast_logf": "log", "fast_log2f": "log2", "fast_sinf": "sin",
           "fast_cosf": "cos", "fast_tanf": "tan", "fast_exp10f": "exp10",
           "fast_log10f": "log10", "cospi": "sinpi", "sqrt_rn": "sqrt",
           "acos": "asin"}.get(name, name)
    extra = {"log1p": [-1.0, 1e-30], "acosh": [0.5], "atanh": [0.999999, -0.5],
             "sinpi": [0.5, -1.5, 2.0 ** 24 + 1, 1e30], "asin": [0.5, -0.5, 1.0000001, -1.0]
             }.get(key, [])
    return with_specials(table[key], dtype, extra)


# ------------------------------------------------------------------ references
def _fold_pi(x, cos):
    """sin(pi x) (or cos) with x reduced mod 2 and folded to [0, 1/2] exactly."""
    r = np.fmod(x.astype(np.float64), 2.0).astype(LD)          # exact
    r = np.where(r > 1, r - 2, np.where(r < -1, r + 2, r))     # (-1, 1], exact
    a = np.abs(r)
    if not cos:
        b = np.where(a > 0.5, 1 - a, a)
        s = np.sin(PI * b)
        return np.where(s == 0, np.copysign(LD(0), x.astype(LD)), np.copysign(s, r))
    flip = a > 0.5
    c = np.where(flip, 1 - a, a)
    v = np.sin(PI * (LD(0.5) - c))
    return np.where(flip, -v, v)


_erf = np.vectorize(math.erf, otypes=[np.float64])
UNARY = {  # name: (reference on long doubles, ulps)
    "exp": (np.exp, 2), "exp2": (np.exp2, 2), "log": (np.log, 2), "log2": (np.log2, 2),
    "sin": (np.sin, 2), "cos": (np.cos, 2), "sqrt": (np.sqrt, 0.5), "sqrt_rn": (np.sqrt, 0.5),
    "rsqrt": (lambda v: 1 / np.sqrt(v), 2), "rsqrt_rn": (lambda v: 1 / np.sqrt(v), (0.5, 2)),
    "tanh": (np.tanh, 4), "erf": (lambda v: _erf(v.astype(np.float64)).astype(LD), 4),
    "fast_expf": (np.exp, 2), "fast_logf": (np.log, 2), "fast_log2f": (np.log2, 2),
    "fast_sinf": (np.sin, 2), "fast_cosf": (np.cos, 2), "tan": (np.tan, 6),
    "fast_tanf": (np.tan, 6), "log1p": (np.log1p, 4), "expm1": (np.expm1, 4),
    "sinh": (np.sinh, 4), "cosh": (np.cosh, 4), "asinh": (np.arcsinh, 4),
    "acosh": (np.arccosh, 4), "atanh": (np.arctanh, 4),
    "exp10": (lambda v: np.power(LD(10), v), 4), "fast_exp10f": (lambda v: np.power(LD(10), v), 4),
    "log10": (np.log10, 4), "fast_log10f": (np.log10, 4),
    "sinpi": (lambda v: _fold_pi(v, False), 4), "cospi": (lambda v: _fold_pi(v, True), 4),
    "cbrt": (np.cbrt, 4), "rcbrt": (lambda v: 1 / np.cbrt(v), 4),
    "atan": (np.arctan, 4), "asin": (np.arcsin, 4), "acos": (np.arccos, 4),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_unary_functions(dtype, rng, backend):
    names = list(UNARY)
    x = np.stack([inputs(n, dtype, rng) for n in names])
    got = run(names, [x], dtype, backend)
    for k, name in enumerate(names):
        ref, tol = UNARY[name]
        with np.errstate(all="ignore"):
            want = ref(x[k].astype(LD))
        if isinstance(tol, tuple):                      # (float32, float64)
            tol = tol[dtype == np.float64]
        extra = 1 if name == "erf" and dtype == np.float64 else 0
        assert_within(name, got[k], want, dtype, tol + extra, x[k])


def binary_inputs(name, dtype, rng):
    n = BLOCK
    emax = 127 if dtype == np.float32 else 1023
    if name in ("pow", "fast_powf"):
        x = spread(rng, -20, 20, n, False)
        y = rng.uniform(-8, 8, n)
        x[:8], y[:8] = [-2.0, -3.0, 0.0, -0.0, np.inf, 1.0, 2.0, 0.5], [3, 2, -1, 3, -2, np.nan,
                                                                        0.5, 40]
        return x.astype(dtype), y.astype(dtype)
    if name == "atan2":                 # IEEE's special cases: zeros' signs, infinities
        y, x = spread(rng, -30, 30, n), spread(rng, -30, 30, n)
        y[:12] = [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.inf, 2.0, -2.0, np.nan]
        x[:12] = [0.0, 0.0, -0.0, -0.0, 0.0, -0.0, np.inf, -np.inf, 3.0, np.inf, -np.inf, 1.0]
        return y.astype(dtype), x.astype(dtype)
    x, y = spread(rng, -emax + 2, emax - 2, n), spread(rng, -emax + 2, emax - 2, n)
    with np.errstate(over="ignore"):                                  # some overflow: inf
        y[n // 2:] = x[n // 2:] * spread(rng, -30, 30, n - n // 2)   # comparable sizes
        x[:6], y[:6] = [np.inf, np.nan, np.inf, 0.0, -0.0, 3.0], [np.nan, 1.0, 2.0, 0.0, 5, -4]
        return x.astype(dtype), y.astype(dtype)


def _norm(*v):
    return np.sqrt(sum(a.astype(LD) ** 2 for a in v))


def _fix_norm(ref, *v):
    """IEEE: inf if any argument is inf (even with a NaN), else NaN if any is NaN."""
    anyinf = np.any([np.isinf(a) for a in v], axis=0)
    return np.where(anyinf, LD(np.inf), ref)


BINARY = {"pow": (lambda x, y: np.power(x, y), 4), "fast_powf": (lambda x, y: np.power(x, y), 4),
          "atan2": (np.arctan2, 4),
          "hypot": (lambda x, y: _fix_norm(_norm(x, y), x, y), 4),
          "rhypot": (lambda x, y: 1 / _fix_norm(_norm(x, y), x, y), 4)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_binary_and_norm_functions(dtype, rng, backend):
    names = list(BINARY)
    xy = [binary_inputs(n, dtype, rng) for n in names]
    got = run(names, [np.stack([a for a, _ in xy]), np.stack([b for _, b in xy])], dtype,
              backend)
    for k, name in enumerate(names):
        ref, tol = BINARY[name]
        x, y = xy[k]
        with np.errstate(all="ignore"):
            want = ref(x.astype(LD), y.astype(LD))
        assert_within(name, got[k], want, dtype, tol, np.stack([x, y], 1))
    # norms of three and four components, with one huge and one tiny lane each
    v = [spread(rng, -60, 60, BLOCK) for _ in range(4)]
    v[0][:4], v[1][:4] = [1e300, np.inf, np.nan, 0.0], [1e-300, np.nan, 1.0, 0.0]
    with np.errstate(over="ignore"):                                  # 1e300: inf in f32
        v = [a.astype(dtype) for a in v]
    for names, parts in ((["norm3d", "rnorm3d"], v[:3]), (["norm4d", "rnorm4d"], v)):
        got = run(names, [np.stack([a] * 2) for a in parts], dtype, backend)
        with np.errstate(all="ignore"):
            want = _fix_norm(_norm(*parts), *parts)
        assert_within(names[0], got[0], want, dtype, 4, np.stack(parts, 1))
        with np.errstate(all="ignore"):
            assert_within(names[1], got[1], 1 / want, dtype, 4, np.stack(parts, 1))


def test_narrow_floats_compute_in_float32(rng, backend):
    """float16 and bfloat16 arguments compute in float32 and round once to their type."""
    import ml_dtypes
    for dt in (np.float16, ml_dtypes.bfloat16):
        x = np.abs(rng.standard_normal(BLOCK)).astype(dt) + dt(0.5)
        names = ["log1p", "cbrt", "exp10"]
        got = run(names, [np.stack([x] * 3)], dt, backend)
        f32 = run(names, [np.stack([x.astype(np.float32)] * 3)], np.float32, backend)
        for k, name in enumerate(names):
            assert_bits_equal(got[k], f32[k].astype(dt), f"{np.dtype(dt).name} {name}")


# ------------------------------------------------------------------ import paths
import mutile.language.extra.cuda.libdevice as cuda_path     # noqa: E402
from mutile.language.extra import libdevice as generic_path  # noqa: E402
from mutile.language.extra.cuda.libdevice import erf as cuda_erf  # noqa: E402
from mutile.language.extra.musa import libdevice as musa_path  # noqa: E402


@mutile.jit
def three_paths(X, O, BLOCK: ml.constexpr):
    i = ml.arange(0, BLOCK)
    x = ml.load(X + i)
    ml.store(O + i, generic_path.rsqrt(x))
    ml.store(O + BLOCK + i, cuda_path.tanh(x))
    ml.store(O + 2 * BLOCK + i, musa_path.pow(x, 2.5))
    ml.store(O + 3 * BLOCK + i, cuda_erf(x))
    ml.store(O + 4 * BLOCK + i, ml.extra.libdevice.log1p(x))
    ml.store(O + 5 * BLOCK + i, ml.math.fast_dividef(x, 3.0))
    ml.store(O + 6 * BLOCK + i, ml.math.fast_expf(x))
    ml.store(O + 7 * BLOCK + i, ml.math.isnan(x).to(ml.float32))


def test_import_paths_and_ml_math(rng, backend):
    """The generic, cuda and musa paths (module attribute, ``from ... import``, and
    ``ml.extra.libdevice``) are the same builtins; ``ml.math`` carries the fast_*
    functions and Triton 2's libdevice names."""
    assert cuda_path.rsqrt is generic_path.rsqrt is musa_path.rsqrt is ml.extra.cuda.libdevice.rsqrt
    assert set(generic_path.__all__) <= set(dir(cuda_path)) and len(generic_path.__all__) > 190
    x = np.abs(rng.standard_normal(64)).astype(np.float32) + np.float32(0.1)
    x[0] = np.nan
    o = poison((8, 64), np.float32)
    three_paths[(1,)](x, o, BLOCK=64, backend=backend)
    xl = x.astype(LD)
    with np.errstate(all="ignore"):
        for row, ref, tol in ((0, 1 / np.sqrt(xl), 2), (1, np.tanh(xl), 4),
                              (2, np.power(xl, LD(2.5)), 4), (4, np.log1p(xl), 4),
                              (6, np.exp(xl), 2)):
            assert_within(f"row {row}", o[row], ref, np.float32, tol, x)
    assert_within("erf", o[3], _erf(x.astype(np.float64)).astype(LD), np.float32, 4, x)
    assert_bits_equal(o[5], (x.astype(np.float64) / 3).astype(np.float32), "fast_dividef")
    assert_bits_equal(o[7], np.isnan(x).astype(np.float32), "ml.math.isnan")


# ------------------------------------------------------------------ refused names
@mutile.jit
def k_bessel(X):
    x = ml.load(X)
    ml.store(X, generic_path.j0(x))  # LINE-MARK: generic_path.j0


@mutile.jit
def k_fma_rz(X):
    x = ml.load(X)
    ml.store(X, cuda_path.fma_rz(x, x, x))  # LINE-MARK: cuda_path.fma_rz


@mutile.jit
def k_int_arg(X, n):
    ml.store(X, generic_path.exp(n))  # LINE-MARK: generic_path.exp


@mutile.jit
def k_wrong_arity(X):
    x = ml.load(X)
    ml.store(X, generic_path.pow(x))  # LINE-MARK: generic_path.pow


@pytest.mark.parametrize("kernel,pattern", [
    (k_bessel, r"libdevice\.j0 is not supported by mutile"),
    (k_fma_rz, r"libdevice\.fma_rz is not supported by mutile"),
    (k_int_arg, r"libdevice\.exp needs floating-point arguments, got i32 'n'"),
    (k_wrong_arity, r"libdevice\.pow\(\) takes 2 argument\(s\), got 1"),
], ids=["j0", "fma_rz", "int-argument", "arity"])
def test_refused_calls_point_at_the_line(kernel, pattern):
    import re
    from mutile.ir import types as T
    spec = {"X": T.PointerType(T.f32)}
    if "n" in kernel.params:
        spec["n"] = T.i32
    with pytest.raises(mutile.CompilationError) as info:
        frontend_and_passes(kernel, spec, {}, verify=True)
    e, m = info.value, marked(kernel)
    assert re.search(pattern, e.msg), e.msg
    assert (e.loc.file, e.loc.line, e.loc.col) == (m.file, m.line, m.col), str(e)
    assert "libdevice.py" not in str(e).replace(m.file, "") and "_emit.py" not in str(e)


def test_every_unsupported_name_says_so():
    """Each refused name is a builtin whose docstring says mutile does not support it."""
    from mutile.language.extra.libdevice import UNSUPPORTED
    assert {"j0", "lgamma", "erfinv", "fma_rd", "rcp64h"} <= set(UNSUPPORTED)
    for name in UNSUPPORTED:
        assert "Not supported by mutile" in getattr(generic_path, name).__doc__, name


# ------------------------------------------------------------------ standard helpers
from mutile.language.standard import _is_power_of_two, _log2  # noqa: E402


@mutile.jit
def bitonic_steps(O, N: ml.constexpr):
    n_dims: ml.constexpr = _log2(N)
    ml.static_assert(_is_power_of_two(N))
    i = ml.arange(0, N)
    ml.store(O + i, i * 0 + n_dims)


@pytest.mark.parametrize("n", [16, 64])
def test_standard_helpers(n, backend):
    """``_log2`` / ``_is_power_of_two`` at compile time, as published sort kernels use
    them (``n_dims: tl.constexpr = _log2(x.shape[-1])``)."""
    o = poison(n, np.int32)
    bitonic_steps[(1,)](o, N=n, backend=backend)
    assert (o == int(math.log2(n))).all()
    assert [int(_log2(ml.constexpr(v))) for v in (1, 2, 3, 1024)] == [0, 1, 1, 10]
    assert [bool(_is_power_of_two(v)) for v in (0, 1, 6, 64)] == [False, True, False, True]
