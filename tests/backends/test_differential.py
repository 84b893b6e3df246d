"""Op-level differential test: random cases run on every backend and against numpy.

The cases (differential_kit.py) come from their seeds alone: every op of ``OPS`` in
turn (add sub mul div rem minimum maximum and or xor shl shr, the six comparisons,
neg abs exp exp2 log log2 sqrt rsqrt sin cos erf tanh floor ceil, fma, where, cast to
every dtype, bitcast, sum max min argmax argmin prod along a random axis or all,
cumsum cumprod, dot), a power-of-two 1-D/2-D/3-D tile (1..128 per dimension, at most
4096 elements; dot: M, N, K in 16..64), dtypes valid for the op (sometimes two, which
promote), ``num_warps`` in {1, 2, 4, 8} and 1-3 programs. The data come from
``random_data`` (specials where meaningful); every output is poisoned before each run.

One ``@mutile.jit`` kernel per op family serves every case through constexpr
parameters. ``prod``, which the language does not expose, compiles the ``max``
kernel's IR with the reduction's kind rewritten, by each backend directly.

Each backend is checked against the reference, then the backends against each other:
* bit for bit: integer ops, + - * / % of floats (float64 rounded once), minimum and
  maximum, comparisons, neg abs sqrt floor ceil, fma (rounded once), where,
  conversions (``semantics.convert``, which tests/ir/test_convert.py checks against an
  exact oracle, and ml_dtypes between floats where every version rounds once), bitcasts,
  integer reductions and scans, max/min/argmax/argmin, float prefix sums and products (in
  order, in f32 for narrow floats) and dot (the documented fma chain);
* within ``ULPS`` of float64 numpy, specials exact: the transcendental functions;
* within the summation bound: float sum and prod reductions (their order differs).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import ir as mir
from mutile.ir import semantics
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes, get_backend

from ..conftest import BACKENDS, assert_bits_equal, poison, random_data, tile_offsets
from .differential_kit import (BINARY, BOOL, CASES, DTYPES, F16, F64, FAST, FP8, OPS, REDUCE,
                               SCAN, UNARY, Case, arg_ref, computation_type, dot_ref, fma_ref,
                               is_float, ml_dtypes_rounds_once, round_once, scan_ref, short,
                               sum_dtype, ulp)

PREDICATES = [np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal]
POSITIVE = {"log", "log2", "sqrt", "rsqrt"}          # fed |x| (specials kept)
_erf = np.vectorize(math.erf, otypes=[np.float64])
TRANSCENDENTAL = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2,
                  "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos,
                  "erf": _erf, "tanh": np.tanh}
ROUNDED = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil}     # exact: rounded once
ULPS = {"exp": 2, "exp2": 2, "log": 2, "log2": 2, "rsqrt": 2, "sin": 2, "cos": 2, "erf": 4,
        "tanh": 4}                        # as tests/language/test_ops_math.py (CUDA's bounds)
CAST_EDGES = [1.5, 2.5, -2.5, -0.5, 0.9999, 255.9, 256.0, -129.5, 127.5, 448.0, 464.0, 465.0,
              57344.0, 61440.0, 65504.0, 65520.0, 1e5, -1e10, 2.0 ** 31, -2.0 ** 31, 2.0 ** 32,
              2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 3e38, 1e300, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
              1 + 2.0 ** -11, 1 + 2.0 ** -8 + 2.0 ** -30, 2.0 ** -20, -0.0]
PARAMS = [pytest.param(c, id=str(c), marks=[pytest.mark.slow] if c.seed >= FAST else [])
          for c in CASES]


def ir(d) -> T.ScalarType:
    return T.scalar_from_numpy(np.dtype(d))


# ---------------------------------------------------------------- kernels
@mutile.jit
def block(S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr, NDIM: ml.constexpr):
    """Offsets of this program's tile (program p holds elements p*S0*S1*S2 onwards)."""
    return ml.program_id(0) * (S0 * S1 * S2) + tile_offsets(S0, S1, S2, NDIM)


@mutile.jit
def put(O, offs, v):
    ml.static_assert(v.dtype == O.dtype.element_ty, "result dtype differs from the output's")
    ml.store(O + offs, v)


@mutile.jit
def put_result(O, v):
    """Store ``v`` (a scalar or a 1-D/2-D tile) row-major at O."""
    ml.static_assert(v.dtype == O.dtype.element_ty, "result dtype differs from the output's")
    if len(v.shape) == 0:
        ml.store(O, v)
    elif len(v.shape) == 1:
        ml.store(O + tile_offsets(v.shape[0], 1, 1, 1), v)
    else:
        ml.store(O + tile_offsets(v.shape[0], v.shape[1], 1, 2), v)


@mutile.jit
def binary(x, y, OP: ml.constexpr, VARIANT: ml.constexpr):
    if OP == "add":
        return x + y
    if OP == "sub":
        return x - y
    if OP == "mul":
        return x * y
    if OP == "div":
        return x / y if VARIANT == "/" else x // y
    if OP == "rem":
        return x % y
    if OP == "minimum":
        return ml.minimum(x, y, propagate_nan=ml.PropagateNan.ALL) if VARIANT == "nan_all" \
            else ml.minimum(x, y)
    if OP == "maximum":
        return ml.maximum(x, y, propagate_nan=ml.PropagateNan.ALL) if VARIANT == "nan_all" \
            else ml.maximum(x, y)
    if OP == "and":
        return x & y
    if OP == "or":
        return x | y
    if OP == "xor":
        return x ^ y
    if OP == "shl":
        return x << y
    return x >> y


@mutile.jit
def binary_kernel(X, Y, O, OP: ml.constexpr, VARIANT: ml.constexpr, S0: ml.constexpr,
                  S1: ml.constexpr, S2: ml.constexpr, NDIM: ml.constexpr):
    offs = block(S0, S1, S2, NDIM)
    put(O, offs, binary(ml.load(X + offs), ml.load(Y + offs), OP, VARIANT))


@mutile.jit
def cmp_kernel(X, Y, O, S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr,
               NDIM: ml.constexpr):
    """O[i] = the i-th comparison of PREDICATES, as int1."""
    offs = block(S0, S1, S2, NDIM)
    x, y = ml.load(X + offs), ml.load(Y + offs)
    n = ml.num_programs(0) * (S0 * S1 * S2)
    cmps = (x < y, x <= y, x > y, x >= y, x == y, x != y)
    for i in ml.static_range(6):
        put(O, i * n + offs, cmps[i])


@mutile.jit
def unary(x, OP: ml.constexpr):
    if OP == "neg":
        return -x
    if OP == "abs":
        return ml.abs(x)
    if OP == "exp":
        return ml.exp(x)
    if OP == "exp2":
        return ml.exp2(x)
    if OP == "log":
        return ml.log(x)
    if OP == "log2":
        return ml.log2(x)
    if OP == "sqrt":
        return ml.sqrt(x)
    if OP == "rsqrt":
        return ml.rsqrt(x)
    if OP == "sin":
        return ml.sin(x)
    if OP == "cos":
        return ml.cos(x)
    if OP == "erf":
        return ml.erf(x)
    if OP == "tanh":
        return ml.tanh(x)
    if OP == "floor":
        return ml.floor(x)
    return ml.ceil(x)


@mutile.jit
def unary_kernel(X, O, OP: ml.constexpr, S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr,
                 NDIM: ml.constexpr):
    offs = block(S0, S1, S2, NDIM)
    put(O, offs, unary(ml.load(X + offs), OP))


@mutile.jit
def ternary_kernel(X, Y, Z, O, OP: ml.constexpr, S0: ml.constexpr, S1: ml.constexpr,
                   S2: ml.constexpr, NDIM: ml.constexpr):
    offs = block(S0, S1, S2, NDIM)
    x, y, z = ml.load(X + offs), ml.load(Y + offs), ml.load(Z + offs)
    put(O, offs, ml.fma(x, y, z) if OP == "fma" else ml.where(x, y, z))


@mutile.jit
def cast_kernel(X, O0, O1, O2, O3, O4, O5, O6, O7, O8, O9, O10, O11, O12, O13, O14,
                S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr, NDIM: ml.constexpr):
    """x.to(every dtype of DTYPES)."""
    offs = block(S0, S1, S2, NDIM)
    x = ml.load(X + offs)
    outs = (O0, O1, O2, O3, O4, O5, O6, O7, O8, O9, O10, O11, O12, O13, O14)
    for i in ml.static_range(15):
        put(outs[i], offs, x.to(outs[i].dtype.element_ty))


@mutile.jit
def bitcast_kernel(X, O, S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr,
                   NDIM: ml.constexpr):
    offs = block(S0, S1, S2, NDIM)
    put(O, offs, ml.load(X + offs).to(O.dtype.element_ty, bitcast=True))


@mutile.jit
def reduce_kernel(X, O, OP: ml.constexpr, AXIS: ml.constexpr, S0: ml.constexpr,
                  S1: ml.constexpr, S2: ml.constexpr, NDIM: ml.constexpr):
    """O = OP(x, axis=AXIS) row-major; scans store the whole tile. ``prod`` runs this
    kernel's ``max`` IR with the kind rewritten."""
    x = ml.load(X + tile_offsets(S0, S1, S2, NDIM))
    if OP == "sum":
        put_result(O, ml.sum(x, axis=AXIS))
    elif OP == "max":
        put_result(O, ml.max(x, axis=AXIS))
    elif OP == "min":
        put_result(O, ml.min(x, axis=AXIS))
    elif OP == "argmax":
        put_result(O, ml.argmax(x, axis=AXIS))
    elif OP == "argmin":
        put_result(O, ml.argmin(x, axis=AXIS))
    elif OP == "cumsum":
        put(O, tile_offsets(S0, S1, S2, NDIM), ml.cumsum(x, axis=AXIS))
    else:
        put(O, tile_offsets(S0, S1, S2, NDIM), ml.cumprod(x, axis=AXIS))


@mutile.jit
def dot_kernel(A, B, C, O, M: ml.constexpr, N: ml.constexpr, K: ml.constexpr,
               PREC: ml.constexpr, USE_ACC: ml.constexpr):
    rm, rn, rk = ml.arange(0, M), ml.arange(0, N), ml.arange(0, K)
    a = ml.load(A + rm[:, None] * K + rk[None, :])
    b = ml.load(B + rk[:, None] * N + rn[None, :])
    acc = ml.load(C + rm[:, None] * N + rn[None, :]) if USE_ACC else None
    r = ml.dot(a, b, acc, input_precision=PREC, out_dtype=O.dtype.element_ty)
    put(O, rm[:, None] * N + rn[None, :], r)


# ---------------------------------------------------------------- launching
def dims(shape) -> dict:
    s = tuple(shape) + (1,) * (3 - len(shape))
    return {"S0": s[0], "S1": s[1], "S2": s[2], "NDIM": len(shape)}


def launch(kernel, case: Case, inputs: list, outputs: list, grid=(1,), **consts) -> dict:
    """Run ``kernel`` on every backend on copies of ``inputs`` and freshly poisoned
    ``outputs`` ((shape, dtype) pairs): {backend: [output arrays]}."""
    got = {}
    for be in BACKENDS:
        outs = [poison(s, d) for s, d in outputs]
        kernel[grid](*[x.copy() for x in inputs], *outs, **consts, backend=be,
                     num_warps=case.num_warps)
        got[be] = outs
    return got


def single(got: dict) -> dict:
    """{backend: the only output} of a :func:`launch` with one output."""
    return {be: outs[0] for be, outs in got.items()}


def launch_ir(text: str, case: Case, x, out_shape, out_dtype) -> dict:
    """Compile the IR ``text`` with every backend directly and run it on ``x`` and a
    poisoned output: {backend: output}."""
    got = {}
    for be in BACKENDS:
        out = poison(out_shape, out_dtype)
        kernel = get_backend(be).compile(mir.verify(mir.parse(text)),
                                         {"num_warps": case.num_warps})
        kernel.run([x.copy(), out], (1,))
        got[be] = out
    return got


# ---------------------------------------------------------------- comparisons
def agree(got: dict, what: str):
    """Every backend's result equals the first backend's bit for bit."""
    first, *rest = BACKENDS
    for be in rest:
        assert_bits_equal(got[be], got[first], f"{what}: {be} vs {first}")


def check_exact(got: dict, want, what: str, signed_zeros=True):
    """Each backend bit for bit equal to ``want`` (zeros of either sign equal unless
    ``signed_zeros``), then the backends to each other bit for bit."""
    for be in BACKENDS:
        g = np.asarray(got[be])
        w = np.asarray(want).astype(g.dtype)
        if not signed_zeros and is_float(g.dtype):
            g, w = g + g.dtype.type(0), w + w.dtype.type(0)     # -0 + 0 == +0
        assert_bits_equal(g, w, f"{what} [{be}] vs numpy")
    agree(got, what)


def check_close(got: dict, want64, tol, what: str):
    """Each backend within ``tol`` of the float64 ``want64``; where ``want64`` is not
    finite the result must be the same special (NaN, or the infinity's sign)."""
    want64 = np.asarray(want64, np.float64)
    special = ~np.isfinite(want64)
    tol = np.broadcast_to(tol, want64.shape)
    for be in BACKENDS:
        g = np.asarray(got[be]).astype(np.float64)
        same = (g == want64) | (np.isnan(g) & np.isnan(want64))
        assert same[special].all(), f"{what} [{be}]: specials {g[special & ~same][:4]} " \
                                    f"want {want64[special & ~same][:4]}"
        with np.errstate(invalid="ignore"):
            err = np.abs(g - want64)
        bad = ~special & ~(err <= tol)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise AssertionError(f"{what} [{be}]: {int(bad.sum())} of {bad.size} off, at {i} "
                                 f"got {g[i]!r} want {want64[i]!r} (err {err[i]:.3g} > "
                                 f"{tol[i]:.3g})")


def check_ulps(got: dict, want64, dtype, ulps: int, what: str):
    """Within ``ulps`` of ``dtype`` (1 for types narrower than f32, which compute in f32
    and round once); results that round to a special in ``dtype`` must be that special."""
    ulps = ulps if np.dtype(dtype).itemsize >= 4 else min(ulps, 1)
    with np.errstate(all="ignore"):
        rounded = round_once(want64, dtype).astype(np.float64)
    want = np.where(np.isfinite(rounded), want64, rounded)
    check_close(got, want, np.maximum(ulps, 0.5) * ulp(want, dtype), f"{what} ({ulps} ulp)")


# ---------------------------------------------------------------- families
def operands(xd, yd, shape, rng):
    """x and y for a binary op: their specials / edges (the first 8 elements) paired
    in a random order, and 8 equal pairs after them when the dtypes agree."""
    x, y = random_data(xd, shape, rng), random_data(yd, shape, rng)
    fy = y.reshape(-1)
    fy[:8] = fy[:8][rng.permutation(min(8, fy.size))]
    if xd == yd:
        fy[8:16] = x.reshape(-1)[8:16]
    return x, y


def run_binary(case: Case, rng):
    op, (xd, yd), v = case.op, case.dtypes, case.variant
    shape = (case.programs,) + case.shape
    x, y = operands(xd, yd, shape, rng)
    if op in ("shl", "shr"):
        y = rng.integers(0, 8 * yd.itemsize + 4, shape).astype(yd)
    ct = computation_type(xd, yd, op, v)
    grid = (case.programs,)
    if op == "cmp":
        got = single(launch(cmp_kernel, case, [x, y], [((6,) + shape, BOOL)], grid,
                            **dims(case.shape)))
    else:
        got = single(launch(binary_kernel, case, [x, y], [(shape, ct)], grid, OP=op,
                            VARIANT=v, **dims(case.shape)))
    cx, cy = (semantics.convert(a, ir(d), ir(ct)) for a, d in ((x, xd), (y, yd)))
    what = f"{short(xd)} {op}{v} {short(yd)}"
    if op == "cmp":
        a, b = (cx.astype(np.float64), cy.astype(np.float64)) if is_float(ct) else (cx, cy)
        return check_exact(got, np.stack([f(a, b) for f in PREDICATES]), what)
    if not is_float(ct):
        name = {"minimum": "min", "maximum": "max"}.get(op, op)
        return check_exact(got, semantics.evaluate(name, {}, [cx, cy], ir(ct), ir(ct)), what)
    check_exact(got, float_binary(op, v, cx, cy, ct), what,
                signed_zeros=op not in ("minimum", "maximum"))


def float_binary(op, variant, cx, cy, ct):
    """The float result of ``op`` on operands already in the computation type."""
    a, b = cx.astype(np.float64), cy.astype(np.float64)
    with np.errstate(all="ignore"):
        if op in ("add", "sub", "mul", "div"):
            f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
            return round_once(f(a, b), ct)
        if op == "rem":
            return np.fmod(cx, cy)                   # exact in any precision
        if variant == "nan_all":
            return {"minimum": np.minimum, "maximum": np.maximum}[op](a, b).astype(ct)
        return {"minimum": np.fmin, "maximum": np.fmax}[op](a, b).astype(ct)


def run_unary(case: Case, rng):
    op, (d,) = case.op, case.dtypes
    shape = (case.programs,) + case.shape
    x = random_data(d, shape, rng)
    if op in POSITIVE:
        flat = x.reshape(-1)
        flat[8:] = np.abs(flat[8:])                  # keep the specials (-1, -inf, -0)
    got = single(launch(unary_kernel, case, [x], [(shape, d)], (case.programs,), OP=op,
                        **dims(case.shape)))
    what = f"{op} {short(d)}"
    if not is_float(d):
        return check_exact(got, semantics.evaluate(op, {}, [x], ir(d), ir(d)), what)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if op in ("neg", "abs"):
            return check_exact(got, (-x if op == "neg" else np.abs(x)).astype(d), what)
        if op in ROUNDED:
            return check_exact(got, round_once(ROUNDED[op](x64), d), what)
        want64 = TRANSCENDENTAL[op](x64)
    check_ulps(got, want64, d, ULPS[op], what)


def run_ternary(case: Case, rng):
    shape, grid = (case.programs,) + case.shape, (case.programs,)
    if case.op == "where":
        d = case.dtypes[1]
        od = F16 if d in FP8 else d                   # fp8 computes as f16
        c = rng.random(shape) < 0.5
        x, y = random_data(d, shape, rng), random_data(d, shape, rng)
        got = single(launch(ternary_kernel, case, [c, x, y], [(shape, od)], grid, OP="where",
                            **dims(case.shape)))
        return check_exact(got, np.where(c, x, y).astype(od), f"where {short(d)}")
    d = case.dtypes[0]
    x, y, z = (random_data(d, shape, rng) for _ in range(3))
    got = single(launch(ternary_kernel, case, [x, y, z], [(shape, d)], grid, OP="fma",
                        **dims(case.shape)))
    check_exact(got, fma_ref(x, y, z, d), f"fma {short(d)}")


def run_cast(case: Case, rng):
    shape, grid = (case.programs,) + case.shape, (case.programs,)
    if case.op == "bitcast":
        src, dst = case.dtypes
        u = np.dtype(f"u{src.itemsize}")
        x = rng.integers(0, np.iinfo(u).max, shape, dtype=u, endpoint=True).view(src)
        got = single(launch(bitcast_kernel, case, [x], [(shape, dst)], grid,
                            **dims(case.shape)))
        got = {be: g.view(u) for be, g in got.items()}        # NaN payloads too
        return check_exact(got, x.view(u), f"bitcast {short(src)} -> {short(dst)}")
    (src,) = case.dtypes
    x = random_data(src, shape, rng)
    if is_float(src):
        flat = x.reshape(-1)
        with np.errstate(all="ignore"):
            edges = np.array(CAST_EDGES + [-v for v in CAST_EDGES[:16]]).astype(src)
        k = max(0, min(flat.size - 8, len(edges)))
        flat[8:8 + k] = edges[:k]
    got = launch(cast_kernel, case, [x], [(shape, d) for d in DTYPES], grid, **dims(case.shape))
    for i, dst in enumerate(DTYPES):
        what = f"{short(src)} -> {short(dst)}"
        with np.errstate(all="ignore"):
            want = semantics.convert(x, ir(src), ir(dst))
            if is_float(src) and is_float(dst) and ml_dtypes_rounds_once(src, dst):
                assert_bits_equal(np.asarray(want).astype(dst), x.astype(dst),
                                  f"{what}: semantics.convert vs ml_dtypes")
        check_exact({be: g[i] for be, g in got.items()}, want, what)


def reduce_input(case: Case, rng):
    op, (d,) = case.op, case.dtypes
    x = random_data(d, case.shape, rng, specials=rng.random() < 0.7)
    flat = x.reshape(-1)
    if op in ("prod", "cumprod") and is_float(d):        # near 1, so products stay finite
        near1 = rng.uniform(0.75, 1.33, flat.size) * rng.choice([-1.0, 1.0], flat.size)
        flat[8:] = near1[8:].astype(d)
        if op == "prod":       # no subnormal: a product through one depends on the order
            flat[5:6] = d.type(0.5)
    if op in ("argmax", "argmin", "max", "min") and not is_float(d) and rng.random() < 0.5:
        flat[:] = rng.integers(0, 4, flat.size).astype(d)     # many ties
    return x


def run_reduce(case: Case, rng):
    op, (d,), axis = case.op, case.dtypes, case.axis
    x = reduce_input(case, rng)
    od = np.dtype(np.int32) if op.startswith("arg") else sum_dtype(d, op)
    oshape = case.shape if op in SCAN else () if axis is None else \
        case.shape[:axis] + case.shape[axis + 1:]
    consts = dict(OP="max" if op == "prod" else op, AXIS=axis, **dims(case.shape))
    if op == "prod":
        spec = {"X": T.PointerType(ir(d)), "O": T.PointerType(ir(od)), **consts}
        text = str(frontend_and_passes(reduce_kernel, spec, {})[0])
        assert text.count('kind = "max"') == 1, text
        got = launch_ir(text.replace('kind = "max"', 'kind = "prod"'), case, x, oshape, od)
    else:
        got = single(launch(reduce_kernel, case, [x], [(oshape, od)], **consts))
    what = f"{op} {short(d)} axis {axis}"
    xa, ax = (x.reshape(-1), 0) if axis is None else (x, axis)
    if op in SCAN:
        return check_exact(got, scan_ref(xa, ax, op, od), what)
    if op.startswith("arg"):
        return check_exact(got, arg_ref(xa, ax, op), what)
    if not is_float(d):
        with np.errstate(over="ignore"):
            want = {"sum": lambda a: a.astype(od).sum(ax, dtype=od),
                    "prod": lambda a: a.prod(ax, dtype=od), "max": lambda a: a.max(ax),
                    "min": lambda a: a.min(ax)}[op](xa)
        return check_exact(got, want, what)
    w = xa.astype(np.float64)
    if op in ("max", "min"):
        want = (np.fmax if op == "max" else np.fmin).reduce(w, axis=ax)
        return check_exact(got, want.astype(od), what, signed_zeros=False)
    n, u = w.shape[ax], 2.0 ** -53 if d == F64 else 2.0 ** -24     # accumulation unit
    with np.errstate(all="ignore"):
        want = w.sum(ax) if op == "sum" else w.prod(ax)
        mag = np.abs(w).sum(ax) if op == "sum" else np.abs(want) * 1.01
        tol = n * u * mag + ulp(want, od) + 1e-300
    check_close(got, want, tol, what)


def run_dot(case: Case, rng):
    (d,), (m, n, k) = case.dtypes, case.shape
    prec, use_acc = case.variant.split("-")[0], case.variant.endswith("-acc")
    is_int = not is_float(d)
    od = np.dtype(np.int32) if is_int else F16 if prec == "f16acc" else np.dtype(np.float32)
    if is_int:
        a, b = random_data(d, (m, k), rng), random_data(d, (k, n), rng)
        c = rng.integers(-1000, 1000, (m, n)).astype(od)
    else:
        a, b, c = (random_data(t, s, rng, specials=False, scale=0.125)
                   for t, s in ((d, (m, k)), (d, (k, n)), (od, (m, n))))
    got = single(launch(dot_kernel, case, [a, b, c], [((m, n), od)], M=m, N=n, K=k,
                        PREC="tf32" if prec == "tf32" else "ieee", USE_ACC=use_acc))
    acc = c if use_acc else np.zeros((m, n), od)
    what = f"dot {short(d)} {case.variant}"
    if is_int:
        want = (a.astype(np.int64) @ b.astype(np.int64) + acc).astype(od)
    else:
        want = dot_ref(a, b, acc, od, tf32=prec == "tf32")
    check_exact(got, want, what)


FAMILIES = {**dict.fromkeys(BINARY, run_binary), **dict.fromkeys(UNARY, run_unary),
            "fma": run_ternary, "where": run_ternary, "cast": run_cast, "bitcast": run_cast,
            **dict.fromkeys(REDUCE + SCAN, run_reduce), "dot": run_dot}


@pytest.mark.parametrize("case", PARAMS)
def test_differential(case, rng):
    FAMILIES[case.op](case, rng)


def test_cases_cover_every_op_and_dtype():
    """The default run draws every op at least twice and every dtype somewhere, on 1, 2,
    4 and 8 warps and 1-D, 2-D and 3-D tiles; every tile is a power of two per
    dimension, 1..128, at most 4096 elements."""
    fast = CASES[:FAST]
    assert all(sum(c.op == op for c in fast) >= 2 for op in OPS)
    seen = {d for c in fast for d in c.dtypes}
    assert set(DTYPES) <= seen, set(DTYPES) - seen
    assert {c.num_warps for c in fast} == {1, 2, 4, 8}
    assert {len(c.shape) for c in fast if c.op != "dot"} == {1, 2, 3}
    for c in CASES:
        assert all(1 <= s <= 128 and s & (s - 1) == 0 for s in c.shape), c
        assert np.prod(c.shape) <= 4096 or c.op == "dot", c


# ---------------------------------------------------------------- found by this test
@mutile.jit
def reduce_ahead_of_unit_axis(X, O, R: ml.constexpr):
    x = ml.load(X + ml.arange(0, R)[:, None] + ml.arange(0, 1)[None, :])    # (R, 1)
    ml.store(O + ml.arange(0, 1), ml.sum(x, axis=0))


def test_reduce_ahead_of_a_unit_axis(backend):
    """sum over axis 0 of an (R, 1) tile (any reduction over an axis followed only by
    size-1 axes: (8, 32, 1) along axis 1 ...) is the sum of the column."""
    x = np.arange(1, 9, dtype=np.float32)
    o = poison(1, np.float32)
    reduce_ahead_of_unit_axis[(1,)](x, o, R=8, backend=backend)
    assert_bits_equal(o, np.array([36.0], np.float32), "sum of an (8, 1) tile along axis 0")


@pytest.mark.parametrize("op", ["minimum", "maximum"])
def test_signed_zeros_agree(op):
    """minimum/maximum of +0 and -0 (ops of ``semantics.EXACT``) have the same bits on
    every backend."""
    x = np.array([0.0, -0.0, 0.0, -0.0], np.float32)
    y = np.array([-0.0, 0.0, 0.0, -0.0], np.float32)
    case = Case(0, op, (x.dtype, y.dtype), (4,), num_warps=1)
    got = single(launch(binary_kernel, case, [x, y], [((1, 4), x.dtype)], OP=op, VARIANT="",
                        **dims((4,))))
    agree(got, f"{op}([0, -0, 0, -0], [-0, 0, 0, -0])")
