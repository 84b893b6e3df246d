"""Op-level differential test: random cases run on every backend and against numpy.

Each case comes from its seed alone (the op cycles through ``OPS``; the rest is drawn):
a power-of-two 1-D/2-D/3-D tile (1..128 per dimension, at most 4096 elements; dot:
M, N, K in 16..64), dtypes valid for the op (sometimes two different ones, promoted as
docs/semantics.md says), ``num_warps`` in {1, 2, 4, 8}, 1-3 programs for elementwise
ops, and the op's variant (comparison predicate, NaN propagation, ``//`` or ``/``,
reduction axis, dot precision and accumulator). The data come from ``random_data``
(specials where meaningful) and every output is poisoned before each launch.

One ``@mutile.jit`` kernel per op family serves every case through constexpr
parameters. ``prod``, which the language does not expose, runs the ``max`` kernel's IR
with the reduction's kind rewritten, compiled by each backend directly.

Checks, per backend against the numpy reference, then between backends:
* bit for bit: the ops of ``semantics.EXACT`` (integer ops, + - * / % of floats rounded
  once from float64, min/max, comparisons, sqrt, floor, ceil, fma, where), conversions
  (``semantics.convert`` and ml_dtypes), bitcasts, integer reductions and scans,
  max/min/argmax/argmin, float prefix sums and products (in order, in f32 for narrow
  types) and dot (the documented fma chain);
* within ``ULPS`` of float64 numpy (specials exact): the transcendental functions;
* within the summation bound: float sum and prod reductions, whose order differs
  between backends.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import mutile
import mutile.language as ml
from mutile import ir as mir
from mutile.ir import semantics
from mutile.ir import types as T
from mutile.runtime.compile import frontend_and_passes, get_backend

from ..conftest import BACKENDS, assert_bits_equal, poison, random_data

BOOL, F16, F32, F64 = np.dtype(np.bool_), np.dtype(np.float16), np.dtype(np.float32), \
    np.dtype(np.float64)
BF16, E4M3, E5M2 = (np.dtype(d) for d in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                           ml_dtypes.float8_e5m2))
INTS = [np.dtype(d) for d in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                              np.uint32, np.uint64)]
FLOATS = [F16, BF16, F32, F64]
DTYPES = [BOOL] + INTS + FLOATS + [E4M3, E5M2]        # cast destinations, in kernel order

BINARY = ["add", "sub", "mul", "div", "rem", "minimum", "maximum", "and", "or", "xor", "shl",
          "shr", "cmp"]
UNARY = ["neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf",
         "tanh", "floor", "ceil"]
REDUCE = ["sum", "max", "min", "argmax", "argmin", "prod"]
SCAN = ["cumsum", "cumprod"]
OPS = BINARY + UNARY + ["fma", "where", "cast", "bitcast"] + REDUCE + SCAN + ["dot", "cast",
                                                                         "dot", "cast"]
# cast sources in the order their cases take them: every float type early
CAST_SOURCES = [F32, np.dtype(np.int32), F16, np.dtype(np.uint8), BF16, E5M2, E4M3,
                np.dtype(np.int64), F64, np.dtype(np.uint16), np.dtype(np.int8),
                np.dtype(np.uint32), BOOL, np.dtype(np.int16), np.dtype(np.uint64)]
BITWISE = {"and", "or", "xor", "shl", "shr"}
PREDICATES = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
              "eq": np.equal, "ne": np.not_equal}
POSITIVE = {"log", "log2", "sqrt", "rsqrt"}          # fed |x| (specials kept)
_erf = np.vectorize(math.erf, otypes=[np.float64])
TRANSCENDENTAL = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2,
                  "rsqrt": lambda v: 1 / np.sqrt(v), "sin": np.sin, "cos": np.cos,
                  "erf": _erf, "tanh": np.tanh}
ROUNDED = {"sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil}     # exact: rounded once
ULPS = {"exp": 2, "exp2": 2, "log": 2, "log2": 2, "rsqrt": 2, "sin": 2, "cos": 2, "erf": 4,
        "tanh": 4}                                   # docs/semantics.md, test_ops_math.py
CAST_EDGES = [1.5, 2.5, -2.5, -0.5, 0.9999, 255.9, 256.0, -129.5, 127.5, 448.0, 464.0, 465.0,
              57344.0, 61440.0, 65504.0, 65520.0, 1e5, -1e10, 2.0 ** 31, -2.0 ** 31, 2.0 ** 32,
              2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 3e38, 1e300, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
              1 + 2.0 ** -11, 1 + 2.0 ** -8 + 2.0 ** -30, 2.0 ** -20, -0.0]


def is_float(d) -> bool:
    return np.dtype(d) in (F16, BF16, F32, F64, E4M3, E5M2)


def ir(d) -> T.ScalarType:
    return T.scalar_from_numpy(np.dtype(d))


def short(d) -> str:
    return {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "bfloat16": "bf16", "bool": "i1"}.get(
        np.dtype(d).name, np.dtype(d).name.replace("float", "f").replace("uint", "u")
        .replace("int", "i"))


# ---------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One drawn case; ``variant`` is the op's option (predicate, "//", "nan_all", ...)."""
    seed: int
    op: str
    dtypes: tuple           # operand dtypes (bitcast: source, destination)
    shape: tuple            # the tile (dot: M, N, K)
    num_warps: int
    programs: int = 1
    axis: int | None = None
    variant: str = ""

    def __str__(self):
        parts = [f"{self.seed:03d}", self.op, self.variant, "-".join(map(short, self.dtypes)),
                 "x".join(map(str, self.shape)), "" if self.axis is None and self.op not in REDUCE
                 else f"ax{self.axis}", f"p{self.programs}" if self.programs > 1 else "",
                 f"w{self.num_warps}"]
        return "-".join(p for p in parts if p)


def draw_shape(rng) -> tuple:
    """1-3 dimensions, each a power of two <= 128, at most 4096 elements (mostly 8+)."""
    ndim = int(rng.integers(1, 4))
    total = int(rng.integers(3, 13) if rng.random() < 0.85 else rng.integers(0, 3))
    logs = [0] * ndim
    for _ in range(min(total, 7 * ndim)):
        logs[pick(rng, [i for i in range(ndim) if logs[i] < 7])] += 1
    return tuple(2 ** v for v in logs)


def pick(rng, items):
    return items[int(rng.integers(len(items)))]


def stratified(seed: int, pool: list, shuffle=True):
    """The dtype of an op's n-th case (the n-th seed drawing that op): the n-th of
    ``pool`` (in a fixed shuffle for that op), so an op's cases cover different dtypes."""
    op = OPS[seed % len(OPS)]
    n = sum(OPS[s % len(OPS)] == op for s in range(seed))
    order = np.random.default_rng(zlib.crc32(op.encode())).permutation(len(pool)) \
        if shuffle else range(len(pool))
    return pool[order[n % len(pool)]]


DOT_DTYPES = [np.dtype(np.int8), np.dtype(np.uint8), F16, BF16, F32, E4M3, E5M2]


def draw_case(seed: int) -> Case:
    rng = np.random.default_rng(seed)
    op = OPS[seed % len(OPS)]
    warps = int(pick(rng, [1, 2, 4, 8]))
    if op == "dot":
        a = stratified(seed, DOT_DTYPES)
        shape = tuple(int(pick(rng, [16, 32, 64])) for _ in range(3))
        if a == F32:
            variant = pick(rng, ["tf32", "ieee"])
        elif a == F16 and rng.random() < 0.5:
            variant, shape = "f16acc", tuple(min(s, 32) for s in shape)
        else:
            variant = "ieee"
        return Case(seed, op, (a,), shape, warps,
                    variant=variant + ("-acc" if rng.random() < 0.5 else ""))
    shape = draw_shape(rng)
    if op in REDUCE or op in SCAN:
        axis = int(rng.integers(len(shape)))
        if op in ("sum", "max", "argmin") and rng.random() < 0.25:
            axis = None
        return Case(seed, op, (stratified(seed, INTS + FLOATS),), shape, warps, axis=axis)
    programs = int(rng.integers(1, 4))
    if op == "cast":
        return Case(seed, op, (stratified(seed, CAST_SOURCES, False),), shape, warps,
                    programs)
    if op == "bitcast":
        src = stratified(seed, DTYPES[1:])
        dst = pick(rng, [d for d in DTYPES[1:] if d.itemsize == src.itemsize and d != src])
        return Case(seed, op, (src, dst), shape, warps, programs)
    if op == "where":
        return Case(seed, op, (BOOL, stratified(seed, DTYPES)), shape, warps, programs)
    if op in UNARY:
        pool = FLOATS + INTS if op in ("neg", "abs") else FLOATS
        return Case(seed, op, (stratified(seed, pool),), shape, warps, programs)
    if op == "fma":
        return Case(seed, op, (stratified(seed, FLOATS),), shape, warps, programs)
    pool = INTS if op in BITWISE else INTS + FLOATS
    x = stratified(seed, pool)
    y = x if rng.random() < 0.6 else pick(rng, pool)
    fl = is_float(x) or is_float(y)
    nan = pick(rng, ["", "nan_all"]) if fl else ""
    variant = {"cmp": pick(rng, list(PREDICATES)), "minimum": nan, "maximum": nan,
               "div": "/" if fl or rng.random() < 0.25 else "//"}.get(op, "")
    return Case(seed, op, (x, y), shape, warps, programs, variant=variant)


FAST = 120                                  # cases in the default run; as many again are slow
CASES = [draw_case(s) for s in range(2 * FAST)]
PARAMS = [pytest.param(c, id=str(c), marks=[pytest.mark.slow] if c.seed >= FAST else [])
          for c in CASES]


# ---------------------------------------------------------------- promotion (the docs' rules)
def computation_type(a, b, op: str, variant: str = ""):
    """The dtype a binary op on dtypes ``a`` and ``b`` computes in (docs/semantics.md)."""
    fa, fb = is_float(a), is_float(b)
    if fa or fb:
        fl = [d for d in (a, b) if is_float(d)]
        if F64 in fl:
            t = F64
        elif F32 in fl:
            t = F32
        elif F16 in fl or E4M3 in fl or E5M2 in fl:       # fp8 computes as f16
            t = F16
        else:
            t = BF16 if (fa and fb) else F32
        return F32 if op in ("div", "rem") and t in (F16, BF16) else t
    if variant == "/":
        return F32
    if a.itemsize != b.itemsize:
        return a if a.itemsize > b.itemsize else b
    return a if a.kind == "u" else b


# ---------------------------------------------------------------- kernels
@mutile.jit
def tile_offsets(S0: ml.constexpr, S1: ml.constexpr, S2: ml.constexpr, NDIM: ml.constexpr):
    """Row-major offsets of a (S0,), (S0, S1) or (S0, S1, S2) tile."""
    if NDIM == 1:
        return ml.arange(0, S0)
    if NDIM == 2:
        return ml.arange(0, S0)[:, None] * S1 + ml.arange(0, S1)[None, :]
    return (ml.arange(0, S0)[:, None, None] * S1 + ml.arange(0, S1)[None, :, None]) * S2 \
        + ml.arange(0, S2)[None, None, :]


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
    if OP == "shr":
        return x >> y
    if VARIANT == "lt":
        return x < y
    if VARIANT == "le":
        return x <= y
    if VARIANT == "gt":
        return x > y
    if VARIANT == "ge":
        return x >= y
    if VARIANT == "eq":
        return x == y
    return x != y


@mutile.jit
def binary_kernel(X, Y, O, OP: ml.constexpr, VARIANT: ml.constexpr, S0: ml.constexpr,
                  S1: ml.constexpr, S2: ml.constexpr, NDIM: ml.constexpr):
    offs = block(S0, S1, S2, NDIM)
    put(O, offs, binary(ml.load(X + offs), ml.load(Y + offs), OP, VARIANT))


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
    """Compile the IR ``text`` with every backend directly and run it: {backend: [out]}."""
    got = {}
    for be in BACKENDS:
        out = poison(out_shape, out_dtype)
        kernel = get_backend(be).compile(mir.verify(mir.parse(text)),
                                         {"num_warps": case.num_warps})
        kernel.run([x.copy(), out], (1,))
        got[be] = [out]
    return got


def dims(shape) -> dict:
    s = tuple(shape) + (1,) * (3 - len(shape))
    return {"S0": s[0], "S1": s[1], "S2": s[2], "NDIM": len(shape)}


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


def ulp(r64, dtype):
    """The spacing of ``dtype`` at each |r| (the smallest subnormal near zero)."""
    fi = ml_dtypes.finfo(dtype)
    a = np.abs(r64)
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), float(fi.minexp))
    return np.exp2(e - fi.nmant)


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


# ---------------------------------------------------------------- exact float references
def round_once(v64, dtype):
    """A float64 result rounded to ``dtype``; for one + - * / sqrt of ``dtype`` operands
    that is the correctly rounded result (f64 holds 2p+2 bits of the narrower types)."""
    v64 = np.asarray(v64, np.float64)
    return v64.astype(np.float32).astype(dtype) if np.dtype(dtype).itemsize < 4 \
        else v64.astype(dtype)


def _odd(v, larger):
    """Round to odd: where ``v`` (rounded to nearest) is inexact (``larger`` = +1 if the
    exact value's magnitude is above |v|, -1 if below) and even, step one ulp toward
    the exact value."""
    bits = v.view(f"u{v.itemsize}")
    fix = (larger != 0) & ((bits & 1) == 0) & np.isfinite(v) & (v != 0)
    return np.where(fix, bits + np.where(larger > 0, 1, -1).astype(bits.dtype), bits) \
        .view(v.dtype)


def round_sum(p, c, dtype):
    """p + c (float64 arrays) rounded once to ``dtype`` (f32, f16 or bf16): the exact
    sum is s + err (two-sum), rounded to odd in f64 (and again in f32 for bf16, as
    ml_dtypes goes through f32), then to nearest even: exact, as >= p + 2 bits remain."""
    with np.errstate(all="ignore"):
        s = p + c
        bb = s - p
        err = np.where(np.isfinite(s), (p - (s - bb)) + (c - bb), 0.0)
        o = _odd(s, np.sign(err) * np.sign(s))
        if np.dtype(dtype) == BF16:
            f = o.astype(np.float32)
            f = _odd(f, np.sign(o - f.astype(np.float64)) * np.sign(f))
            return f.astype(BF16)
        return o.astype(dtype)


def fma_ref(x, y, z, dtype):
    """x * y + z rounded once to ``dtype`` (the product is exact in f64 except for f64
    operands, which go through Fractions)."""
    dtype = np.dtype(dtype)
    if dtype != F64:
        return round_sum(x.astype(np.float64) * y.astype(np.float64), z.astype(np.float64),
                         dtype)
    out = []
    for a, b, c in zip(x.ravel().tolist(), y.ravel().tolist(), z.ravel().tolist()):
        if all(math.isfinite(v) for v in (a, b, c)) and math.isfinite(a * b + c):
            exact = Fraction(a) * Fraction(b) + Fraction(c)
            out.append(float(exact) if exact != 0 else a * b + c)  # float(): nearest even
        else:
            out.append(a * b + c)
    return np.array(out, F64).reshape(x.shape)


# ---------------------------------------------------------------- families
def run_binary(case: Case, rng):
    op, (xd, yd), v = case.op, case.dtypes, case.variant
    shape = (case.programs,) + case.shape
    x, y = random_data(xd, shape, rng), random_data(yd, shape, rng)
    if op in ("shl", "shr"):
        y = rng.integers(0, 8 * yd.itemsize + 4, shape).astype(yd)
    ct = computation_type(xd, yd, op, v)
    od = BOOL if op == "cmp" else ct
    got = single(launch(binary_kernel, case, [x, y], [(shape, od)], (case.programs,),
                        OP=op, VARIANT=v, **dims(case.shape)))
    cx, cy = (semantics.convert(a, ir(d), ir(ct)) for a, d in ((x, xd), (y, yd)))
    what = f"{short(xd)} {op}{v} {short(yd)}"
    if op == "cmp" and is_float(ct):
        want = PREDICATES[v](cx.astype(np.float64), cy.astype(np.float64))
    elif op == "cmp":
        want = PREDICATES[v](cx, cy)
    elif not is_float(ct):
        name = {"minimum": "min", "maximum": "max"}.get(op, op)
        want = semantics.evaluate(name, {}, [cx, cy], ir(ct), ir(ct))
    else:
        want = float_binary(op, v, cx, cy, ct)
    check_exact(got, want, what, signed_zeros=op not in ("minimum", "maximum"))


def float_binary(op, variant, cx, cy, ct):
    """The float result of ``op`` on operands already in the computation type."""
    a, b = cx.astype(np.float64), cy.astype(np.float64)
    with np.errstate(all="ignore"):
        if op in ("add", "sub", "mul", "div"):
            return round_once({"add": np.add, "sub": np.subtract, "mul": np.multiply,
                               "div": np.divide}[op](a, b), ct)
        if op == "rem":
            return np.fmod(cx, cy)                   # exact in any precision
        f = {"minimum": np.fmin, "maximum": np.fmax}[op] if variant != "nan_all" else \
            {"minimum": np.minimum, "maximum": np.maximum}[op]
        return f(a, b).astype(ct)


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
    shape = (case.programs,) + case.shape
    if case.op == "where":
        d = case.dtypes[1]
        c = rng.random(shape) < 0.5
        x, y = random_data(d, shape, rng), random_data(d, shape, rng)
        od = F16 if d in (E4M3, E5M2) else d            # fp8 computes as f16
        got = single(launch(ternary_kernel, case, [c, x, y], [(shape, od)], (case.programs,),
                            OP="where", **dims(case.shape)))
        return check_exact(got, np.where(c, x, y).astype(od), f"where {short(d)}")
    d = case.dtypes[0]
    x, y, z = (random_data(d, shape, rng) for _ in range(3))
    got = single(launch(ternary_kernel, case, [x, y, z], [(shape, d)], (case.programs,),
                        OP="fma", **dims(case.shape)))
    check_exact(got, fma_ref(x, y, z, d), f"fma {short(d)}")


def run_cast(case: Case, rng):
    shape = (case.programs,) + case.shape
    if case.op == "bitcast":
        src, dst = case.dtypes
        u = np.dtype(f"u{src.itemsize}")
        x = rng.integers(0, np.iinfo(u).max, shape, dtype=u, endpoint=True).view(src)
        got = launch(bitcast_kernel, case, [x], [(shape, dst)], (case.programs,),
                     **dims(case.shape))
        got = {be: g[0].view(u) for be, g in got.items()}            # NaN payloads too
        return check_exact(got, x.view(u), f"bitcast {short(src)} -> {short(dst)}")
    (src,) = case.dtypes
    x = random_data(src, shape, rng)
    if is_float(src):
        flat = x.reshape(-1)
        with np.errstate(all="ignore"):
            edges = np.array(CAST_EDGES + [-v for v in CAST_EDGES[:16]]).astype(src)
        k = min(flat.size - 8, len(edges))
        flat[8:8 + k] = edges[:k]
    got = launch(cast_kernel, case, [x], [(shape, d) for d in DTYPES], (case.programs,),
                 **dims(case.shape))
    for i, dst in enumerate(DTYPES):
        what = f"{short(src)} -> {short(dst)}"
        with np.errstate(all="ignore"):
            want = semantics.convert(x, ir(src), ir(dst))
            if is_float(src) and is_float(dst):
                assert_bits_equal(np.asarray(want).astype(dst), x.astype(dst),
                                  f"{what}: semantics.convert vs ml_dtypes")
        check_exact({be: g[i] for be, g in got.items()}, want, what)


def sum_dtype(d, op):
    """The result dtype of sum/cumsum (narrow integers widen; sum widens narrow floats)."""
    if d.kind in "iu" and d.itemsize < 4 and op in ("sum", "cumsum"):
        return np.dtype(np.uint32 if d.kind == "u" else np.int32)
    if op == "sum" and d in (F16, BF16):
        return F32
    return d


def run_reduce(case: Case, rng):
    op, (d,), axis = case.op, case.dtypes, case.axis
    x = random_data(d, case.shape, rng, specials=rng.random() < 0.7)
    if op in ("prod", "cumprod") and is_float(d):        # near 1, so products stay finite
        flat = x.reshape(-1)
        near1 = rng.uniform(0.75, 1.33, flat.size) * rng.choice([-1.0, 1.0], flat.size)
        flat[8:] = near1[8:].astype(d)
        if op == "prod":       # no subnormal: a product through one depends on the order
            flat[5:6] = d.type(0.5)
    if op in ("argmax", "argmin", "max", "min") and d.kind in "iu" and rng.random() < 0.5:
        x = rng.integers(0, 4, case.shape).astype(d)     # many ties
    scan = op in SCAN
    od = np.dtype(np.int32) if op.startswith("arg") else sum_dtype(d, op)
    oshape = case.shape if scan else () if axis is None else \
        case.shape[:axis] + case.shape[axis + 1:]
    consts = dict(OP="max" if op == "prod" else op, AXIS=axis, **dims(case.shape))
    if op == "prod":
        spec = {"X": T.PointerType(ir(d)), "O": T.PointerType(ir(od)), **consts}
        text = str(frontend_and_passes(reduce_kernel, spec, {})[0])
        assert text.count('kind = "max"') == 1, text
        got = launch_ir(text.replace('kind = "max"', 'kind = "prod"'), case, x, oshape, od)
    else:
        got = launch(reduce_kernel, case, [x], [(oshape, od)], **consts)
    what = f"{op} {short(d)} axis {axis}"
    got = {be: g[0].reshape(oshape) for be, g in got.items()}
    xa = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis
    if scan:
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
        return check_exact(got, (np.fmax if op == "max" else np.fmin).reduce(w, axis=ax)
                           .astype(od), what, signed_zeros=False)
    n, u = w.shape[ax], 2.0 ** -53 if d == F64 else 2.0 ** -24     # accumulation unit
    with np.errstate(all="ignore"):
        want = w.sum(ax) if op == "sum" else w.prod(ax)
        mag = np.abs(w).sum(ax) if op == "sum" else np.abs(want) * 1.01
        tol = n * u * mag + ulp(want, od) + 1e-300
    check_close(got, want, tol, what)


def arg_ref(x, axis, op):
    """First index of the extreme along ``axis``; NaNs ignored unless all are NaN."""
    a = np.moveaxis(x, axis, -1)
    if not is_float(a.dtype):
        return (a.argmax(-1) if op == "argmax" else a.argmin(-1)).astype(np.int32)
    w = a.astype(np.float64)
    nan = np.isnan(w)
    w = np.where(nan, -np.inf if op == "argmax" else np.inf, w)
    best = w.max(-1, keepdims=True) if op == "argmax" else w.min(-1, keepdims=True)
    hit = (w == best) & ~nan
    return np.where(hit.any(-1), hit.argmax(-1), 0).astype(np.int32)


def scan_ref(x, axis, op, od):
    """In-order inclusive scan in the compute type (f32 for narrow floats), rounded once
    per element; integers wrap in the result type."""
    ufunc = np.add if op == "cumsum" else np.multiply
    with np.errstate(all="ignore"):
        if not is_float(x.dtype):
            return ufunc.accumulate(x.astype(od), axis=axis, dtype=od)
        ct = F64 if x.dtype == F64 else F32
        return ufunc.accumulate(x.astype(ct), axis=axis).astype(od)


def to_tf32(x):
    """f32 rounded to nearest even to 10 mantissa bits."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    return ((bits + 0xFFF + lsb) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)


def run_dot(case: Case, rng):
    (d,), (m, n, k) = case.dtypes, case.shape
    prec, use_acc = case.variant.split("-")[0], case.variant.endswith("-acc")
    is_int = d.kind in "iu"
    od = np.dtype(np.int32) if is_int else F16 if prec == "f16acc" else F32
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
        return check_exact(got, (a.astype(np.int64) @ b.astype(np.int64) + acc).astype(od),
                           what)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if prec == "tf32":
        a32, b32 = to_tf32(a32), to_tf32(b32)
    for kk in range(k):          # c = fma(a[i, k], b[k, j], c), k in order, rounded each step
        p = a32[:, kk, None].astype(np.float64) * b32[None, kk, :].astype(np.float64)
        acc = round_sum(p, acc.astype(np.float64), od)
    check_exact(got, acc, what)


FAMILIES = {**dict.fromkeys(BINARY, run_binary), **dict.fromkeys(UNARY, run_unary),
            "fma": run_ternary, "where": run_ternary, "cast": run_cast, "bitcast": run_cast,
            **dict.fromkeys(REDUCE + SCAN, run_reduce), "dot": run_dot}


@pytest.mark.parametrize("case", PARAMS)
def test_differential(case, rng):
    FAMILIES[case.op](case, rng)


def test_cases_cover_every_op_and_dtype():
    """The default run draws every op at least twice and every dtype somewhere; every
    tile is a power of two per dimension, 1..128, at most 4096 elements."""
    fast = CASES[:FAST]
    assert all(sum(c.op == op for c in fast) >= 2 for op in OPS)
    seen = {d for c in fast for d in c.dtypes}
    assert set(DTYPES) <= seen, set(DTYPES) - seen
    assert {c.num_warps for c in fast} == {1, 2, 4, 8}
    assert {len(c.shape) for c in fast if c.op != "dot"} == {1, 2, 3}
    for c in CASES:
        assert all(1 <= s <= 128 and s & (s - 1) == 0 for s in c.shape), c
        assert np.prod(c.shape) <= 4096 or c.op == "dot", c
